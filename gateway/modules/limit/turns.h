/*
 * turns: requests that wait for their turn at limits with a delay: (config.h), rather than
 * being denied.
 *
 * A request may wait only with a seat in the queue of each of its limits that has a delay
 * (each holds `queue` seats, counted in sluice_limit_waiting); without one it is decided as
 * if there were no delay. With seats, its limits decide whether it waits: the place at its
 * turn is charged at once (limiter_reserve_all(), or the shared store's reservation at
 * Redis's clock), so the requests after it queue behind it. It then waits on the adapter's
 * sleeper (gw_req_sleep(): one thread for all, whatever the mode), and gives its seats back
 * when its turn comes, or when its client leaves first: then its place is given back as
 * well (the next request takes it) and it is not charged.
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_TURNS_H
#define SLUICE_GATEWAY_MODULES_LIMIT_TURNS_H

#include <stdbool.h>

#include "gateway/modules/limit/limit_sets.h"

/* A seat in the queue of each of `set`'s limits with a delay. false when one is full: none is
 * taken then. */
bool gw_limit_turn_seat(const struct gw_limit_set *set);

/* The seats back. */
void gw_limit_turn_unseat(const struct gw_limit_set *set);

#endif
