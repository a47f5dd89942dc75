/* The shared store's refusals kept by this replica; design in refusals.h. */
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <string.h>

#include "gateway/modules/limit/refusals.h"

#define STRIPES 64 /* locks over the slots: slot i is guarded by stripe i % STRIPES */

/* What a refusal says of one limit. */
struct said {
    uint64_t limit, remaining, cost;
    int64_t reset_ms, retry_after_ms;
    bool allowed;
};

/* One client's refusal on one set. */
struct refusal {
    unsigned char digest[16]; /* of the set's serial and the keys; all zero: empty */
    uint64_t serial;          /* the set's */
    int64_t asked_ns, until_ns;
    size_t n;
    struct said each[LIMITER_MAX_PER_REQUEST];
};

static struct refusal slots[GW_REFUSALS_SLOTS];
static pthread_mutex_t stripes[STRIPES] = {[0 ... STRIPES - 1] = PTHREAD_MUTEX_INITIALIZER};
static _Atomic uint64_t saved;
/* When an operator last changed a client here: a refusal asked before it may predate the
 * change, and is not kept. */
static _Atomic int64_t forgotten_ns;

bool gw_refusals_may_keep(const struct gw_limit_set *set)
{
    for (size_t i = 0; i < set->n_limits; i++)
        if (set->config[i].count.set || set->config[i].delay.set ||
            set->config[i].params.algorithm_id == LIMITER_CONCURRENCY)
            return false;
    return set->n_limits > 0;
}

/* The digest of `set` and the keys `ids` (NUL-separated), and its slot. */
static size_t digest_of(const struct gw_limit_set *set, const char *const *ids,
                        unsigned char digest[16])
{
    crypto_generichash_state h;
    uint64_t slot;

    crypto_generichash_init(&h, NULL, 0, 16);
    crypto_generichash_update(&h, (const unsigned char *)&set->serial, sizeof set->serial);
    for (size_t i = 0; i < set->n_limits; i++)
        crypto_generichash_update(&h, (const unsigned char *)ids[i], strlen(ids[i]) + 1);
    crypto_generichash_final(&h, digest, 16);
    digest[0] |= 1; /* never all zero, which marks an empty slot */
    memcpy(&slot, digest, sizeof slot);
    return (size_t)(slot % GW_REFUSALS_SLOTS);
}

void gw_refusals_keep(const struct gw_limit_set *set, const char *const *ids, const uint64_t *costs,
                      const struct limiter_decision *each, int64_t asked_ns, int64_t most_ns)
{
    unsigned char digest[16];
    size_t i = digest_of(set, ids, digest);
    int64_t retry_ms = 0;
    struct refusal r = {.serial = set->serial, .asked_ns = asked_ns, .n = set->n_limits};

    if (most_ns <= 0 || asked_ns <= atomic_load(&forgotten_ns))
        return;
    for (size_t k = 0; k < set->n_limits; k++) {
        r.each[k] = (struct said){each[k].limit,    each[k].remaining,      costs[k],
                                  each[k].reset_ms, each[k].retry_after_ms, each[k].allowed};
        if (!each[k].allowed && each[k].retry_after_ms > retry_ms)
            retry_ms = each[k].retry_after_ms;
    }
    /* R is rounded up to a whole millisecond: one less is never more than Redis holds it. */
    r.until_ns = asked_ns + (retry_ms > 1 ? retry_ms - 1 : 0) * 1000000;
    if (r.until_ns - asked_ns > most_ns)
        r.until_ns = asked_ns + most_ns;
    if (r.until_ns <= asked_ns)
        return;
    memcpy(r.digest, digest, sizeof digest);
    pthread_mutex_lock(&stripes[i % STRIPES]);
    /* Again under the lock: a change here since the look above has forgotten the slot, and
     * this refusal, asked before it, must not be written back over it. */
    if (asked_ns > atomic_load(&forgotten_ns))
        slots[i] = r;
    pthread_mutex_unlock(&stripes[i % STRIPES]);
}

/* `ms` counted down by `elapsed_ns`, rounded up, never below 0. */
static int64_t less(int64_t ms, int64_t elapsed_ns)
{
    int64_t left = ms * 1000000 - elapsed_ns;

    return left > 0 ? (left + 999999) / 1000000 : 0;
}

bool gw_refusals_find(const struct gw_limit_set *set, const char *const *ids, const uint64_t *costs,
                      int64_t now_ns, struct limiter_decision *each)
{
    unsigned char digest[16];
    size_t i = digest_of(set, ids, digest);
    struct refusal r;
    bool holds;

    pthread_mutex_lock(&stripes[i % STRIPES]);
    r = slots[i];
    pthread_mutex_unlock(&stripes[i % STRIPES]);
    holds = sodium_memcmp(r.digest, digest, sizeof digest) == 0 && now_ns >= r.asked_ns &&
            now_ns < r.until_ns && r.n == set->n_limits;
    for (size_t k = 0; holds && k < r.n; k++)
        holds = costs[k] >= r.each[k].cost; /* a cheaper request might pass */
    if (!holds)
        return false;
    for (size_t k = 0; k < r.n; k++)
        each[k] = (struct limiter_decision){
            .allowed = r.each[k].allowed,
            .limit = r.each[k].limit,
            .remaining = r.each[k].remaining,
            .reset_ms = less(r.each[k].reset_ms, now_ns - r.asked_ns),
            .retry_after_ms =
                r.each[k].allowed ? 0 : less(r.each[k].retry_after_ms, now_ns - r.asked_ns),
        };
    atomic_fetch_add(&saved, 1);
    return true;
}

void gw_refusals_forget(const struct gw_limit_set *set, const char *const *ids)
{
    unsigned char digest[16];
    bool every = false;
    size_t i;

    atomic_store(&forgotten_ns, limiter_now_ns());
    for (size_t k = 0; k < set->n_limits; k++)
        every |= ids[k] == NULL;
    if (every) { /* some key unknown: every client's refusal on the set */
        for (i = 0; i < GW_REFUSALS_SLOTS; i++) {
            pthread_mutex_lock(&stripes[i % STRIPES]);
            if (slots[i].serial == set->serial)
                memset(&slots[i], 0, sizeof slots[i]);
            pthread_mutex_unlock(&stripes[i % STRIPES]);
        }
        return;
    }
    i = digest_of(set, ids, digest);
    pthread_mutex_lock(&stripes[i % STRIPES]);
    if (memcmp(slots[i].digest, digest, sizeof digest) == 0)
        memset(&slots[i], 0, sizeof slots[i]);
    pthread_mutex_unlock(&stripes[i % STRIPES]);
}

void gw_refusals_render(FILE *out)
{
    fprintf(out,
            "# HELP sluice_store_calls_saved_total Requests the shared store had refused already, "
            "answered by this replica without asking it again.\n"
            "# TYPE sluice_store_calls_saved_total counter\n"
            "sluice_store_calls_saved_total %llu\n",
            (unsigned long long)atomic_load(&saved));
}
