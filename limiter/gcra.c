/*
 * GCRA, the generic cell rate algorithm: a token bucket kept as one timestamp per client.
 *
 * Requests are spaced by the emission interval T = per/requests; the theoretical arrival time
 * (TAT) is when the client would be back to a full bucket if it sent nothing more. A request at
 * `now` is allowed when max(TAT, now) + T - now <= burst * T, and then TAT moves to
 * max(TAT, now) + T. A TAT in the past is a full bucket, so zero is a fresh client.
 *
 * T is whole nanoseconds, rounded up when `requests` does not divide `per`: 3 per second gives
 * T = 333,333,334 ns, one part in 300 million slower than asked, never faster.
 */
#include <stdlib.h>

#include "limiter/algorithm.h"

struct gcra {
    struct limiter base;
    int64_t interval_ns;  /* T */
    int64_t tolerance_ns; /* burst * T: how far TAT may run ahead of now */
};

static int decide(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t cost, bool consume, struct limiter_decision *out)
{
    const struct gcra *g = (const struct gcra *)self;
    /* A request of cost k is k requests at once: TAT moves k intervals. */
    int64_t tat = max_i64(state->gcra.tat_ns, now_ns) + (int64_t)cost * g->interval_ns;
    int64_t ahead = tat - now_ns;

    out->allowed = ahead <= g->tolerance_ns;
    if (out->allowed) {
        out->charged_ns = now_ns;
        if (consume)
            state->gcra.tat_ns = tat;
        out->remaining = (uint64_t)((g->tolerance_ns - ahead) / g->interval_ns);
    } else {
        /* What is left now: the units that fit before TAT runs past the tolerance. */
        int64_t used = max_i64(state->gcra.tat_ns, now_ns) - now_ns;

        out->retry_after_ms = ms_ceil(ahead - g->tolerance_ns);
        out->remaining =
            used < g->tolerance_ns ? (uint64_t)((g->tolerance_ns - used) / g->interval_ns) : 0;
    }
    return 0;
}

/* The charge moved TAT `cost` intervals on; what of that still counts now is at most those
 * intervals less the time from the charge to the state's horizon: now, or the last charge
 * when a place kept for a waiting request lies ahead (once a request found TAT in its past,
 * the charge was forgotten; once another charge followed it, its place is that one's). Moving
 * TAT back by that much never passes more than never charging would; it is exact for a refund
 * that comes within an interval of the charge, and for the last place kept, given back before
 * its turn (for a cost of 1). A TAT that lands in the past is a full bucket, as for a fresh
 * client. */
static void refund(const struct limiter *self, union client_state *state, int64_t charged_ns,
                   int64_t now_ns, uint64_t cost)
{
    const struct gcra *g = (const struct gcra *)self;
    /* Now, or the last place kept ahead of now: a request allowed at t leaves TAT at most a
     * tolerance past t, and one kept a place at T leaves it exactly a tolerance past T. */
    int64_t horizon = max_i64(now_ns, state->gcra.tat_ns - g->tolerance_ns);
    int64_t back = (int64_t)cost * g->interval_ns - max_i64(horizon - charged_ns, 0);

    if (back > 0)
        state->gcra.tat_ns = max_i64(state->gcra.tat_ns - back, 0);
}

static int64_t idle_at(const struct limiter *self, const union client_state *state)
{
    (void)self;
    return state->gcra.tat_ns;
}

/* Allowed at T once max(TAT, T) + cost * T_interval - T <= tolerance: from T = TAT + cost *
 * interval - tolerance on (at once, when that has passed). Deciding at a T past `now` moves
 * TAT on from T, which every later decision reads as it should: a request before T finds TAT
 * further ahead, so it waits its turn after this one. */
static int64_t admits_at(const struct limiter *self, const union client_state *state,
                         int64_t now_ns, uint64_t cost)
{
    const struct gcra *g = (const struct gcra *)self;

    return max_i64(now_ns, state->gcra.tat_ns + (int64_t)cost * g->interval_ns - g->tolerance_ns);
}

static const struct limiter_ops gcra_ops = {
    .algorithm = LIMITER_GCRA,
    .decide = decide,
    .idle_at = idle_at,
    .refund = refund,
    .admits_at = admits_at,
};

struct limiter *limiter_gcra_create(const struct limiter_params *params, char err[LIMITER_ERR_LEN])
{
    struct gcra *g = limiter_alloc(sizeof *g, &gcra_ops, params, err);

    if (g == NULL)
        return NULL;
    g->interval_ns = div_ceil(g->base.params.per_ns, (int64_t)g->base.params.requests);
    if (__builtin_mul_overflow(g->interval_ns, (int64_t)g->base.params.burst, &g->tolerance_ns) ||
        g->tolerance_ns > INT64_MAX / 4) {
        limiter_set_error(err, "burst %llu of one request per %lld ns spans too long",
                          (unsigned long long)g->base.params.burst, (long long)g->interval_ns);
        limiter_free(&g->base);
        return NULL;
    }
    return &g->base;
}
