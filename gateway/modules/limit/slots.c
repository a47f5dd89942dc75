/* Concurrency slots held for a request; design in slots.h. */
#include <stdio.h>
#include <stdlib.h>

#include "gateway/identity/keys.h"
#include "gateway/modules/limit/slots.h"

struct held {
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

    for (size_t i = 0; i < h->n; i++) {
        limiter_refund(h->limits[i]->limiter, h->ids[i], h->costs[i], now, now);
        atomic_fetch_sub(&h->limits[i]->in_flight, (int64_t)h->costs[i]);
        gw_limit_release(h->limits[i]);
    }
    free(h);
}

int gw_limit_slots_hold(struct gw_req *rq, const struct gw_limit_set *set, const char *const *ids,
                        const uint64_t *costs)
{
    struct held *h = calloc(1, sizeof *h);

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
    if (gw_req_hold(rq, give_back, h) != 0) {
        give_back(h);
        return -1;
    }
    return 0;
}
