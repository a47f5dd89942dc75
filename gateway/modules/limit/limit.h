/*
 * limit module: the route's limits, asked for each request (decide.h chooses and decides;
 * this module reads the request for it and reports the answer).
 *
 *   LIMIT      the client as its keys see it (identify.h): a route whose key names consumers
 *              holds a consumer to its plan, and refuses an unknown key (401) when
 *              unknown_key is reject; each limit counts the client under the route's key or
 *              its own, at the cost of the method. A client in the route's exempt is counted
 *              by no limit (decision "exempt"). Then the limits decide: in this process, or in
 *              the shared store (the step WAITs for its answer). A refused request is denied
 *              with on_limit's status (429 unless set), or only logged on a dry_run route.
 *   answers    every answer of a limited request carries the RateLimit fields of the
 *              route's headers: mode (respond.h), for the limit that binds; a denial carries
 *              Retry-After and on_limit's body. The upstream's own RateLimit fields are
 *              dropped (owns_field), so the client gets one set. Each limit whose count:
 *              does not hold the answer's status gives its charge back, where it was
 *              charged: in this process, or in the shared store (shared.h). Concurrency
 *              slots are held until the request ends (slots.h).
 *   log        the keys the request was counted under, the limit that denied it, when the
 *              limits decided; sluice_requests_total by decision and plan, each refusing
 *              limit's denials and each giving limit's refunds.
 *
 * Its YAML keys: exempt and dry_run, its own (limit_options.h); and limit, plan, key, cost,
 * headers, on_limit, unknown_key, which `sluice simulate` reads too (config/limits.c,
 * config/plans.c, config/consumers.c). Its per-route state: the limit sets
 * the runtime builds (runtime.h).
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_H
#define SLUICE_GATEWAY_MODULES_LIMIT_H

#include "gateway/core/module.h"

extern struct gw_module gw_limit_module;

#endif
