/*
 * store: client states shared by every gateway replica, in Redis (or Valkey), through hiredis.
 *
 * One Lua script, loaded once (SCRIPT LOAD, again on NOSCRIPT) and run with EVALSHA, decides a
 * request against all of a route's limits atomically: every limit allows it and is charged,
 * or none is. It reads the Redis server's own clock (TIME), so replicas with skewed clocks
 * agree, and every key carries a TTL, so idle clients expire in Redis. token_bucket and gcra
 * are both kept as a theoretical arrival time in microseconds (the same contract);
 * fixed_window and sliding_window_counter as counters per window; sliding_window_log as a
 * sorted set.
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
 * Connections come from a small pool; each call is bounded by `timeout` for connecting,
 * sending and reading (50 ms by default: on a loaded 2-core host EVALSHA's p99 reached 7 ms
 * and its maximum 48 ms, so 5 ms timed out often). A failure (refused, timed out, an error
 * reply) marks the store degraded: calls are then skipped, and the caller applies
 * on_store_error, until a backoff (100 ms, doubling to 5 s) lets one call through to probe;
 * the probe's success, and nothing else, ends it. A call that was under way when Redis failed
 * and succeeds later does not: it says nothing of Redis now, and would cut the backoff short
 * (under load the store flapped, and a quota of 50 let up to 88 through). Each change is
 * logged once with its reason in Redis's words (WRONGPASS, NOAUTH, NOPERM, WRONGTYPE, or the
 * connection's error), again when a probe fails for another reason, and counted in the
 * metrics.
 */
#ifndef SLUICE_GATEWAY_STORE_H
#define SLUICE_GATEWAY_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "limiter/limiter.h"

struct gw_store;

enum gw_store_result {
    GW_STORE_OK,
    GW_STORE_FAILED, /* Redis failed, or is being left alone while it recovers */
};

/* A store for limiter.redis of `config` (copied). Connects on first use. NULL when memory is
 * short. */
struct gw_store *gw_store_new(const struct config *config);
void gw_store_free(struct gw_store *store);

/* Decides one request on `route` against `n` limits (names and parameters, burst already
 * defaulted), limit i counting it under `client_keys[i]` at a cost of `costs[i]` units (1 to
 * its quota, as limiter_decide_all_cost()), filling one decision each: all are charged, or
 * none. Nothing passed in is kept. */
enum gw_store_result gw_store_decide(struct gw_store *store, const char *route,
                                     const char *const *limit_names,
                                     const struct limiter_params *const *limits,
                                     const uint64_t *costs, size_t n,
                                     const char *const *client_keys, struct limiter_decision *out);

/* The store's lines for /metrics: sluice_store_errors_total, sluice_store_degraded. */
void gw_store_render_metrics(const struct gw_store *store, FILE *out);

#endif
