/*
 * refusals: the shared store's refusals, kept by this replica for as long as they must hold,
 * so that a client already refused is answered without a round trip to Redis. Part of the
 * limit module (limit.h).
 *
 * Why it is exact. Say Redis refused a request of cost c on a set of limits, each counting
 * the client under its key, and said retry after R: at the instant T it decided, the earliest
 * a request of cost c could pass, were nothing charged after T, is T + R. Between charges
 * the state only moves towards a fresh client's as time passes, and a charge (on any replica)
 * only moves it away; so no request of cost c' >= c on the same keys can pass before T + R
 * either, on any replica. Per algorithm (store.h has the script):
 *
 *   token_bucket, gcra      one theoretical arrival time per client, which charges only move
 *                           on; a request of cost c passes once TAT + c * interval - t is
 *                           within the tolerance, later for a later TAT or a larger c.
 *   fixed_window            the window's count only grows until the window ends, which is
 *                           R; a larger c needs a smaller count.
 *   sliding_window_log      times only join the log; a request of c waits until enough of
 *                           them have aged out, the more the more there are, and the larger c.
 *   sliding_window_counter  both windows' counts only grow; the weighted estimate at each
 *                           later instant is at least what the counts at T give it, so the
 *                           first instant it lets c' >= c through is no earlier.
 *
 * What would break it is a count going down other than by time: a refund (count:), a
 * concurrency slot given back, a place given back by a request that did not wait (delay:),
 * an operator's reset or grant. So a set of limits with count:, concurrency or delay: is never
 * kept (any replica may give back there); an operator's change on this replica forgets the
 * client's refusals at once, and reaches the others' when their refusals lapse: a refusal is
 * kept at most limiter.redis.refusal_cache (1 s unless set; 0: never), which bounds that. A
 * refusal asked before an operator's last change here is not kept: it may predate it.
 *
 * Time: from the moment the request was sent to Redis (no later than T, so the refusal is
 * held no longer than Redis would hold it) plus R less its rounding: the store gives R in
 * whole milliseconds rounded up, so one is taken off. A request answered here gets what
 * Redis said, each limit's retry and reset counted down by the time since.
 *
 * Memory: one table for the process, GW_REFUSALS_SLOTS entries (about 1.5 MiB), each the
 * refusal of one client on one set, found by a BLAKE2b digest of the set and the keys;
 * a new refusal takes its slot from whatever held it. Sets are numbered for life, so a
 * reload, which builds new sets, leaves the old refusals to be overwritten: none of them is
 * read again. Counted in sluice_store_calls_saved_total.
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_REFUSALS_H
#define SLUICE_GATEWAY_MODULES_LIMIT_REFUSALS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gateway/limits/decide.h"
#include "gateway/modules/limit/limit_sets.h"

#define GW_REFUSALS_SLOTS 4096

/* Whether a refusal on `set` may be kept (no count:, concurrency or delay: among its limits). */
bool gw_refusals_may_keep(const struct gw_limit_set *set);

/* Keeps the store's refusal `each` (DENIED) of the client under `ids` on `set` at `costs`,
 * asked at `asked_ns`, for at most `most_ns` (limiter.redis.refusal_cache). */
void gw_refusals_keep(const struct gw_limit_set *set, const char *const *ids, const uint64_t *costs,
                      const struct limiter_decision *each, int64_t asked_ns, int64_t most_ns);

/* When a refusal kept for the client under `ids` on `set` holds at `now_ns` for `costs` (each
 * at least what was refused), fills `each` with it, counted down to `now_ns`, and returns
 * true; otherwise false. */
bool gw_refusals_find(const struct gw_limit_set *set, const char *const *ids, const uint64_t *costs,
                      int64_t now_ns, struct limiter_decision *each);

/* Forgets the refusal kept for the client under `ids` on `set` (an operator changed it); with
 * a key of `ids` NULL (not known), every client's on `set`. */
void gw_refusals_forget(const struct gw_limit_set *set, const char *const *ids);

/* sluice_store_calls_saved_total. */
void gw_refusals_render(FILE *out);

#endif
