/*
 * upstream_route: the forward module's state of one route in one runtime (module.h's
 * route_open): the route's servers (their health and counts live in the server's registry,
 * backends.h, so they outlive reloads), the pool of upstream connections each draws from
 * (proxy.h: its origin, via the route's proxy), and the route's retry budget. Also what the
 * server asks of every route's upstream: whether each has a server believed healthy
 * (/readyz), the sets for the health checker, and the per-server metric families.
 */
#ifndef SLUICE_GATEWAY_MODULES_FORWARD_UPSTREAM_ROUTE_H
#define SLUICE_GATEWAY_MODULES_FORWARD_UPSTREAM_ROUTE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gateway/core/runtime.h"

struct gw_upstream_route {
    struct gw_backend_set backends;
    char **pools; /* per server, its connection pool's name (gw_upstream_acquire()) */
    struct gw_retry_budget *budget;
};

/* The route's state of `rt`, or NULL. */
struct gw_upstream_route *gw_upstream_route_of(const struct gw_runtime *rt, size_t route);

/* Whether every route of `rt` has a server believed healthy (for /readyz). */
bool gw_forward_upstreams_ready(const struct gw_runtime *rt, int64_t now_ns);

/* The servers' sets of every route, in route order (for gw_health_configure()). NULL when
 * memory is short; the caller frees the array. */
struct gw_backend_set **gw_forward_backend_sets(const struct gw_runtime *rt);

/* route_open, route_close and gauges of the forward module. */
int gw_upstream_route_open(struct gw_runtime *rt, size_t route, const struct gw_runtime *previous,
                           void **state, char *err, size_t err_len);
void gw_upstream_route_close(struct gw_runtime *rt, size_t route, void *state);
void gw_upstream_routes_render(const struct gw_runtime *rt, FILE *out);

#endif
