/*
 * limit_sets: the limit module's state of one route in one runtime (module.h's route_open):
 * the sets of limits a request may be held to. A route runs one set for its own limit: (or
 * plan:), and, when the config has plans, one more per plan (the route's version of it): a
 * consumer's requests count in its plan's set, under the consumer's name.
 *
 * Limiters carry over: a limit whose route name, plan, limit name, key (its own or the route's),
 * parameters (algorithm, requests, per, burst) and limiter.max_clients are all unchanged keeps
 * its limiter, and with it every client's state (a client that spent its quota stays limited).
 * A limit that changed in any of these starts afresh: every client gets the new limit's full
 * quota. The key is part of it because the states are counted per client id: after `ip`
 * became `header:X-API-Key`, states of addresses would only linger until evicted, and after
 * `header:A` became `header:B` one client's count would pass to whoever sends the same value in
 * B. Limits of routes that disappear are freed with the last runtime that uses them.
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_SETS_H
#define SLUICE_GATEWAY_MODULES_LIMIT_SETS_H

#include <stdatomic.h>
#include <stdio.h>

#include "gateway/core/runtime.h"

/* A limiter, shared by the runtimes whose config has the same limit. */
struct gw_limit {
    _Atomic unsigned refs;
    struct limiter *limiter;
    /* What makes a limit "the same" across reloads, with its params. */
    char *route, *plan, *name; /* plan: "" for the route's own limits */
    enum config_key_kind key_kind;
    char *key_name; /* NULL for ip */
    struct gw_route_metrics *metrics;
    _Atomic int64_t in_flight; /* concurrency: units held by requests not yet ended (slots.h) */
    _Atomic int64_t waiting;   /* delay: requests waiting for their turn (turns.h) */
};

/* A reference more, for what outlives the runtimes that hold the limit (slots.h); dropped
 * with gw_limit_release(), the last one freeing it (its evictions stay counted in the route's
 * metrics). Thread-safe. */
void gw_limit_retain(struct gw_limit *limit);
void gw_limit_release(struct gw_limit *limit);

/* The limits a request is held to: a route's own, or its version of one plan. */
struct gw_limit_set {
    uint64_t serial;                                   /* numbered for life (refusals.h) */
    const struct config_limit *config;                 /* n_limits of them */
    struct limiter *limiters[LIMITER_MAX_PER_REQUEST]; /* for limiter_decide_all() */
    struct gw_limit *limits[LIMITER_MAX_PER_REQUEST];
    size_t n_limits;
    /* Each limit's name in the shared store and in metrics: "PLAN/LIMIT" for a plan's. */
    char *store_names[LIMITER_MAX_PER_REQUEST];
    /* Routes in the shared store: their limits as Redis runs them (burst defaulted), while
     * `limiters` above are the local fallback, each quota divided by limiter.replicas. */
    const char *limit_names[LIMITER_MAX_PER_REQUEST];
    struct limiter_params shared_params[LIMITER_MAX_PER_REQUEST];
    const struct limiter_params *shared_param_ptrs[LIMITER_MAX_PER_REQUEST];
    char *policy;             /* the RateLimit-Policy value: one item per limit */
    struct gw_labelled *plan; /* its requests' counters; NULL for the route's own limits */
    struct gw_labelled *counts[LIMITER_MAX_PER_REQUEST]; /* each limit's denials and refunds */
};

/* One route's limit sets. */
struct gw_limit_route {
    struct gw_limit_set own;    /* the route's limit: or plan: */
    struct gw_limit_set *plans; /* one per config plan, as config_route.plans; or NULL */
    size_t n_plans;
    bool shared;              /* in the shared store */
    char *unknown_key_detail; /* the 401's detail where a key names a consumer, or NULL */
};

/* Route `route` of `rt`'s sets into a new `*out`, limiters carried over from `previous`'s
 * limit module `state_of` (NULL: none) where they are the same. 0, or -1 with `err` (what was
 * made is in `*out`, for gw_limit_route_free()). */
int gw_limit_route_open(const struct gw_runtime *rt, size_t route,
                        const struct gw_runtime *previous,
                        const struct gw_limit_route *(*state_of)(const struct gw_runtime *, size_t),
                        struct gw_limit_route **out, char *err, size_t err_len);
void gw_limit_route_free(struct gw_limit_route *r);

/* sluice_limiter_clients and sluice_limiter_evictions_total of every route of `rt`. */
void gw_limit_routes_render(const struct gw_runtime *rt,
                            const struct gw_limit_route *(*state_of)(const struct gw_runtime *,
                                                                     size_t),
                            FILE *out);

#endif
