/*
 * Sliding window counter: two fixed windows, weighted. With `elapsed` the time into the
 * current window, a request is allowed while
 *
 *     curr + prev * (per - elapsed) / per < requests
 *
 * so the previous window's count fades out linearly as the current one advances. Windows are
 * aligned to the epoch as in fixed_window. A window idle for more than one full window forgets
 * the previous count. Worked example, 100 per minute: a client that sent 100 in the last
 * second of one minute gets, 1 ms into the next, 100 * 0.99998 = 99.998 < 100: one request,
 * where a fixed window would let it send 100 at once.
 *
 * The comparison is made in integers multiplied through by `per` (128-bit), so no rounding
 * lets a request through early.
 */
#include "limiter/algorithm.h"

typedef unsigned __int128 u128;

struct counts {
    int64_t window_start_ns;
    int64_t elapsed_ns; /* into the window; 0 if the clock went back before it */
    uint32_t curr, prev;
};

/* The state seen from `now_ns`, windows rolled forward as needed. A clock that went back keeps
 * the latest window and counts it as just begun, which weighs `prev` fully. */
static struct counts counts_at(const struct limiter *self, const union client_state *state,
                               int64_t now_ns)
{
    int64_t per = self->params.per_ns;
    int64_t start = window_start(now_ns, per);
    struct counts c = {state->counter.window_start_ns, 0, state->counter.curr_count,
                       state->counter.prev_count};

    if (start == c.window_start_ns + per) {
        c.prev = c.curr;
        c.curr = 0;
    } else if (start > c.window_start_ns + per) {
        c.prev = c.curr = 0;
    }
    c.window_start_ns = max_i64(start, c.window_start_ns);
    c.elapsed_ns = max_i64(now_ns - c.window_start_ns, 0);
    return c;
}

/* requests*per - (curr*per + prev*(per - elapsed)): positive while requests may pass, and
 * ceil(slack / per) of them may. */
static __int128 slack(const struct limiter *self, const struct counts *c)
{
    int64_t per = self->params.per_ns;

    return (__int128)((u128)self->params.requests * (u128)per) -
           (__int128)((u128)c->curr * (u128)per + (u128)c->prev * (u128)(per - c->elapsed_ns));
}

/* The wait from `elapsed` into the window until prev * (per - e) < limit_left * per holds,
 * if it comes before the window ends; else -1. */
static int64_t wait_in_window(int64_t per, int64_t elapsed, uint64_t prev, uint64_t limit_left)
{
    /* prev * e > per * (prev - limit_left), so e = floor(per * (prev - limit_left) / prev) + 1 */
    int64_t e;

    if (prev < limit_left)
        return 0;
    e = (int64_t)((u128)per * (prev - limit_left) / prev) + 1;
    return e < per ? max_i64(e - elapsed, 0) : -1;
}

static int decide(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t cost, bool consume, struct limiter_decision *out)
{
    int64_t per = self->params.per_ns;
    uint64_t requests = self->params.requests;
    /* A request of cost k passes where k requests in a row would: while the estimate plus
     * k - 1 is below the limit, the same as one request against a limit k - 1 lower. */
    uint64_t extra = cost - 1, limit = requests - extra;
    struct counts c = counts_at(self, state, now_ns);
    __int128 left;

    out->allowed = slack(self, &c) > (__int128)extra * per;
    if (out->allowed) {
        c.curr += (uint32_t)cost;
        out->charged_ns = max_i64(now_ns, c.window_start_ns); /* in the window it counts in */
        if (consume) {
            state->counter.window_start_ns = c.window_start_ns;
            state->counter.curr_count = c.curr;
            state->counter.prev_count = c.prev;
        }
    } else {
        int64_t wait = -1;

        if (c.curr < limit)
            wait = wait_in_window(per, c.elapsed_ns, c.prev, limit - c.curr);
        if (wait < 0) /* in the next window `curr` becomes the fading count */
            wait = per - c.elapsed_ns + wait_in_window(per, 0, c.curr, limit);
        out->retry_after_ms = ms_ceil(wait);
    }
    left = slack(self, &c);
    out->remaining = left > 0 ? (uint64_t)((left + per - 1) / per) : 0;
    return 0;
}

/* Back into the window that counted the charge: the current one (`curr`) or, once the
 * windows have rolled on by one, the previous one (`prev`), whose fading weight then counts it
 * no more. A charge older than that weighs nothing any more. As in fixed_window, a charge whose
 * window cannot be told for sure gives nothing back. */
static void refund(const struct limiter *self, union client_state *state, int64_t charged_ns,
                   int64_t now_ns, uint64_t cost)
{
    int64_t charged = window_start(charged_ns, self->params.per_ns);
    uint32_t *count = charged == state->counter.window_start_ns ? &state->counter.curr_count
                      : charged == state->counter.window_start_ns - self->params.per_ns
                          ? &state->counter.prev_count
                          : NULL;

    (void)now_ns;
    if (count != NULL)
        *count -= cost < *count ? (uint32_t)cost : *count;
}

/* `units` off the current window's count first; what is left of them off the previous
 * window's by as much as that count weighs now: each of its requests counts (per - elapsed) /
 * per of one, so `rest` units are ceil(rest * per / (per - elapsed)) of them (elapsed < per).
 * The estimate goes down by `units` (by less than one more, rounding up), or to no count at
 * all. */
static void grant(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t units)
{
    int64_t per = self->params.per_ns;
    struct counts c = counts_at(self, state, now_ns);
    uint32_t from_curr = units < c.curr ? (uint32_t)units : c.curr;
    u128 rest = units - from_curr, weight = (u128)(per - c.elapsed_ns);
    u128 from_prev = (rest * (u128)per + weight - 1) / weight;

    state->counter.window_start_ns = c.window_start_ns;
    state->counter.curr_count = c.curr - from_curr;
    state->counter.prev_count = from_prev < c.prev ? c.prev - (uint32_t)from_prev : 0;
}

static int64_t idle_at(const struct limiter *self, const union client_state *state)
{
    int64_t start = state->counter.window_start_ns;

    if (state->counter.curr_count > 0)
        return start + 2 * self->params.per_ns;
    if (state->counter.prev_count > 0)
        return start + self->params.per_ns;
    return start;
}

static const struct limiter_ops sliding_window_counter_ops = {
    .algorithm = LIMITER_SLIDING_WINDOW_COUNTER,
    .decide = decide,
    .idle_at = idle_at,
    .refund = refund,
    .grant = grant,
};

struct limiter *limiter_sliding_window_counter_create(const struct limiter_params *params,
                                                      char err[LIMITER_ERR_LEN])
{
    return limiter_alloc(sizeof(struct limiter), &sliding_window_counter_ops, params, err);
}
