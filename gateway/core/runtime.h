/*
 * runtime: what one loaded configuration runs on. The config itself, each route's limiters
 * and counters, the access log.
 *
 * A reload builds a new runtime beside the current one and swaps it in. Every request holds a
 * reference to the runtime it started under, so it finishes on that config whole, and an old
 * runtime is freed when its last request ends.
 *
 * A route runs one set of limits for its own limit: (or plan:), and, when the config has
 * plans, one more per plan (the route's version of it): a consumer's requests count in its
 * plan's set, under the consumer's name.
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
#ifndef SLUICE_GATEWAY_CORE_RUNTIME_H
#define SLUICE_GATEWAY_CORE_RUNTIME_H

#include <stdatomic.h>
#include <stdio.h>

#include "config/config.h"
#include "gateway/common/respond.h"
#include "gateway/identity/consumers.h"
#include "gateway/ops/metrics.h"
#include "gateway/store/store.h"
#include "gateway/upstream/backends.h"
#include "limiter/limiter.h"

/* A limiter, shared by the runtimes whose config has the same limit. */
struct gw_limit {
    _Atomic unsigned refs;
    struct limiter *limiter;
    /* What makes a limit "the same" across reloads, with its params. */
    char *route, *plan, *name; /* plan: "" for the route's own limits */
    enum config_key_kind key_kind;
    char *key_name; /* NULL for ip */
    struct gw_route_metrics *metrics;
};

/* The limits a request is held to: a route's own, or its version of one plan. */
struct gw_limit_set {
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
    struct gw_labelled *denials[LIMITER_MAX_PER_REQUEST]; /* each limit's denials */
};

struct gw_route_runtime {
    struct gw_limit_set own;    /* the route's limit: or plan: */
    struct gw_limit_set *plans; /* one per config plan, as config_route.plans; or NULL */
    bool shared;                /* in the shared store */
    char *unknown_key_detail; /* the 401's detail where a key names a consumer, or NULL */
    struct gw_backend_set backends; /* its upstream's servers */
    char **pools; /* per server, its connection pool's name (gw_upstream_acquire) */
    struct gw_retry_budget *budget;
    struct gw_route_metrics *metrics;
};

struct gw_runtime {
    _Atomic unsigned refs;
    struct config *config; /* owned */
    struct gw_store *store; /* the server's; outlives every runtime */
    struct gw_metrics *metrics;      /* the server's, likewise */
    struct gw_route_runtime *routes; /* one per config->routes */
    struct gw_consumers *consumers;  /* NULL when the config has none */
    int access_log_fd; /* -1 when off */
};

/* Builds a runtime for `config`, which it takes over (freed with the runtime, or at once on
 * failure). Limits equal to ones of `previous` (may be NULL) share their limiters. Returns
 * the runtime with one reference, or NULL with `err` filled. */
struct gw_runtime *gw_runtime_build(struct config *config, const struct gw_runtime *previous,
                                    struct gw_metrics *metrics, struct gw_backends *backends,
                                    struct gw_store *store, char *err, size_t err_len);

void gw_runtime_hold(struct gw_runtime *runtime);
void gw_runtime_release(struct gw_runtime *runtime);

/* The gauges of `runtime` (a struct gw_runtime *), for gw_metrics_render(): its limiters',
 * and its upstream servers' (backends.h). */
void gw_runtime_gauges(void *runtime, FILE *out);

/* Whether every route has a server believed healthy (for /readyz). */
bool gw_runtime_upstreams_ready(const struct gw_runtime *runtime, int64_t now_ns);

/* The servers' sets of every route, in route order (for gw_health_configure()). NULL when
 * memory is short; the caller frees the array. */
struct gw_backend_set **gw_runtime_backend_sets(struct gw_runtime *runtime);

#endif
