/* Seats in the queues of limits with a delay; design in turns.h. */
#include "gateway/modules/limit/turns.h"

bool gw_limit_turn_seat(const struct gw_limit_set *set)
{
    for (size_t i = 0; i < set->n_limits; i++) {
        const struct config_delay *delay = &set->config[i].delay;

        if (!delay->set)
            continue;
        if (atomic_fetch_add(&set->limits[i]->waiting, 1) >= delay->queue) {
            atomic_fetch_sub(&set->limits[i]->waiting, 1);
            while (i-- > 0)
                if (set->config[i].delay.set)
                    atomic_fetch_sub(&set->limits[i]->waiting, 1);
            return false;
        }
    }
    return true;
}

void gw_limit_turn_unseat(const struct gw_limit_set *set)
{
    for (size_t i = 0; i < set->n_limits; i++)
        if (set->config[i].delay.set)
            atomic_fetch_sub(&set->limits[i]->waiting, 1);
}
