/*
 * slots: the concurrency slots a request holds (limiter.h: algorithm concurrency) for as long
 * as its connection serves it. The limit module charges them with the request's other limits
 * when it admits the request; this gives them back when the request ends: its answer sent or
 * failed, its client gone, or, for a request that switched protocols, its tunnel closed
 * (gw_req_hold()). What is held keeps the request's runtime, and with it the limiters, alive
 * until then, even past a reload. sluice_limit_in_flight counts the units held per limit.
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_SLOTS_H
#define SLUICE_GATEWAY_MODULES_LIMIT_SLOTS_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/core/request.h"
#include "gateway/modules/limit/limit_sets.h"

/* Whether any of `set`'s limits counts requests in flight. */
bool gw_limit_set_has_slots(const struct gw_limit_set *set);

/* Holds the slots `rq` was just charged by `set`'s concurrency limits, limit i under `ids[i]`
 * at `costs[i]` units, until the request ends. 0; or -1 when memory is short, and then they
 * were given back at once. */
int gw_limit_slots_hold(struct gw_req *rq, const struct gw_limit_set *set, const char *const *ids,
                        const uint64_t *costs);

#endif
