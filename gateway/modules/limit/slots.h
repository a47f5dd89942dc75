/*
 * slots: the concurrency slots a request holds (limiter.h: algorithm concurrency) for as long
 * as its connection serves it. The limit module charges them with the request's other limits
 * when it admits the request; this gives them back when the request ends: its answer sent or
 * failed, its client gone, or, for a request that switched protocols, its tunnel closed
 * (gw_req_hold()). What is held keeps a reference to each of its limits (limit_sets.h), so
 * their limiters live until then, even past a reload, without keeping the rest of an old
 * runtime. A reload that keeps a limit keeps its slots; one that changes it starts a new
 * limiter with none held, so until the old requests end both admit their own (at most twice
 * the cap, as any limit that changes starts afresh). sluice_limit_in_flight counts the units
 * held per limit by this replica's requests, in either store. In the shared store a slot is a
 * lease that this replica renews while the request lives and that lapses if it dies
 * (store_leases.h), so replicas hold one cap together.
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
 * at `costs[i]` units, until the request ends: in this process, or, when `lease` names the
 * lease the shared store charged them under, there (renewed meanwhile: store_leases.h). 0; or
 * -1 when memory is short, and then they were given back at once. */
int gw_limit_slots_hold(struct gw_req *rq, const struct gw_limit_set *set, const char *const *ids,
                        const uint64_t *costs, const char *lease);

/* Gives back, in the shared store, the slots a decision may have taken under `lease` for `set`'s
 * concurrency limits (limit i under `ids[i]`, `costs[i]` units): for a decision whose answer
 * was lost (a timeout, a broken connection), which Redis may have made all the same. Giving
 * back slots that were never taken takes nothing. */
void gw_limit_slots_give_back_in_store(struct gw_req *rq, const struct gw_limit_set *set,
                                       const char *const *ids, const uint64_t *costs,
                                       const char *lease);

#endif
