/*
 * access module: whether the client may use the route at all.
 *
 *   ACCESS  a client (as its keys see it: behind trusted proxies, their X-Forwarded-For's)
 *           in server.deny or the route's deny is refused 403, decision "forbidden". A
 *           connection that is no IP connection has no address to judge, and passes.
 *
 * Its YAML keys: server.deny and a route's deny (access_options.h); no per-request context.
 */
#ifndef SLUICE_GATEWAY_MODULES_ACCESS_H
#define SLUICE_GATEWAY_MODULES_ACCESS_H

#include "gateway/core/module.h"

extern struct gw_module gw_access_module;

#endif
