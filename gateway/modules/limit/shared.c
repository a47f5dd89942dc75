/* The limit module's calls to the shared store; design in shared.h. */
#include "gateway/modules/limit/shared.h"

struct gw_store_ask gw_limit_store_ask(const struct config_route *route,
                                       const struct gw_limit_set *set,
                                       const struct gw_limits_selection *selection,
                                       const char *const *ids)
{
    return (struct gw_store_ask){.op = GW_STORE_DECIDE,
                                 .route = route->name,
                                 .names = set->limit_names,
                                 .limits = set->shared_param_ptrs,
                                 .costs = selection->costs,
                                 .client_keys = ids,
                                 .n = set->n_limits};
}

void gw_limit_store_give_back(struct gw_store *store, const struct config_route *route,
                              const struct gw_limit_set *set,
                              const struct gw_limits_selection *selection, const char *const *ids,
                              const struct limiter_decision *decisions, const unsigned *status)
{
    const char *names[LIMITER_MAX_PER_REQUEST], *keys[LIMITER_MAX_PER_REQUEST];
    const struct limiter_params *limits[LIMITER_MAX_PER_REQUEST];
    uint64_t costs[LIMITER_MAX_PER_REQUEST];
    int64_t charged[LIMITER_MAX_PER_REQUEST];
    size_t n = 0;

    for (size_t i = 0; i < set->n_limits; i++) {
        if (status != NULL && config_count_holds(&set->config[i].count, *status))
            continue;
        names[n] = set->limit_names[i];
        limits[n] = set->shared_param_ptrs[i];
        costs[n] = selection->costs[i];
        charged[n] = decisions[i].charged_ns;
        keys[n++] = ids[i];
    }
    if (n > 0)
        gw_store_give_back(store, &(struct gw_store_ask){.op = GW_STORE_GIVE_BACK,
                                                         .route = route->name,
                                                         .names = names,
                                                         .limits = limits,
                                                         .costs = costs,
                                                         .charged_ns = charged,
                                                         .client_keys = keys,
                                                         .n = n});
}
