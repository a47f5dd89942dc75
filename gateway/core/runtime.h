/*
 * runtime: what one loaded configuration runs on: the config itself, each route's counters
 * and each module's per-route state (module.h's route_open, built here for every route), the
 * consumers, the access log.
 *
 * A reload builds a new runtime beside the current one and swaps it in. Every request holds a
 * reference to the runtime it started under, so it finishes on that config whole, and an old
 * runtime is freed when its last request ends. A module may carry state over from the
 * runtime it replaces (`previous`): the limit module keeps an unchanged limit's limiter, and
 * with it every client's state (modules/limit/limit_sets.h).
 */
#ifndef SLUICE_GATEWAY_CORE_RUNTIME_H
#define SLUICE_GATEWAY_CORE_RUNTIME_H

#include <stdatomic.h>
#include <stdio.h>

#include "config/config.h"
#include "gateway/identity/consumers.h"
#include "gateway/ops/metrics.h"
#include "gateway/store/store.h"
#include "gateway/upstream/backends.h"
#include "limiter/limiter.h"

#define GW_MODULES_MAX 16 /* modules in the pipeline (pipeline.h) */

/* A route's state in one runtime: its counters, and each module's own (module.h's
 * route_open), by module id. */
struct gw_route_runtime {
    struct gw_route_metrics *metrics;
    void *state[GW_MODULES_MAX];
};

struct gw_runtime {
    _Atomic unsigned refs;
    struct config *config;           /* owned */
    struct gw_store *store;          /* the server's; outlives every runtime */
    struct gw_metrics *metrics;      /* the server's, likewise */
    struct gw_backends *backends;    /* the server's servers, likewise (backends.h) */
    struct gw_route_runtime *routes; /* one per config->routes */
    struct gw_consumers *consumers;  /* NULL when the config has none */
    int access_log_fd;               /* -1 when off */
};

/* Builds a runtime for `config`, which it takes over (freed with the runtime, or at once on
 * failure). Limits equal to ones of `previous` (may be NULL) share their limiters. Returns
 * the runtime with one reference, or NULL with `err` filled. */
struct gw_runtime *gw_runtime_build(struct config *config, const struct gw_runtime *previous,
                                    struct gw_metrics *metrics, struct gw_backends *backends,
                                    struct gw_store *store, char *err, size_t err_len);

void gw_runtime_hold(struct gw_runtime *runtime);
void gw_runtime_release(struct gw_runtime *runtime);

/* The gauges of `runtime` (a struct gw_runtime *), for gw_metrics_render(): each module's
 * (module.h's gauges). */
void gw_runtime_gauges(void *runtime, FILE *out);

#endif
