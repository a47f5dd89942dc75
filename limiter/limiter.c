/* The algorithm-independent half of the limiter: names to constructors, parameter checks,
 * client keys and the decision path through the client table. */
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "limiter/algorithm.h"
#include "limiter/table.h"

/* Each algorithm's name, whether it is a bucket and its constructor, by enum
 * limiter_algorithm: the one place that knows them. */
static const struct algorithm {
    const char *name;
    bool takes_burst;
    struct limiter *(*create)(const struct limiter_params *, char[LIMITER_ERR_LEN]);
} algorithms[] = {
    [LIMITER_TOKEN_BUCKET] = {"token_bucket", true, limiter_token_bucket_create},
    [LIMITER_GCRA] = {"gcra", true, limiter_gcra_create},
    [LIMITER_FIXED_WINDOW] = {"fixed_window", false, limiter_fixed_window_create},
    [LIMITER_SLIDING_WINDOW_LOG] = {"sliding_window_log", false, limiter_sliding_window_log_create},
    [LIMITER_SLIDING_WINDOW_COUNTER] = {"sliding_window_counter", false,
                                        limiter_sliding_window_counter_create},
    [LIMITER_CONCURRENCY] = {"concurrency", false, limiter_concurrency_create},
};

#define N_ALGORITHMS (sizeof algorithms / sizeof algorithms[0])

/* `id`'s entry, or NULL for LIMITER_ALGORITHM_UNKNOWN (whose entry is empty) and values
 * outside the enum. */
static const struct algorithm *algorithm_of(enum limiter_algorithm id)
{
    if ((size_t)id >= N_ALGORITHMS || algorithms[id].name == NULL)
        return NULL;
    return &algorithms[id];
}

void limiter_set_error(char err[LIMITER_ERR_LEN], const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(err, LIMITER_ERR_LEN, fmt, ap);
    va_end(ap);
}

enum limiter_algorithm limiter_algorithm_from_name(const char *name)
{
    for (size_t i = 0; name != NULL && i < N_ALGORITHMS; i++)
        if (algorithms[i].name != NULL && strcmp(algorithms[i].name, name) == 0)
            return (enum limiter_algorithm)i;
    return LIMITER_ALGORITHM_UNKNOWN;
}

const char *limiter_algorithm_name(enum limiter_algorithm algorithm)
{
    const struct algorithm *a = algorithm_of(algorithm);

    return a != NULL ? a->name : NULL;
}

bool limiter_algorithm_takes_burst(enum limiter_algorithm algorithm)
{
    const struct algorithm *a = algorithm_of(algorithm);

    return a != NULL && a->takes_burst;
}

struct limiter *limiter_create(const struct limiter_params *params, char err[LIMITER_ERR_LEN])
{
    const struct algorithm *a;

    if (params == NULL || params->algorithm == NULL) {
        limiter_set_error(err, "no algorithm given");
        return NULL;
    }
    a = algorithm_of(limiter_algorithm_from_name(params->algorithm));
    if (a == NULL) {
        limiter_set_error(err, "unknown algorithm \"%.64s\" (expected " LIMITER_ALGORITHM_LIST ")",
                          params->algorithm);
        return NULL;
    }
    return a->create(params, err);
}

void *limiter_alloc(size_t size, const struct limiter_ops *ops, const struct limiter_params *params,
                    char err[LIMITER_ERR_LEN])
{
    struct limiter_params p = *params;
    bool takes_burst = limiter_algorithm_takes_burst(ops->algorithm);
    struct limiter *self;

    if (p.requests < 1 || p.requests > LIMITER_MAX_REQUESTS) {
        limiter_set_error(err, "requests must be between 1 and %llu, not %llu",
                          (unsigned long long)LIMITER_MAX_REQUESTS, (unsigned long long)p.requests);
        return NULL;
    }
    if (ops->algorithm == LIMITER_CONCURRENCY) {
        if (p.per_ns != 0) {
            limiter_set_error(err, "per does not apply to concurrency, which counts requests "
                                   "in flight, not over time");
            return NULL;
        }
    } else if (p.per_ns < LIMITER_MIN_PER_NS || p.per_ns > LIMITER_MAX_PER_NS) {
        limiter_set_error(err, "per must be between 1ms and 366d, not %lld ns",
                          (long long)p.per_ns);
        return NULL;
    }
    if (p.burst != 0 && !takes_burst) {
        limiter_set_error(err, "burst applies to token_bucket and gcra only, not %s",
                          limiter_algorithm_name(ops->algorithm));
        return NULL;
    }
    if (p.burst > LIMITER_MAX_REQUESTS) {
        limiter_set_error(err, "burst must be between 1 and %llu, not %llu",
                          (unsigned long long)LIMITER_MAX_REQUESTS, (unsigned long long)p.burst);
        return NULL;
    }
    if (takes_burst && p.burst == 0)
        p.burst = p.requests;
    if (p.max_clients == 0)
        p.max_clients = LIMITER_DEFAULT_MAX_CLIENTS;
    p.algorithm = limiter_algorithm_name(ops->algorithm);
    p.algorithm_id = ops->algorithm;
    if (sodium_init() < 0) {
        limiter_set_error(err, "libsodium failed to initialise");
        return NULL;
    }

    self = calloc(1, size);
    if (self == NULL) {
        limiter_set_error(err, "out of memory");
        return NULL;
    }
    self->ops = ops;
    self->params = p;
    randombytes_buf(self->hash_key, sizeof self->hash_key);
    self->clients = limiter_table_create(p.max_clients, self, err);
    if (self->clients == NULL) {
        free(self);
        return NULL;
    }
    return self;
}

void limiter_free(struct limiter *limiter)
{
    if (limiter == NULL)
        return;
    limiter_table_free(limiter->clients);
    free(limiter); /* the concrete type starts with the base, so this is its allocation */
}

/* The table key of `client_id` under `limiter`: SipHash with a secret key, so clients cannot
 * aim their ids at one shard or chain, and a 128-bit digest makes two distinct ids sharing a
 * state practically impossible. */
static void client_key(const struct limiter *limiter, const char *client_id, uint64_t key[2])
{
    crypto_shorthash_siphashx24((unsigned char *)key, (const unsigned char *)client_id,
                                strlen(client_id), limiter->hash_key);
}

static bool distinct(struct limiter *const *limiters, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (limiters[i] == limiters[j])
                return false;
    return true;
}

int limiter_decide_all(struct limiter *const *limiters, size_t n, const char *const *client_ids,
                       int64_t now_ns, struct limiter_decision *out)
{
    return limiter_decide_all_cost(limiters, n, client_ids, NULL, now_ns, out);
}

/* The arguments of limiter_decide_all_cost(): 0, or -1 with errno EINVAL. `out` is cleared
 * first, each with its limit. */
static int check_all(struct limiter *const *limiters, size_t n, const char *const *client_ids,
                     const uint64_t *costs, int64_t now_ns, struct limiter_decision *out)
{
    if (out == NULL || limiters == NULL || n == 0 || n > LIMITER_MAX_PER_REQUEST) {
        errno = EINVAL;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (limiters[i] == NULL) {
            errno = EINVAL;
            return -1;
        }
        out[i].limit = limiters[i]->params.requests;
    }
    if (client_ids == NULL || now_ns < 0 || now_ns > LIMITER_MAX_NOW_NS || !distinct(limiters, n)) {
        errno = EINVAL;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (client_ids[i] == NULL || client_ids[i][0] == '\0' ||
            (costs != NULL && (costs[i] == 0 || costs[i] > limiter_quota(limiters[i])))) {
            errno = EINVAL;
            return -1;
        }
    }
    return 0;
}

/* Locks each client's slot in every limiter, into `slots`.
 *
 * Slots are locked in one global order, by limiter address, whatever the caller's order: two
 * callers holding the same limiters in different orders (a reload that reorders a route's
 * limits keeps their limiters) must not each wait for the other. The order needs nothing from
 * the client ids: the limiters are distinct and each gives exactly one slot, so ordering the
 * limiters orders the slots, whichever client each slot belongs to. Within one limiter a
 * caller holds at most that one slot, and takes it last (after the shard mutex, see table.h),
 * so two callers with different ids for the same limiter never hold one lock each that the
 * other wants. Were one limiter ever passed twice with two ids, its two slots would have no
 * order between them; distinct() refuses that. */
static void lock_all(struct limiter *const *limiters, size_t n, const char *const *client_ids,
                     int64_t now_ns, struct client_slot **slots)
{
    size_t order[LIMITER_MAX_PER_REQUEST];

    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && limiters[order[j]] < limiters[order[j - 1]]; j--) {
            size_t t = order[j];

            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        uint64_t key[2];

        client_key(limiters[i], client_ids[i], key);
        slots[i] = limiter_table_lock_client(limiters[i]->clients, key, now_ns);
    }
}

/* Each limiter decides at `at_ns` (charging when `consume`); whether all allowed. -1 in
 * `*rc` when one failed. */
static bool decide_each(struct limiter *const *limiters, size_t n, struct client_slot **slots,
                        const uint64_t *costs, int64_t at_ns, bool consume,
                        struct limiter_decision *out, int *rc)
{
    bool all_allow = true;

    for (size_t i = 0; i < n && *rc == 0; i++) {
        if (limiters[i]->ops->decide(limiters[i], &slots[i]->state, at_ns, costs ? costs[i] : 1,
                                     consume, &out[i]) != 0)
            *rc = -1;
        all_allow &= out[i].allowed;
    }
    return all_allow && *rc == 0;
}

/* When the request, denied at `now_ns`, may wait: the earliest instant every limiter allows
 * it, if each can keep a place (admits_at) and it comes within each one's `max_wait_ns`;
 * else -1. */
static int64_t turn_of(struct limiter *const *limiters, size_t n, struct client_slot **slots,
                       const uint64_t *costs, int64_t now_ns, const int64_t *max_wait_ns)
{
    int64_t turn = now_ns;

    for (size_t i = 0; i < n; i++) {
        int64_t at;

        if (limiters[i]->ops->admits_at == NULL)
            return -1;
        at = limiters[i]->ops->admits_at(limiters[i], &slots[i]->state, now_ns,
                                         costs ? costs[i] : 1);
        if (at - now_ns > max_wait_ns[i])
            return -1;
        turn = at > turn ? at : turn;
    }
    return turn;
}

static int decide_all(struct limiter *const *limiters, size_t n, const char *const *client_ids,
                      const uint64_t *costs, int64_t now_ns, const int64_t *max_wait_ns,
                      int64_t *admit_ns, struct limiter_decision *out)
{
    struct client_slot *slots[LIMITER_MAX_PER_REQUEST];
    int64_t at = now_ns;
    int rc = 0;
    bool allowed;

    if (check_all(limiters, n, client_ids, costs, now_ns, out) != 0)
        return -1;
    lock_all(limiters, n, client_ids, now_ns, slots);
    /* One limit needs no separate check: a denial charges nothing anyway. */
    allowed = (n == 1 || decide_each(limiters, n, slots, costs, now_ns, false, out, &rc)) &&
              decide_each(limiters, n, slots, costs, now_ns, true, out, &rc);
    if (rc == 0 && !allowed && max_wait_ns != NULL) {
        struct limiter_decision later[LIMITER_MAX_PER_REQUEST];
        int64_t turn = turn_of(limiters, n, slots, costs, now_ns, max_wait_ns);

        /* Checked at its turn before any is charged there; buckets always allow by then. */
        if (turn > now_ns && decide_each(limiters, n, slots, costs, turn, false, later, &rc) &&
            decide_each(limiters, n, slots, costs, turn, true, out, &rc)) {
            at = turn;
            for (size_t i = 0; i < n; i++)
                out[i].wait_ns = turn - now_ns;
        }
    }
    for (size_t i = 0; i < n; i++) {
        out[i].reset_ms =
            ms_ceil(limiters[i]->ops->idle_at(limiters[i], &slots[i]->state) - now_ns);
        limiter_table_unlock_client(slots[i], now_ns);
    }
    if (admit_ns != NULL)
        *admit_ns = at;
    return rc;
}

int limiter_decide_all_cost(struct limiter *const *limiters, size_t n,
                            const char *const *client_ids, const uint64_t *costs, int64_t now_ns,
                            struct limiter_decision *out)
{
    return decide_all(limiters, n, client_ids, costs, now_ns, NULL, NULL, out);
}

int limiter_reserve_all(struct limiter *const *limiters, size_t n, const char *const *client_ids,
                        const uint64_t *costs, int64_t now_ns, const int64_t *max_wait_ns,
                        int64_t *admit_ns, struct limiter_decision *out)
{
    if (max_wait_ns == NULL || admit_ns == NULL) {
        errno = EINVAL;
        return -1;
    }
    return decide_all(limiters, n, client_ids, costs, now_ns, max_wait_ns, admit_ns, out);
}

/* Whether a call about one client names a limiter, a client and an instant it may take. */
static bool client_args_ok(const struct limiter *limiter, const char *client_id, int64_t now_ns)
{
    return limiter != NULL && client_id != NULL && client_id[0] != '\0' && now_ns >= 0 &&
           now_ns <= LIMITER_MAX_NOW_NS;
}

/* The slot of `client_id`, locked, for a look at or a change to a client the table holds
 * (a peek, a refund, a grant, a reset); NULL when it holds none: such a client is fresh, or
 * was evicted, and looking it up must not make room for it at another client's expense. */
static struct client_slot *held_slot(struct limiter *limiter, const char *client_id)
{
    uint64_t key[2];

    client_key(limiter, client_id, key);
    return limiter_table_find_client(limiter->clients, key);
}

int limiter_refund(struct limiter *limiter, const char *client_id, uint64_t cost,
                   int64_t charged_ns, int64_t now_ns)
{
    struct client_slot *slot;

    if (!client_args_ok(limiter, client_id, now_ns) || cost == 0 || cost > limiter_quota(limiter) ||
        charged_ns < 0 || charged_ns > LIMITER_MAX_NOW_NS) {
        errno = EINVAL;
        return -1;
    }
    slot = held_slot(limiter, client_id);
    if (slot == NULL)
        return 0;
    limiter->ops->refund(limiter, &slot->state, charged_ns, now_ns, cost);
    limiter_table_unlock_client(slot, now_ns);
    return 0;
}

/* A concurrency limiter's units come back only as its requests end (limiter_refund()): a
 * reset or a grant by hand would let more run at once than the limit says. */
static bool takes_grants(const struct limiter *limiter)
{
    return limiter->ops->algorithm != LIMITER_CONCURRENCY;
}

/* A client's state changed by an operator: made a fresh client's (`reset`), or `units` given
 * back. 1 when it had spent something, 0 when it had not (or the table holds no state of it),
 * -1 for bad arguments (limiter.h). */
static int by_hand(struct limiter *limiter, const char *client_id, bool reset, uint64_t units,
                   int64_t now_ns)
{
    struct client_slot *slot;
    int spent;

    if (!client_args_ok(limiter, client_id, now_ns) || !takes_grants(limiter) ||
        (!reset && units == 0)) {
        errno = EINVAL;
        return -1;
    }
    slot = held_slot(limiter, client_id);
    if (slot == NULL)
        return 0;
    spent = limiter->ops->idle_at(limiter, &slot->state) > now_ns;
    /* No state holds more than the quota to give back, and the ops count no further. */
    if (units > limiter_quota(limiter))
        units = limiter_quota(limiter);
    if (reset && limiter->ops->release != NULL)
        limiter->ops->release(&slot->state);
    if (reset)
        memset(&slot->state, 0, sizeof slot->state); /* a fresh client's, for every algorithm */
    else if (limiter->ops->grant != NULL)
        limiter->ops->grant(limiter, &slot->state, now_ns, units);
    else
        limiter->ops->refund(limiter, &slot->state, now_ns, now_ns, units);
    limiter_table_unlock_client(slot, now_ns);
    return spent;
}

int limiter_reset(struct limiter *limiter, const char *client_id, int64_t now_ns)
{
    return by_hand(limiter, client_id, true, 0, now_ns);
}

int limiter_grant(struct limiter *limiter, const char *client_id, uint64_t units, int64_t now_ns)
{
    return by_hand(limiter, client_id, false, units, now_ns);
}

int limiter_peek(struct limiter *limiter, const char *client_id, uint64_t cost, int64_t now_ns,
                 struct limiter_decision *out)
{
    union client_state fresh;
    struct client_slot *slot;
    int rc;

    if (check_all(&limiter, 1, &client_id, &cost, now_ns, out) != 0)
        return -1;
    slot = held_slot(limiter, client_id);
    memset(&fresh, 0, sizeof fresh);
    rc = limiter->ops->decide(limiter, slot ? &slot->state : &fresh, now_ns, cost, false, out);
    out->reset_ms = ms_ceil(limiter->ops->idle_at(limiter, slot ? &slot->state : &fresh) - now_ns);
    if (slot != NULL)
        limiter_table_unlock_client(slot, now_ns);
    else if (limiter->ops->release != NULL) /* a log may have grown for the look */
        limiter->ops->release(&fresh);
    return rc;
}

int limiter_decide(struct limiter *limiter, const char *client_id, int64_t now_ns,
                   struct limiter_decision *out)
{
    return limiter_decide_all(&limiter, 1, &client_id, now_ns, out);
}

bool limiter_allow_request(struct limiter *limiter, const char *client_id)
{
    struct limiter_decision decision;

    return limiter_decide(limiter, client_id, limiter_now_ns(), &decision) == 0 && decision.allowed;
}

static int64_t timespec_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_to_wall_ns;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

static void clock_init(void)
{
    mono_to_wall_ns = timespec_ns(CLOCK_REALTIME) - timespec_ns(CLOCK_MONOTONIC);
}

int64_t limiter_now_ns(void)
{
    pthread_once(&clock_once, clock_init);
    return timespec_ns(CLOCK_MONOTONIC) + mono_to_wall_ns;
}

void limiter_get_stats(const struct limiter *limiter, struct limiter_stats *out)
{
    memset(out, 0, sizeof *out);
    limiter_table_stats(limiter->clients, out);
}

const struct limiter_params *limiter_get_params(const struct limiter *limiter)
{
    return &limiter->params;
}

uint64_t limiter_quota(const struct limiter *limiter)
{
    return limiter_algorithm_takes_burst(limiter->params.algorithm_id) ? limiter->params.burst
                                                                       : limiter->params.requests;
}
