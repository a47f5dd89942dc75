/*
 * store: client states shared by every gateway replica, in Redis (or Valkey), through hiredis.
 *
 * One Lua script, loaded once (SCRIPT LOAD, again on NOSCRIPT) and run with EVALSHA, decides a
 * request against all of a route's limits atomically: every limit allows it and is charged,
 * or none is. It reads the Redis server's own clock (TIME), so replicas with skewed clocks
 * agree, and every key carries a TTL, so idle clients expire in Redis. token_bucket and gcra
 * are both kept as a theoretical arrival time in microseconds (the same contract);
 * fixed_window and sliding_window_counter as counters per window; sliding_window_log as a
 * sorted set; concurrency as a sorted set of leases (KEY ":slots", each member one unit of a
 * request, scored by when its lease lapses). The same script gives back what a decision
 * charged (count:, and a concurrency request that ended) and renews leases (store_leases.h):
 * one call each way. For an operator it also peeks at a client's limits, resets them and
 * grants units back at them, as limiter_peek(), limiter_reset() and limiter_grant() do in
 * memory, so a change made through any replica holds on all of them.
 *
 * Keys are PREFIX ROUTE ":" LIMIT ":" VERSION ":" BLAKE2b-128(client key) in hex, with the
 * window's start added by fixed_window and sliding_window_counter and ":log" by
 * sliding_window_log, so no raw API key is stored. For API key "abc" under config/sluice.yaml's
 * route api (burst: gcra 10 per 1m, burst 5; daily: fixed_window 1000 per 1d):
 *   sluice:api:burst:53a895c8:65fa7c538f87f5b19d6004c00d4dd7c6
 *   sluice:api:daily:c1a95735:65fa7c538f87f5b19d6004c00d4dd7c6:1795996800000000
 * VERSION is 8 hex digits of BLAKE2b over the limit's algorithm, requests, per and burst. A
 * reload that changes any of them gives the limit new keys, so it starts afresh in Redis as it
 * does in memory (runtime.h) and never meets the old algorithm's keys (Redis would answer
 * WRONGTYPE); the old keys expire with their TTL. An unchanged limit keeps its keys, across
 * reloads and restarts, on every replica. Going back to an earlier limit within its keys' TTL
 * finds its old counts (memory would start afresh). Whatever the versions, a key's type
 * follows from its form (a plain key is a string, ":log" a sorted set, a window's start a
 * counter), so not even two versions that collide can meet a key of the wrong type. Each
 * limit hashes its own client key (a route may count one limit per API key and another per
 * address); the script gets the finished keys, so all of a request's limits still go in one
 * EVALSHA.
 *
 * The store has GW_STORE_THREADS (4) threads of its own, each with one connection to Redis,
 * and a queue of calls (store_workers.h); nothing else runs on them. Both serving modes queue
 * their requests' calls there with a callback: it resumes the connection in event mode and
 * wakes the connection's thread in thread_per_connection. A thread sends each call the moment it is
 * queued, behind those already under way on its connection, and Redis answers them in order:
 * the gateway keeps four connections to Redis however many clients ask at once, and a slow
 * Redis costs each request one round trip, not a place in a line.
 *
 * limiter.redis.timeout (50 ms by default: on a loaded 2-core host EVALSHA's p99 reached 7 ms
 * and its maximum 48 ms, so 5 ms timed out often) bounds a request's whole wait for the store,
 * from the moment it asks: queue, resolving the host's name, connecting, sending and reading.
 * A call still queued at its deadline is not sent; a call under way is cut off (every wait of
 * a store thread, the name's lookup among them, is bounded by the time left:
 * store_resolve.h). Each is a failure: on_store_error decides the request, and the
 * store counts an error. No retry restarts the clock: the one retry (of a call whose
 * connection broke, as one Redis closed while idle does; store_workers.h) and a reload of the
 * script after NOSCRIPT use only the time left.
 *
 * A failure (refused, timed out, an error reply) marks the store degraded: calls are then not
 * made, and the caller applies on_store_error, until a backoff (100 ms, doubling to 5 s) lets
 * one call through to probe; the probe's success, and nothing else, ends it
 * (store_health.h).
 */
#ifndef SLUICE_GATEWAY_STORE_H
#define SLUICE_GATEWAY_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "limiter/limiter.h"

struct gw_store;

#define GW_STORE_LEASE_LEN 33 /* a lease's id: 32 hex digits */

enum gw_store_op {
    GW_STORE_DECIDE = 1,    /* answers one decision per limit */
    GW_STORE_GIVE_BACK = 2, /* answers nothing */
    GW_STORE_RENEW = 3,     /* concurrency limits only; answers nothing */
    GW_STORE_PEEK = 4,      /* answers as DECIDE would, charging nothing and keeping no place */
    GW_STORE_RESET = 5,     /* each limit's state for the client made a fresh client's (not a
                               concurrency limit's, as limiter_reset()); answers each[i].allowed:
                               whether the client had spent anything there */
    GW_STORE_GRANT = 6,     /* costs[i] units given back at limit i, as limiter_grant(); answers
                               as RESET */
    GW_STORE_BEAT = 7,      /* a replica's heartbeat (store_replicas.h): answers the replicas
                               alive in each[0].remaining */
};

/* One call's question about one request's limits. */
struct gw_store_ask {
    enum gw_store_op op;
    const char *route;
    const char *const *names;                   /* each limit's name in the store */
    const struct limiter_params *const *limits; /* each limit as the store runs it */
    const uint64_t *costs;                      /* the units it takes of each; NULL: 1 each */
    const int64_t *charged_ns;  /* GIVE_BACK: each decision's charged_ns; else NULL */
    const int64_t *max_wait_ns; /* DECIDE: how long it may wait for its turn at each (delay:);
                                   NULL: not at all */
    const char *const *client_keys;
    size_t n;          /* 1 to LIMITER_MAX_PER_REQUEST */
    const char *lease; /* the request's lease id (concurrency slots); NULL without one */
};

enum gw_store_result {
    GW_STORE_OK,
    GW_STORE_FAILED, /* Redis failed, or is being left alone while it recovers */
};

/* A store for limiter.redis of `config` (copied). Starts its threads and connects on first
 * use. NULL when memory is short. */
struct gw_store *gw_store_new(const struct config *config);
void gw_store_free(struct gw_store *store);

/* Decides one request against `ask`'s limits (op GW_STORE_DECIDE: names and parameters,
 * burst already defaulted; limit i counting it under client_keys[i] at a cost of costs[i]
 * units, 1 to its quota, as limiter_decide_all_cost(); the request's lease when any is
 * concurrency), one decision each: all are charged, or none. In two steps, so that the caller
 * need not wait here (the gateway's requests wait by their adapter's means in either serving
 * mode). First the call, its deadline set to now plus limiter.redis.timeout: NULL when the
 * store is not to be asked now (degraded and this is not the probe, or memory short), and
 * on_store_error decides at once. Nothing passed in is kept.
 *
 * An operator's calls go the same way: GW_STORE_PEEK (one decision each, charged_ns and
 * wait_ns 0), GW_STORE_RESET and GW_STORE_GRANT (each decision's `allowed` alone: whether the
 * client had spent anything at that limit, so that the call changed it). A GRANT is never sent
 * twice, as a give-back (below): one whose connection broke fails rather than risk granting twice.
 * A PEEK or a RESET, which may run twice without harm, is sent again once, as a decision is. */
struct gw_store_call;
struct gw_store_call *gw_store_prepare(struct gw_store *store, const struct gw_store_ask *ask);

/* Then it is sent, and is the store's. `done(arg, result)` runs exactly once, on one of the
 * store's threads by the call's deadline (plus the moment it takes to deliver), or on this
 * thread before gw_store_send() returns when the store is stopping; `out` (n decisions) is
 * filled first when GW_STORE_OK, and must live until then. */
typedef void gw_store_done_fn(void *arg, enum gw_store_result result);
void gw_store_send(struct gw_store *store, struct gw_store_call *call, struct limiter_decision *out,
                   gw_store_done_fn *done, void *arg);

/* Gives back what a decision charged (`ask`, op GW_STORE_GIVE_BACK, with each limit's
 * charged_ns as the decision said), as limiter_refund() would: sent without waiting, and
 * never sent twice (a call whose connection broke is not tried again: Redis may have run it).
 * A store that is not to be asked now (degraded) keeps the charge, which is never too
 * generous. */
void gw_store_give_back(struct gw_store *store, const struct gw_store_ask *ask);

/* Holds the concurrency slots a decision just took for a request (`ask`: its concurrency
 * limits alone, with its lease), renewing their lease until gw_store_release() gives them
 * back (store_leases.h). NULL when memory is short: they lapse with their lease. */
struct gw_store_lease;
struct gw_store_lease *gw_store_hold(struct gw_store *store, const struct gw_store_ask *ask);
void gw_store_release(struct gw_store *store, struct gw_store_lease *lease);

/* The version of hiredis sluice was built with (static; hiredis says no other), for
 * sluice_build_info. */
const char *gw_store_library_version(void);

/* The replicas sharing the store, as they announce themselves in Redis (limiter.replicas:
 * auto, store_replicas.h): the last count, 0 before the first or without auto. */
uint32_t gw_store_replicas(const struct gw_store *store);

/* Stops the store's threads once every call sent so far is answered: event mode's last
 * answers resume their connections before the daemons stop. Later calls fail at once. */
void gw_store_stop(struct gw_store *store);

/* The store's lines for /metrics: sluice_store_errors_total, sluice_store_degraded,
 * sluice_store_leases. */
void gw_store_render_metrics(const struct gw_store *store, FILE *out);

#endif
