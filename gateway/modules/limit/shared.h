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

/* The store's question `op` about the limits of `set` that `pick` marks (NULL: every one),
 * limit i counting the client under `ids[i]` at `costs[i]` units (charged at `charged_ns[i]`,
 * for GW_STORE_GIVE_BACK; else NULL): `ask`, pointing into the rest. */
struct gw_limit_question {
    const char *names[LIMITER_MAX_PER_REQUEST], *keys[LIMITER_MAX_PER_REQUEST];
    const struct limiter_params *limits[LIMITER_MAX_PER_REQUEST];
    uint64_t costs[LIMITER_MAX_PER_REQUEST];
    int64_t charged_ns[LIMITER_MAX_PER_REQUEST];
    struct gw_store_ask ask; /* ask.n 0: `pick` marks none */
};
void gw_limit_question(struct gw_limit_question *q, enum gw_store_op op,
                       const struct config_route *route, const struct gw_limit_set *set,
                       const uint64_t *costs, const char *const *ids, const bool *pick,
                       const int64_t *charged_ns);

/* Gives back, in `store`, each charge of the request's `decisions` whose limit's count: does
 * not hold the answer's `*status` (NULL: every charge, for a request that will not pass);
 * nothing when all of them hold it. */
void gw_limit_store_give_back(struct gw_store *store, const struct config_route *route,
                              const struct gw_limit_set *set,
                              const struct gw_limits_selection *selection, const char *const *ids,
                              const struct limiter_decision *decisions, const unsigned *status);

#endif
