/*
 * store_health: whether the Redis store is healthy or degraded, and when it may be tried.
 *
 * Healthy, every call goes to Redis. A failure (refused, timed out, an error reply, or no
 * answer within the call's deadline) degrades the store: calls are then not made at all, and
 * the caller applies on_store_error, until a backoff (100 ms, doubling to 5 s) lets one call
 * through to probe; the probe's success, and nothing else, ends the spell. A call that was
 * under way when Redis failed and succeeds later does not: it says nothing of Redis now, and
 * would cut the backoff short (under load the store flapped, and a quota of 50 let up to 88
 * through). Each change is logged once with its reason in Redis's words, again when a probe
 * fails for another reason, and counted in the metrics.
 *
 * Threads: every function may be called from any thread at once (atomics; the last reason
 * logged is under a lock).
 */
#ifndef SLUICE_GATEWAY_STORE_HEALTH_H
#define SLUICE_GATEWAY_STORE_HEALTH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define GW_STORE_WHY_LEN 256 /* why a call failed, as the log says it */

struct gw_store_health {
    const char *where; /* "at HOST:PORT", or the sentinels' master: for the log (the store's;
                          outlives this) */
    /* Healthy while even, degraded while odd; each change adds one. A call keeps the value
     * it started under, and its outcome counts only if that is still current: a call that
     * started healthy cannot end a degraded spell, nor one begun before a recovery start the
     * next. */
    _Atomic uint64_t state;
    _Atomic int64_t retry_at_ns; /* while degraded: when one call may probe Redis again */
    _Atomic int64_t backoff_ns;
    _Atomic uint64_t errors;
    pthread_mutex_t lock;
    char last_why[GW_STORE_WHY_LEN]; /* under `lock`: the failure the log last reported */
};

void gw_store_health_init(struct gw_store_health *h, const char *where);
void gw_store_health_destroy(struct gw_store_health *h);

/* Whether a call may go to Redis now: always while healthy; while degraded, once per backoff,
 * for exactly one caller, the probe. `*state` is the state the call starts under. */
bool gw_store_health_may_try(struct gw_store_health *h, uint64_t *state);

/* A call begun under `state` failed because of `why` (counted as an error). The first
 * failure of a healthy store degrades it; a failed probe doubles the backoff; the failures of
 * calls begun before the last change change nothing more. */
void gw_store_health_failed(struct gw_store_health *h, uint64_t state, const char *why);

/* A call begun under `state` succeeded: if it was the probe, the store is healthy again. */
void gw_store_health_succeeded(struct gw_store_health *h, uint64_t state);

/* How many times the store has degraded: a connection opened before the last of them is not
 * trusted again (whatever broke one connection most likely broke the others). */
uint64_t gw_store_health_spells(const struct gw_store_health *h);

#endif
