/*
 * shared: what the limit module asks of the shared store (gateway/store) about one request's
 * limits, beyond its decision: giving back the charges its answer does not count (count:),
 * in one call for all of them, at the instants Redis charged them. The concurrency slots it
 * holds there are slots.h's.
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_SHARED_H
#define SLUICE_GATEWAY_MODULES_LIMIT_SHARED_H

#include "gateway/limits/decide.h"
#include "gateway/modules/limit/limit_sets.h"
#include "gateway/store/store.h"

/* The store's question (op GW_STORE_DECIDE, no lease) about `set`'s limits on `route` for a
 * request selected as `selection`, limit i counting it under `ids[i]`. Points into its
 * arguments. */
struct gw_store_ask gw_limit_store_ask(const struct config_route *route,
                                       const struct gw_limit_set *set,
                                       const struct gw_limits_selection *selection,
                                       const char *const *ids);

/* Gives back, in `store`, each charge of the request's `decisions` whose limit's count: does
 * not hold the answer's `*status` (NULL: every charge, for a request that will not pass);
 * nothing when all of them hold it. */
void gw_limit_store_give_back(struct gw_store *store, const struct config_route *route,
                              const struct gw_limit_set *set,
                              const struct gw_limits_selection *selection, const char *const *ids,
                              const struct limiter_decision *decisions, const unsigned *status);

#endif
