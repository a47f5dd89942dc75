/*
 * route module: what the request is, and which route serves it.
 *
 *   READ   the target must be a path (origin-form), a standard method in upper case, the path
 *          decoded as routes read it (target.h: rq->path), Host a host name or address: 400
 *          otherwise.
 *   ROUTE  the route (routes.h: rq->route), or 404. Every reading an upstream could make of
 *          the request must pick the same one: with the path's case folded (ASP.NET and IIS
 *          match paths so), without its path parameters (Java servlet containers), and by a
 *          trusted proxy's X-Forwarded-Host (which frameworks can be told to believe over
 *          Host). When they differ the request is refused (400) rather than guessed.
 *
 * Its YAML keys are the routes' match (config/routes.c); it has no per-request context.
 */
#ifndef SLUICE_GATEWAY_MODULES_ROUTE_H
#define SLUICE_GATEWAY_MODULES_ROUTE_H

#include "gateway/core/module.h"

extern struct gw_module gw_route_module;

#endif
