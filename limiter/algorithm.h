/*
 * What every algorithm shares: the base `struct limiter` and its ops table (the Strategy
 * interface), plus small arithmetic helpers. Internal to limiter/.
 *
 * An algorithm file defines its concrete type with `struct limiter base` first, a static
 * `struct limiter_ops` and one constructor, which calls limiter_alloc() and then computes the
 * algorithm's derived constants. The ops run with the client's slot locked; `decide` changes
 * the state only when it allows and is asked to (denied requests consume nothing), and
 * `idle_at` gives the
 * instant from which the state equals a fresh client's, which both reclaims idle slots and
 * yields the decision's reset time.
 */
#ifndef SLUICE_LIMITER_ALGORITHM_H
#define SLUICE_LIMITER_ALGORITHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limiter/limiter.h"
#include "limiter/state.h"

struct limiter_ops {
    enum limiter_algorithm algorithm; /* its name and whether it takes a burst: limiter.c */
    /* Fills allowed, remaining (as after this request) and retry_after_ms for a request that
     * costs `cost` units (1 to the quota: `requests`, or `burst` where taken). Consumes quota
     * only when allowed and `consume` is set; with it clear the state is left as it was, so
     * several limits can be checked before any is charged. 0, or -1 with errno (ENOMEM). */
    int (*decide)(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t cost, bool consume, struct limiter_decision *out);
    int64_t (*idle_at)(const struct limiter *self, const union client_state *state);
    /* Gives back `cost` units charged at `charged_ns`, seen at `now_ns` (limiter_refund()):
     * the state becomes what it would be had that charge not been made, or, where later
     * charges make that unknowable, one no more generous. */
    void (*refund)(const struct limiter *self, union client_state *state, int64_t charged_ns,
                   int64_t now_ns, uint64_t cost);
    /* Gives `units` back at `now_ns`, whatever charged them (limiter_grant()); never further
     * than a fresh client's state. NULL: as refund() of `units` charged at `now_ns`, which is
     * that wherever the charge's instant does not matter. */
    void (*grant)(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t units);
    void (*release)(union client_state *state); /* NULL when the state owns nothing */
    /* The earliest instant from `now_ns` on at which a request costing `cost` would be
     * allowed, exactly; NULL for an algorithm that cannot keep a request's place for later
     * (limiter_reserve_all()): only the buckets can, since deciding at a later instant
     * leaves a state every earlier decision still reads right. */
    int64_t (*admits_at)(const struct limiter *self, const union client_state *state,
                         int64_t now_ns, uint64_t cost);
};

struct limiter {
    const struct limiter_ops *ops;
    struct limiter_params params; /* defaults filled in; algorithm and algorithm_id are
                                     ops->algorithm's */
    struct client_table *clients;
    unsigned char hash_key[16]; /* SipHash key, random per limiter */
};

/* Allocates a zeroed concrete limiter of `size` bytes (its base first), checks `params`
 * against `ops` (ranges, burst only where taken), fills in the defaults and creates the client
 * table. NULL with `err` filled on a bad parameter or no memory; else freed by limiter_free(). */
void *limiter_alloc(size_t size, const struct limiter_ops *ops, const struct limiter_params *params,
                    char err[LIMITER_ERR_LEN]);

/* Formats a constructor's error message. */
void limiter_set_error(char err[LIMITER_ERR_LEN], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The constructors, one per algorithm file; mapped from names in limiter.c. */
struct limiter *limiter_token_bucket_create(const struct limiter_params *params,
                                            char err[LIMITER_ERR_LEN]);
struct limiter *limiter_gcra_create(const struct limiter_params *params, char err[LIMITER_ERR_LEN]);
struct limiter *limiter_fixed_window_create(const struct limiter_params *params,
                                            char err[LIMITER_ERR_LEN]);
struct limiter *limiter_sliding_window_log_create(const struct limiter_params *params,
                                                  char err[LIMITER_ERR_LEN]);
struct limiter *limiter_sliding_window_counter_create(const struct limiter_params *params,
                                                      char err[LIMITER_ERR_LEN]);
struct limiter *limiter_concurrency_create(const struct limiter_params *params,
                                           char err[LIMITER_ERR_LEN]);

/* ceil(a / b) for a >= 0, b > 0. */
static inline int64_t div_ceil(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

/* Nanoseconds rounded up to whole milliseconds; negative spans are 0. */
static inline int64_t ms_ceil(int64_t ns)
{
    return ns <= 0 ? 0 : div_ceil(ns, 1000000);
}

static inline int64_t max_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The start of the window of length `per_ns` that holds `now_ns`, aligned to the epoch. */
static inline int64_t window_start(int64_t now_ns, int64_t per_ns)
{
    return now_ns - now_ns % per_ns;
}

#endif
