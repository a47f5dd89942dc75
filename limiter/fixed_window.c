/*
 * Fixed window: at most `requests` in each window [k*per, (k+1)*per), counted from the epoch
 * so that separate gateways, and a shared store, put the boundaries at the same instants.
 * Cheapest of all, but a client may send `requests` at the end of one window and `requests`
 * more at the start of the next: up to twice the limit within a moment.
 */
#include "limiter/algorithm.h"

/* The window a request at `now_ns` counts in, with that window's count. A clock that went
 * back into an earlier window keeps counting in the latest one: no window is counted twice. */
static int64_t current_window(const struct limiter *self, const union client_state *state,
                              int64_t now_ns, uint32_t *count)
{
    int64_t start = window_start(now_ns, self->params.per_ns);

    if (start <= state->fixed.window_start_ns) {
        *count = state->fixed.count;
        return state->fixed.window_start_ns;
    }
    *count = 0;
    return start;
}

static int decide(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t cost, bool consume, struct limiter_decision *out)
{
    uint32_t count;
    int64_t start = current_window(self, state, now_ns, &count);

    out->allowed = count + cost <= self->params.requests;
    if (out->allowed) {
        count += (uint32_t)cost;
        out->charged_ns = max_i64(now_ns, start); /* in the window it counts in */
        if (consume) {
            state->fixed.window_start_ns = start;
            state->fixed.count = count;
        }
    } else {
        out->retry_after_ms = ms_ceil(start + self->params.per_ns - now_ns);
    }
    out->remaining = self->params.requests - count;
    return 0;
}

/* Back into the window the charge was counted in, while it is still the client's: the one
 * that holds `charged_ns`. Any other case gives nothing back, which is never too generous: a
 * window that has passed has given its quota back already, and a charge a clock that went back
 * counted in a later window cannot be told apart from one in a window gone by. */
static void refund(const struct limiter *self, union client_state *state, int64_t charged_ns,
                   int64_t now_ns, uint64_t cost)
{
    (void)now_ns;
    if (window_start(charged_ns, self->params.per_ns) != state->fixed.window_start_ns)
        return;
    state->fixed.count -= cost < state->fixed.count ? (uint32_t)cost : state->fixed.count;
}

static int64_t idle_at(const struct limiter *self, const union client_state *state)
{
    if (state->fixed.count == 0)
        return state->fixed.window_start_ns;
    return state->fixed.window_start_ns + self->params.per_ns;
}

static const struct limiter_ops fixed_window_ops = {
    .algorithm = LIMITER_FIXED_WINDOW,
    .decide = decide,
    .idle_at = idle_at,
    .refund = refund,
};

struct limiter *limiter_fixed_window_create(const struct limiter_params *params,
                                            char err[LIMITER_ERR_LEN])
{
    return limiter_alloc(sizeof(struct limiter), &fixed_window_ops, params, err);
}
