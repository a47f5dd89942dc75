/*
 * Token bucket: `burst` tokens, refilled continuously at requests/per, starting full.
 *
 * Kept in exact integer "credit": with g = gcd(requests, per_ns), one token is per_ns/g credit
 * and every nanosecond adds requests/g credit, so 3 requests per second refill exactly, with no
 * rounding to drift. A client's state is the credit missing from a full bucket (its deficit) at
 * `last_ns`; zero is a full bucket, which is also a fresh client. Refill is computed from the
 * time elapsed, never by a timer.
 */
#include <stdlib.h>

#include "limiter/algorithm.h"

struct token_bucket {
    struct limiter base;
    int64_t token_credit;  /* credit of one token */
    int64_t credit_per_ns; /* refill speed */
    int64_t capacity;      /* credit of a full bucket */
};

/* The deficit at `now_ns`: less the refill since `last_ns`, or, before `last_ns` (a place kept
 * for a request at an instant still to come, or a clock that went back), more by the refill
 * between, since the tokens the state holds at `last_ns` were not there yet: it may then pass
 * the capacity. Never below zero. */
static int64_t deficit_at(const struct token_bucket *tb, const union client_state *state,
                          int64_t now_ns)
{
    int64_t elapsed = now_ns - state->bucket.last_ns;

    if (elapsed <= 0) /* no further than twice the capacity: all that is ever asked */
        return -elapsed >= div_ceil(2 * tb->capacity, tb->credit_per_ns)
                   ? state->bucket.deficit + 2 * tb->capacity
                   : state->bucket.deficit - elapsed * tb->credit_per_ns;
    if (elapsed >= div_ceil(state->bucket.deficit, tb->credit_per_ns))
        return 0;
    return state->bucket.deficit - elapsed * tb->credit_per_ns;
}

static int decide(const struct limiter *self, union client_state *state, int64_t now_ns,
                  uint64_t cost, bool consume, struct limiter_decision *out)
{
    const struct token_bucket *tb = (const struct token_bucket *)self;
    int64_t deficit = deficit_at(tb, state, now_ns);
    int64_t charge = (int64_t)cost * tb->token_credit; /* at most the capacity */

    out->allowed = tb->capacity - deficit >= charge;
    if (out->allowed) {
        deficit += charge;
        out->charged_ns = now_ns;
        if (consume && now_ns >= state->bucket.last_ns) {
            state->bucket.deficit = deficit;
            state->bucket.last_ns = now_ns;
        } else if (consume) { /* kept as of `last_ns`, which time must not refill twice */
            state->bucket.deficit += charge;
        }
    } else {
        /* Allowed once the refill since `last_ns` covers what is missing for `cost` tokens. */
        int64_t missing = state->bucket.deficit + charge - tb->capacity;
        out->retry_after_ms =
            ms_ceil(state->bucket.last_ns + div_ceil(missing, tb->credit_per_ns) - now_ns);
    }
    out->remaining =
        deficit < tb->capacity ? (uint64_t)((tb->capacity - deficit) / tb->token_credit) : 0;
    return 0;
}

/* The tokens go back in, less what the refill since `charged_ns` may already have made up
 * for them: a bucket that was full again meanwhile (and then spent by others) owes the
 * charge nothing more. So the refill from the charge to the state's own instant (the last
 * charge, which a place kept for a waiting request puts ahead of now) is taken off what comes
 * back, and the result never passes more than never charging would have. It is exact while
 * the refund comes before the charge could refill (a request shorter than its tokens' refill
 * time), and for the last place kept, given back before its turn; an earlier place given back
 * leaves a gap no one takes. */
static void refund(const struct limiter *self, union client_state *state, int64_t charged_ns,
                   int64_t now_ns, uint64_t cost)
{
    const struct token_bucket *tb = (const struct token_bucket *)self;
    int64_t at = max_i64(state->bucket.last_ns, now_ns);
    int64_t back = (int64_t)cost * tb->token_credit, elapsed = at - charged_ns, deficit;

    if (elapsed > 0)
        back =
            elapsed >= div_ceil(back, tb->credit_per_ns) ? 0 : back - elapsed * tb->credit_per_ns;
    deficit = deficit_at(tb, state, at) - back;
    state->bucket.deficit = deficit > 0 ? deficit : 0;
    state->bucket.last_ns = at;
}

static int64_t idle_at(const struct limiter *self, const union client_state *state)
{
    const struct token_bucket *tb = (const struct token_bucket *)self;

    return state->bucket.last_ns + div_ceil(state->bucket.deficit, tb->credit_per_ns);
}

/* Allowed once the deficit has come down to a full bucket less the charge. Deciding at a T
 * past `now` sets `last_ns` to T; a decision before T finds the deficit larger by the refill
 * still to come (deficit_at()), so it waits its turn after this one. */
static int64_t admits_at(const struct limiter *self, const union client_state *state,
                         int64_t now_ns, uint64_t cost)
{
    const struct token_bucket *tb = (const struct token_bucket *)self;
    int64_t over = state->bucket.deficit + (int64_t)cost * tb->token_credit - tb->capacity;

    /* Before `last_ns` the deficit grows back by the refill (deficit_at()): with `over` to
     * spare at `last_ns` (negative), the charge fitted that much earlier already. */
    if (over <= 0)
        return max_i64(now_ns, state->bucket.last_ns + over / tb->credit_per_ns);
    return max_i64(now_ns, state->bucket.last_ns + div_ceil(over, tb->credit_per_ns));
}

static const struct limiter_ops token_bucket_ops = {
    .algorithm = LIMITER_TOKEN_BUCKET,
    .decide = decide,
    .idle_at = idle_at,
    .refund = refund,
    .admits_at = admits_at,
};

static int64_t gcd(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t r = a % b;

        a = b;
        b = r;
    }
    return a;
}

struct limiter *limiter_token_bucket_create(const struct limiter_params *params,
                                            char err[LIMITER_ERR_LEN])
{
    struct token_bucket *tb = limiter_alloc(sizeof *tb, &token_bucket_ops, params, err);
    int64_t g;

    if (tb == NULL)
        return NULL;
    g = gcd((int64_t)tb->base.params.requests, tb->base.params.per_ns);
    tb->token_credit = tb->base.params.per_ns / g;
    tb->credit_per_ns = (int64_t)tb->base.params.requests / g;
    if (__builtin_mul_overflow(tb->token_credit, (int64_t)tb->base.params.burst, &tb->capacity) ||
        tb->capacity > INT64_MAX / 4) {
        limiter_set_error(err,
                          "burst %llu with requests %llu per %lld ns is too fine to "
                          "count exactly; round requests or per",
                          (unsigned long long)tb->base.params.burst,
                          (unsigned long long)tb->base.params.requests,
                          (long long)tb->base.params.per_ns);
        limiter_free(&tb->base);
        return NULL;
    }
    return &tb->base;
}
