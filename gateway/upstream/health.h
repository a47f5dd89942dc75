/*
 * health: active health checks, for every upstream with a health_check, from one thread that
 * never touches the request path. A shared upstream (upstreams:) is checked once per server,
 * under the first route that names it, whose forward proxy and TLS settings the checks use.
 *
 * Each server of such a route is sent `GET path` (its origin plus the check's path: the base
 * path of the server's URL is not prepended) every `interval`, through the route's forward
 * proxy and TLS settings, with `timeout` for the whole exchange. An answer whose status is in
 * `expect_status` is a pass; anything else (another status, no answer in time, a connection
 * failure) a fail. `unhealthy` fails in a row mark the server down (gw_backend.healthy), and
 * `healthy` passes in a row back up; each flip is logged with the last result. The checks of
 * all servers run concurrently on one curl multi handle, each server's on its own handle so
 * its connection is kept between checks.
 *
 * A reload hands over the new routes (gw_health_configure()); checks under way are dropped and
 * the new ones start at once. A server of a route that no longer has checks is marked healthy
 * (once the old checks are dropped), so that a check removed from the config cannot leave it
 * down for good. The counts in a row start afresh on each reload.
 */
#ifndef SLUICE_GATEWAY_HEALTH_H
#define SLUICE_GATEWAY_HEALTH_H

#include "config/config.h"
#include "gateway/upstream/backends.h"

struct gw_health;

/* Starts the checking thread, with nothing to check yet. NULL on failure. */
struct gw_health *gw_health_start(void);

/* The routes of `config` from now on: route i's servers are sets[i]. Copies what it needs. */
void gw_health_configure(struct gw_health *health, const struct config *config,
                         struct gw_backend_set *const *sets);

void gw_health_stop(struct gw_health *health);

/* `sluice healthcheck`: GET `url` once, on the calling thread, within `timeout_ms` for the
 * whole exchange. 0 when it answers 2xx; otherwise -1, and *why says why in libcurl's words,
 * or "not a 2xx answer" (static strings), or is NULL when no request could be made (no
 * memory for one). */
int gw_health_probe(const char *url, long timeout_ms, const char **why);

#endif
