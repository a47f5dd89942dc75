/* A request's limits, chosen and asked; design in decide.h. */
#include <string.h>

#include "gateway/limits/decide.h"

void gw_limits_key_source(const struct config_route *route, const struct config_limit *limit,
                          char out[GW_KEY_SOURCE_LEN])
{
    if (limit->route_key)
        gw_key_source(route->key_kind, route->key_name, route->identifies_consumers, out);
    else
        gw_key_source(limit->key_kind, limit->key_name, false, out);
}

/* The set's index: the consumer's plan, else (a consumer route) the anonymous plan, else the
 * route's own; -2 when an unknown key is refused. */
static long plan_of(const struct config_route *route, const struct gw_consumer *consumer,
                    bool exempt)
{
    if (!route->identifies_consumers)
        return GW_LIMITS_OWN;
    if (consumer != NULL)
        return (long)consumer->plan;
    if (route->unknown_key == CONFIG_UNKNOWN_KEY_REJECT && !exempt)
        return -2;
    return route->anonymous_plan >= 0 ? route->anonymous_plan : GW_LIMITS_OWN;
}

/* The units a request with `method` takes of `limit` (its cost:, 1 by default). */
static uint64_t cost_of(const struct config_limit *limit, const char *method)
{
    for (size_t i = 0; i < limit->n_costs; i++)
        if (strcmp(limit->costs[i].method, method) == 0)
            return limit->costs[i].units;
    return limit->default_cost > 0 ? limit->default_cost : 1;
}

bool gw_limits_own_decide(const struct config_route *route)
{
    return !route->identifies_consumers ||
           (route->unknown_key == CONFIG_UNKNOWN_KEY_ANONYMOUS && route->anonymous_plan < 0);
}

bool gw_limits_plans_decide(const struct config_route *route)
{
    return route->identifies_consumers && route->plans != NULL;
}

int gw_limits_select(const struct config_route *route, const struct gw_consumer *consumer,
                     bool exempt, const char *method, struct gw_limits_selection *out)
{
    long plan = plan_of(route, consumer, exempt);

    if (plan < GW_LIMITS_OWN)
        return -1;
    out->plan = plan;
    out->limits = plan == GW_LIMITS_OWN ? route->limits : route->plans[plan].limits;
    out->n_limits = plan == GW_LIMITS_OWN ? route->n_limits : route->plans[plan].n_limits;
    out->waits = false;
    for (size_t i = 0; i < out->n_limits; i++) {
        const struct config_delay *delay = &out->limits[i].delay;

        out->route_key[i] = out->limits[i].route_key;
        out->costs[i] = cost_of(&out->limits[i], method);
        out->max_wait_ns[i] = delay->set ? delay->max_ns : 0;
        out->waits |= delay->set;
    }
    return 0;
}

static uint64_t share_of(uint64_t quota, uint32_t replicas)
{
    return quota / replicas > 0 ? quota / replicas : 1;
}

struct limiter_params gw_limits_store_params(const struct config_limit *limit)
{
    struct limiter_params params = limit->params;

    if (limiter_algorithm_takes_burst(params.algorithm_id) && params.burst == 0)
        params.burst = params.requests;
    return params;
}

struct limiter_params gw_limits_local_params(const struct config *config,
                                             const struct config_limit *limit, bool shared)
{
    struct limiter_params params = gw_limits_store_params(limit);

    if (shared && !config->replicas_auto) {
        params.requests = share_of(params.requests, config->replicas);
        if (limiter_algorithm_takes_burst(params.algorithm_id))
            params.burst = share_of(params.burst, config->replicas);
    }
    params.max_clients = config->max_clients;
    return params;
}

void gw_limits_share(struct gw_limits_selection *selection, struct limiter *const *limiters,
                     uint32_t replicas)
{
    if (replicas <= 1)
        return;
    for (size_t i = 0; i < selection->n_limits; i++) {
        uint64_t quota = limiter_quota(limiters[i]), cost = selection->costs[i];

        selection->costs[i] = cost > quota / replicas ? quota : cost * replicas;
    }
}

/* The decision to report of `n`: when denied, the limit that makes the client wait longest;
 * when allowed, the one with the fewest requests left. */
static size_t binding_limit(const struct limiter_decision *d, size_t n, bool allowed)
{
    size_t pick = 0;

    for (size_t i = 1; i < n; i++) {
        if (allowed ? d[i].remaining < d[pick].remaining
                    : (!d[i].allowed &&
                       (d[pick].allowed || d[i].retry_after_ms > d[pick].retry_after_ms)))
            pick = i;
    }
    return pick;
}

static enum gw_limits_outcome conclude(struct gw_limits_decision *d, size_t n,
                                       enum gw_limits_outcome outcome)
{
    d->outcome = outcome;
    d->binding = binding_limit(d->each, n, outcome == GW_LIMITS_ALLOWED);
    return outcome;
}

/* ALLOWED or DENIED, as d->each says of the `n` limits. */
static enum gw_limits_outcome conclude_each(struct gw_limits_decision *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!d->each[i].allowed)
            return conclude(d, n, GW_LIMITS_DENIED);
    return conclude(d, n, GW_LIMITS_ALLOWED);
}

enum gw_limits_outcome gw_limits_decide_local(struct gw_limits_decision *d,
                                              struct limiter *const *limiters,
                                              const char *const *ids,
                                              const struct gw_limits_selection *selection,
                                              int64_t now_ns)
{
    size_t n = selection->n_limits;

    int64_t admit_ns;
    int rc = selection->waits
                 ? limiter_reserve_all(limiters, n, ids, selection->costs, now_ns,
                                       selection->max_wait_ns, &admit_ns, d->each)
                 : limiter_decide_all_cost(limiters, n, ids, selection->costs, now_ns, d->each);

    d->decided_ns = now_ns;
    if (rc != 0)
        return conclude(d, n, GW_LIMITS_FAILED_CLOSED); /* no state for this client: refuse */
    return conclude_each(d, n);
}

enum gw_limits_outcome
gw_limits_decide_shared(struct gw_limits_decision *d, enum gw_store_result result,
                        enum config_store_error on_error, struct limiter *const *limiters,
                        const char *const *ids, const struct gw_limits_selection *selection,
                        int64_t now_ns)
{
    size_t n = selection->n_limits;

    if (result == GW_STORE_OK) {
        d->decided_ns = now_ns; /* when its answer came: a replay of merged logs orders by it */
        return conclude_each(d, n);
    }
    if (on_error == CONFIG_ON_STORE_ERROR_ALLOW) {
        d->outcome = GW_LIMITS_FAILED_OPEN;
        return d->outcome;
    }
    if (on_error == CONFIG_ON_STORE_ERROR_DENY) {
        /* The quota as the store runs it, the whole of it (the local limiters hold a share). */
        d->each[0] = (struct limiter_decision){.limit = selection->limits[0].params.requests,
                                               .reset_ms = 1000,
                                               .retry_after_ms = 1000};
        return conclude(d, n, GW_LIMITS_FAILED_CLOSED);
    }
    return gw_limits_decide_local(d, limiters, ids, selection, now_ns);
}
