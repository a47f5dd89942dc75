/* Concurrency slots held for a request; design in slots.h. */
#include <stdio.h>
#include <stdlib.h>

#include "gateway/identity/keys.h"
#include "gateway/modules/limit/slots.h"

struct held {
    struct gw_store *store;       /* where they are held: the shared store, or NULL: here */
    struct gw_store_lease *lease; /* their lease there (NULL when memory was short) */
    size_t n;
    struct gw_limit *limits[LIMITER_MAX_PER_REQUEST]; /* a reference each */
    uint64_t costs[LIMITER_MAX_PER_REQUEST];
    char ids[LIMITER_MAX_PER_REQUEST][GW_KEY_LEN];
};

static bool counts_in_flight(const struct config_limit *limit)
{
    return limit->params.algorithm_id == LIMITER_CONCURRENCY;
}

bool gw_limit_set_has_slots(const struct gw_limit_set *set)
{
    for (size_t i = 0; i < set->n_limits; i++)
        if (counts_in_flight(&set->config[i]))
            return true;
    return false;
}

/* The request has ended: each slot comes back. */
static void give_back(void *arg)
{
    struct held *h = arg;
    int64_t now = limiter_now_ns();

    if (h->store != NULL && h->lease != NULL)
        gw_store_release(h->store, h->lease);
    for (size_t i = 0; i < h->n; i++) {
        if (h->store == NULL)
            limiter_refund(h->limits[i]->limiter, h->ids[i], h->costs[i], now, now);
        atomic_fetch_sub(&h->limits[i]->in_flight, (int64_t)h->costs[i]);
        gw_limit_release(h->limits[i]);
    }
    free(h);
}

/* The concurrency limits of `set` as the shared store asks them, for `op`, limit i counting
 * under `ids[i]` at `costs[i]` (both indexed by `set`'s limits, or by the concurrency limits
 * alone with `compact`), under `lease`: the arrays are filled and the ask returned. */
static struct gw_store_ask store_ask(const struct gw_req *rq, const struct gw_limit_set *set,
                                     enum gw_store_op op, const char *const *ids,
                                     const uint64_t *costs, bool compact, const char *lease,
                                     const char **names, const struct limiter_params **limits,
                                     const char **keys, uint64_t *units)
{
    size_t n = 0;

    for (size_t i = 0; i < set->n_limits; i++)
        if (counts_in_flight(&set->config[i])) {
            names[n] = set->limit_names[i];
            limits[n] = set->shared_param_ptrs[i];
            keys[n] = ids[compact ? n : i];
            units[n] = costs[compact ? n : i];
            n++;
        }
    return (struct gw_store_ask){.op = op,
                                 .route = gw_req_route(rq)->name,
                                 .names = names,
                                 .limits = limits,
                                 .costs = units,
                                 .client_keys = keys,
                                 .n = n,
                                 .lease = lease};
}

void gw_limit_slots_give_back_in_store(struct gw_req *rq, const struct gw_limit_set *set,
                                       const char *const *ids, const uint64_t *costs,
                                       const char *lease)
{
    const char *names[LIMITER_MAX_PER_REQUEST], *keys[LIMITER_MAX_PER_REQUEST];
    const struct limiter_params *limits[LIMITER_MAX_PER_REQUEST];
    uint64_t units[LIMITER_MAX_PER_REQUEST];
    struct gw_store_ask ask = store_ask(rq, set, GW_STORE_GIVE_BACK, ids, costs, false, lease,
                                        names, limits, keys, units);

    if (ask.n > 0)
        gw_store_give_back(rq->runtime->store, &ask);
}

/* The slots `h` took in the shared store, under `lease`, held there with their lease
 * renewed; given back at once when there is no memory to renew them. */
static void hold_in_store(struct gw_req *rq, struct held *h, const struct gw_limit_set *set,
                          const char *lease)
{
    const char *names[LIMITER_MAX_PER_REQUEST], *keys[LIMITER_MAX_PER_REQUEST];
    const char *ids[LIMITER_MAX_PER_REQUEST];
    const struct limiter_params *limits[LIMITER_MAX_PER_REQUEST];
    uint64_t units[LIMITER_MAX_PER_REQUEST];
    struct gw_store_ask ask;

    for (size_t i = 0; i < h->n; i++)
        ids[i] = h->ids[i];
    ask =
        store_ask(rq, set, GW_STORE_RENEW, ids, h->costs, true, lease, names, limits, keys, units);
    h->store = rq->runtime->store;
    h->lease = gw_store_hold(h->store, &ask);
    if (h->lease == NULL) {
        ask.op = GW_STORE_GIVE_BACK;
        gw_store_give_back(h->store, &ask);
    }
}

int gw_limit_slots_hold(struct gw_req *rq, const struct gw_limit_set *set, const char *const *ids,
                        const uint64_t *costs, const char *lease)
{
    struct held *h = calloc(1, sizeof *h);

    if (h == NULL && lease != NULL) { /* nowhere to say what is held: given back now */
        gw_limit_slots_give_back_in_store(rq, set, ids, costs, lease);
        return -1;
    }
    if (h == NULL) { /* nowhere to say what is held: given back now */
        int64_t now = limiter_now_ns();

        for (size_t i = 0; i < set->n_limits; i++)
            if (counts_in_flight(&set->config[i]))
                limiter_refund(set->limiters[i], ids[i], costs[i], now, now);
        return -1;
    }
    for (size_t i = 0; i < set->n_limits; i++) {
        if (!counts_in_flight(&set->config[i]))
            continue;
        h->limits[h->n] = set->limits[i];
        gw_limit_retain(set->limits[i]);
        h->costs[h->n] = costs[i];
        snprintf(h->ids[h->n], sizeof h->ids[h->n], "%s", ids[i]);
        atomic_fetch_add(&set->limits[i]->in_flight, (int64_t)costs[i]);
        h->n++;
    }
    if (lease != NULL)
        hold_in_store(rq, h, set, lease);
    if (gw_req_hold(rq, give_back, h) != 0) {
        give_back(h);
        return -1;
    }
    return 0;
}
