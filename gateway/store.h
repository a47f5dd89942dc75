/*
 * store: client states shared by every gateway replica, in Redis (or Valkey), through hiredis.
 *
 * One Lua script, loaded once (SCRIPT LOAD, again on NOSCRIPT) and run with EVALSHA, decides a
 * request against all of a route's limits atomically: every limit allows it and is charged,
 * or none is. It reads the Redis server's own clock (TIME), so replicas with skewed clocks
 * agree, and every key carries a TTL, so idle clients expire in Redis. Keys are
 * PREFIX ROUTE ":" LIMIT ":" BLAKE2b-128(client key) in hex (the window algorithms add the
 * window's start), so no raw API key is stored. Each limit hashes its own client key (a route
 * may count one limit per API key and another per address); the script gets the finished
 * keys, so all of a request's limits still go in one EVALSHA, and a limit keyed as before
 * keeps its Redis keys. token_bucket and gcra are both kept as a theoretical arrival time in
 * microseconds (the same contract); fixed_window and sliding_window_counter as counters per
 * window; sliding_window_log as a sorted set.
 *
 * Connections come from a small pool; each call is bounded by `timeout` for connecting,
 * sending and reading. A failure (refused, timed out, an error reply) marks the store
 * degraded: calls are then skipped, and the caller applies on_store_error, until a backoff
 * (100 ms, doubling to 5 s) lets one call through to probe; the first success ends it. Each
 * change is logged once and counted in the metrics.
 */
#ifndef SLUICE_GATEWAY_STORE_H
#define SLUICE_GATEWAY_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "limiter.h"

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
 * defaulted), limit i counting it under `client_keys[i]`, filling one decision each: all are
 * charged, or none. Nothing passed in is kept. */
enum gw_store_result gw_store_decide(struct gw_store *store, const char *route,
                                     const char *const *limit_names,
                                     const struct limiter_params *const *limits, size_t n,
                                     const char *const *client_keys, struct limiter_decision *out);

/* The store's lines for /metrics: sluice_store_errors_total, sluice_store_degraded. */
void gw_store_render_metrics(const struct gw_store *store, FILE *out);

#endif
