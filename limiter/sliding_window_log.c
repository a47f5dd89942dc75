/*
 * Sliding window log: exact. A request at `now` is allowed when fewer than `requests` of the
 * client's allowed requests happened in (now - per, now]; their times are kept in a ring,
 * oldest first, and dropped as they leave the window.
 *
 * Memory is O(requests) per client: the ring starts at 4 times and doubles up to `requests`,
 * 8 bytes each, so a client that keeps its quota full costs 8 * requests bytes beyond its slot
 * (80 KB for 10,000 per window). Use it where exactness is worth that; sliding_window_counter
 * costs nothing extra.
 */
#include <errno.h>
#include <stdlib.h>

#include "limiter/algorithm.h"

#define INITIAL_CAPACITY 4

static int64_t oldest(const union client_state *state)
{
    return state->log.times_ns[state->log.head];
}

static int64_t newest(const union client_state *state)
{
    return state->log.times_ns[(state->log.head + state->log.count - 1) % state->log.capacity];
}

/* Drops the times that have left the window ending at `now_ns`. */
static void expire(const struct limiter *self, union client_state *state, int64_t now_ns)
{
    while (state->log.count > 0 && oldest(state) <= now_ns - self->params.per_ns) {
        state->log.head = (state->log.head + 1) % state->log.capacity;
        state->log.count--;
    }
}

/* Makes room for one more time, keeping the order. 0, or -1 when memory is short. */
static int grow(const struct limiter *self, union client_state *state)
{
    uint64_t wanted = state->log.capacity ? 2 * (uint64_t)state->log.capacity : INITIAL_CAPACITY;
    uint32_t capacity = (uint32_t)(wanted < self->params.requests ? wanted : self->params.requests);
    int64_t *times = malloc(capacity * sizeof *times);

    if (times == NULL)
        return -1;
    for (uint32_t i = 0; i < state->log.count; i++)
        times[i] = state->log.times_ns[(state->log.head + i) % state->log.capacity];
    free(state->log.times_ns);
    state->log.times_ns = times;
    state->log.head = 0;
    state->log.capacity = capacity;
    return 0;
}

static int decide(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t cost, bool consume, struct limiter_decision *out)
{
    uint32_t requests = (uint32_t)self->params.requests;
    int64_t stamp;

    expire(self, state, now_ns); /* housekeeping, not consumption */
    out->allowed = state->log.count + cost <= requests;
    if (!out->allowed) {
        /* Allowed once enough of the oldest times have left: count + cost - requests. */
        uint32_t leaving = state->log.count + (uint32_t)cost - requests;
        int64_t last_leaving =
            state->log.times_ns[(state->log.head + leaving - 1) % state->log.capacity];

        out->retry_after_ms = ms_ceil(last_leaving + self->params.per_ns - now_ns);
        out->remaining = state->log.count < requests ? requests - state->log.count : 0;
        return 0;
    }
    /* Room is made even when only checking, so that charging can no longer fail. */
    while (state->log.count + cost > state->log.capacity)
        if (grow(self, state) != 0) {
            out->allowed = false;
            errno = ENOMEM;
            return -1;
        }
    out->remaining = requests - state->log.count - (uint32_t)cost;
    out->charged_ns = state->log.count > 0 ? max_i64(now_ns, newest(state)) : now_ns;
    if (!consume)
        return 0;
    /* A clock that went back stamps the request no earlier than the last one, keeping the ring
     * in order; the request then leaves the window later, never sooner. A request of cost k
     * is k requests at the same instant. */
    stamp = state->log.count > 0 ? max_i64(now_ns, newest(state)) : now_ns;
    for (uint64_t k = 0; k < cost; k++) {
        state->log.times_ns[(state->log.head + state->log.count) % state->log.capacity] = stamp;
        state->log.count++;
    }
    return 0;
}

/* Takes out up to `cost` times stamped `charged_ns`: the charge's own, or others of that
 * very instant, which leave the window at the same time. A charge a clock that went back
 * stamped later than its instant, or whose times have left the window, gives nothing back:
 * another request's later time would leave later than the charge's own would have. */
static void refund(const struct limiter *self, union client_state *state, int64_t charged_ns,
                   int64_t now_ns, uint64_t cost)
{
    uint32_t cap = state->log.capacity, first = 0, taken = 0, kept;

    expire(self, state, now_ns);
    while (first < state->log.count &&
           state->log.times_ns[(state->log.head + first) % cap] < charged_ns)
        first++;
    while (taken < cost && first + taken < state->log.count &&
           state->log.times_ns[(state->log.head + first + taken) % cap] == charged_ns)
        taken++;
    /* The times after the ones taken out move down over them, keeping the ring in order. */
    kept = state->log.count - first - taken;
    for (uint32_t i = 0; i < kept; i++)
        state->log.times_ns[(state->log.head + first + i) % cap] =
            state->log.times_ns[(state->log.head + first + taken + i) % cap];
    state->log.count -= taken;
}

/* The `units` newest times leave the log (all of it, when it holds fewer): the requests
 * that would leave the window last go first, so the client gets the most back now. */
static void grant(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t units)
{
    expire(self, state, now_ns);
    state->log.count -= units < state->log.count ? (uint32_t)units : state->log.count;
}

static int64_t idle_at(const struct limiter *self, const union client_state *state)
{
    return state->log.count > 0 ? newest(state) + self->params.per_ns : 0;
}

static void release(union client_state *state)
{
    free(state->log.times_ns);
}

static const struct limiter_ops sliding_window_log_ops = {
    .algorithm = LIMITER_SLIDING_WINDOW_LOG,
    .decide = decide,
    .idle_at = idle_at,
    .refund = refund,
    .grant = grant,
    .release = release,
};

struct limiter *limiter_sliding_window_log_create(const struct limiter_params *params,
                                                  char err[LIMITER_ERR_LEN])
{
    return limiter_alloc(sizeof(struct limiter), &sliding_window_log_ops, params, err);
}
