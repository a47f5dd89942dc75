/*
 * Concurrency: at most `requests` of a client's requests in flight at once. A request takes
 * its units when admitted and gives them back when it ends (limiter_refund()); no clock is
 * involved, and `per` is not taken.
 *
 * When a slot comes back depends on when a request in flight ends, which nothing here can
 * foretell: a denied request is told to retry after one second, the least Retry-After says.
 * A client holding slots is never reclaimed as idle; only the table's eviction of its least
 * recently used client, when the table is full of clients with requests in flight, can forget
 * one (limiter.h), and a release for a forgotten client gives nothing back.
 */
#include "limiter/algorithm.h"

#define RETRY_MS 1000

static int decide(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t cost, bool consume, struct limiter_decision *out)
{
    uint64_t held = state->slots.in_flight, quota = self->params.requests;

    (void)now_ns;
    out->allowed = held + cost <= quota;
    if (out->allowed) {
        held += cost;
        out->charged_ns = now_ns;
        if (consume)
            state->slots.in_flight = held;
    } else {
        out->retry_after_ms = RETRY_MS;
    }
    out->remaining = held < quota ? quota - held : 0;
    return 0;
}

/* Held slots keep the state from ever counting as idle. */
static int64_t idle_at(const struct limiter *self, const union client_state *state)
{
    (void)self;
    return state->slots.in_flight == 0 ? 0 : LIMITER_MAX_NOW_NS;
}

/* A request ended: its units come back. */
static void refund(const struct limiter *self, union client_state *state, int64_t charged_ns,
                   int64_t now_ns, uint64_t cost)
{
    (void)self;
    (void)charged_ns;
    (void)now_ns;
    state->slots.in_flight -= cost < state->slots.in_flight ? cost : state->slots.in_flight;
}

static const struct limiter_ops concurrency_ops = {
    .algorithm = LIMITER_CONCURRENCY,
    .decide = decide,
    .idle_at = idle_at,
    .refund = refund,
};

struct limiter *limiter_concurrency_create(const struct limiter_params *params,
                                           char err[LIMITER_ERR_LEN])
{
    return limiter_alloc(sizeof(struct limiter), &concurrency_ops, params, err);
}
