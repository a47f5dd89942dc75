/* Shared by the limiter's CUnit tests: a hand-stepped clock and short constructors. */
#ifndef SLUICE_TESTS_LIMITER_HELPERS_H
#define SLUICE_TESTS_LIMITER_HELPERS_H

#include <CUnit/CUnit.h>
#include <stdint.h>

#include "limiter/limiter.h"
#include "tests/unit.h"

#define MS(n)  ((int64_t)(n) * 1000000)
#define SEC(n) ((int64_t)(n) * 1000000000)
/* A start time that is a whole number of days since the epoch, so windows begin there. */
#define T0 SEC(86400LL * 20000)

extern const char *const all_algorithms[5];

/* A limiter that must be created; the test stops if it is not. */
struct limiter *new_limiter(const char *algorithm, uint64_t requests, int64_t per_ns,
                            uint64_t burst, uint32_t max_clients);

/* One decision that must succeed. */
struct limiter_decision decide_at(struct limiter *limiter, const char *client_id, int64_t now_ns);

/* How many of `n` requests at `now_ns` are allowed. */
unsigned count_allowed(struct limiter *limiter, const char *client_id, int64_t now_ns,
                       unsigned n);

/* The token bucket's contract, which gcra shares: burst, refill, cap, retry, remaining, a
 * clock standing still or going back. */
void check_bucket_contract(const char *algorithm);

#endif
