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

void gw_limit_question(struct gw_limit_question *q, enum gw_store_op op,
                       const struct config_route *route, const struct gw_limit_set *set,
                       const uint64_t *costs, const char *const *ids, const bool *pick,
                       const int64_t *charged_ns)
{
    size_t n = 0;

    for (size_t i = 0; i < set->n_limits; i++) {
        if (pick != NULL && !pick[i])
            continue;
        q->names[n] = set->limit_names[i];
        q->limits[n] = set->shared_param_ptrs[i];
        q->costs[n] = costs[i];
        q->charged_ns[n] = charged_ns != NULL ? charged_ns[i] : 0;
        q->keys[n++] = ids[i];
    }
    q->ask = (struct gw_store_ask){.op = op,
                                   .route = route->name,
                                   .names = q->names,
                                   .limits = q->limits,
                                   .costs = q->costs,
                                   .charged_ns = charged_ns != NULL ? q->charged_ns : NULL,
                                   .client_keys = q->keys,
                                   .n = n};
}

void gw_limit_store_give_back(struct gw_store *store, const struct config_route *route,
                              const struct gw_limit_set *set,
                              const struct gw_limits_selection *selection, const char *const *ids,
                              const struct limiter_decision *decisions, const unsigned *status)
{
    bool pick[LIMITER_MAX_PER_REQUEST];
    int64_t charged[LIMITER_MAX_PER_REQUEST];
    struct gw_limit_question q;

    for (size_t i = 0; i < set->n_limits; i++) {
        pick[i] = status == NULL || !config_count_holds(&set->config[i].count, *status);
        charged[i] = decisions[i].charged_ns;
    }
    gw_limit_question(&q, GW_STORE_GIVE_BACK, route, set, selection->costs, ids, pick, charged);
    if (q.ask.n > 0)
        gw_store_give_back(store, &q.ask);
}
