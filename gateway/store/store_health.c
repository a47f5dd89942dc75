/* The Redis store's health: degraded spells, backoff and probe; design in store_health.h. */
#include <stdio.h>
#include <string.h>

#include "gateway/common/log.h"
#include "gateway/store/store_health.h"
#include "limiter/limiter.h"

#define FIRST_BACKOFF   (100 * (int64_t)1000000)
#define LONGEST_BACKOFF (5 * (int64_t)1000000000)

void gw_store_health_init(struct gw_store_health *h, const char *where)
{
    memset(h, 0, sizeof *h);
    h->where = where;
    pthread_mutex_init(&h->lock, NULL);
    atomic_init(&h->backoff_ns, FIRST_BACKOFF);
}

void gw_store_health_destroy(struct gw_store_health *h)
{
    pthread_mutex_destroy(&h->lock);
}

bool gw_store_health_may_try(struct gw_store_health *h, uint64_t *state)
{
    int64_t at, now;

    *state = atomic_load(&h->state);
    if (*state % 2 == 0)
        return true;
    at = atomic_load(&h->retry_at_ns);
    now = limiter_now_ns();
    return now >= at &&
           atomic_compare_exchange_strong(&h->retry_at_ns, &at, now + atomic_load(&h->backoff_ns));
}

void gw_store_health_failed(struct gw_store_health *h, uint64_t state, const char *why)
{
    int64_t backoff = atomic_load(&h->backoff_ns);
    bool first = false, new_reason = false;

    atomic_fetch_add(&h->errors, 1);
    if (state % 2 == 0) {
        uint64_t healthy = state;

        if (!atomic_compare_exchange_strong(&h->state, &healthy, state + 1))
            return;
        first = true;
        backoff = FIRST_BACKOFF;
    } else if (atomic_load(&h->state) == state) {
        backoff = backoff * 2 < LONGEST_BACKOFF ? backoff * 2 : LONGEST_BACKOFF;
    } else {
        return;
    }
    atomic_store(&h->backoff_ns, backoff);
    atomic_store(&h->retry_at_ns, limiter_now_ns() + backoff);

    /* Said once per spell, and again only when a probe fails for another reason (a Redis
     * that comes back asking for a password). */
    pthread_mutex_lock(&h->lock);
    new_reason = first || strcmp(h->last_why, why) != 0;
    if (new_reason)
        snprintf(h->last_why, sizeof h->last_why, "%s", why);
    pthread_mutex_unlock(&h->lock);
    if (first)
        gw_warn("store: redis %s failed (%s); limiting per on_store_error until it answers",
                h->where, why);
    else if (new_reason)
        gw_warn("store: redis %s still fails (%s)", h->where, why);
}

void gw_store_health_succeeded(struct gw_store_health *h, uint64_t state)
{
    uint64_t degraded = state;

    /* Only the probe ends a degraded spell: a call that was under way when Redis failed and
     * comes back later says nothing about Redis now. */
    if (state % 2 == 1 && atomic_compare_exchange_strong(&h->state, &degraded, state + 1)) {
        atomic_store(&h->backoff_ns, FIRST_BACKOFF);
        gw_info("store: redis %s answers again; shared limits restored", h->where);
    }
}

uint64_t gw_store_health_spells(const struct gw_store_health *h)
{
    return (atomic_load(&h->state) + 1) / 2;
}
