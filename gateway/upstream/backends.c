#include "gateway/upstream/backends.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

struct gw_backends {
    pthread_mutex_t lock; /* the lists; taken when a config is built */
    struct gw_backend *servers;
    struct gw_retry_budget *budgets;
};

unsigned gw_fault_class(enum gw_fault fault, long status)
{
    switch (fault) {
    case GW_FAULT_NONE:
        return status == 502   ? CONFIG_FAIL_502
               : status == 503 ? CONFIG_FAIL_503
               : status == 504 ? CONFIG_FAIL_504
                               : 0;
    case GW_FAULT_DNS:
    case GW_FAULT_REFUSED:
    case GW_FAULT_CONNECT_TIMEOUT:
    case GW_FAULT_TLS:
        return CONFIG_FAIL_CONNECT;
    case GW_FAULT_TIMEOUT:
        return CONFIG_FAIL_TIMEOUT;
    case GW_FAULT_RESET:
    case GW_FAULT_INVALID:
    case GW_FAULT_OTHER:
        return CONFIG_FAIL_RESET; /* the connection gave no answer that could be passed on */
    default:
        return 0;
    }
}

struct gw_backends *gw_backends_new(void)
{
    struct gw_backends *b = calloc(1, sizeof *b);

    if (b != NULL)
        pthread_mutex_init(&b->lock, NULL);
    return b;
}

void gw_backends_free(struct gw_backends *backends)
{
    if (backends == NULL)
        return;
    for (struct gw_backend *b = backends->servers, *next; b != NULL; b = next) {
        next = b->next;
        pthread_mutex_destroy(&b->lock);
        free(b->owner);
        free(b->url);
        free(b);
    }
    for (struct gw_retry_budget *r = backends->budgets, *next; r != NULL; r = next) {
        next = r->next;
        free(r->route);
        free(r);
    }
    pthread_mutex_destroy(&backends->lock);
    free(backends);
}

struct gw_backend *gw_backends_get(struct gw_backends *backends, const char *owner, bool shared,
                                   const char *url)
{
    struct gw_backend *b;

    pthread_mutex_lock(&backends->lock);
    for (b = backends->servers; b != NULL; b = b->next)
        if (b->shared == shared && strcmp(b->owner, owner) == 0 && strcmp(b->url, url) == 0)
            break;
    if (b == NULL && (b = calloc(1, sizeof *b)) != NULL) {
        b->owner = strdup(owner);
        b->shared = shared;
        b->url = strdup(url);
        if (b->owner == NULL || b->url == NULL) {
            free(b->owner);
            free(b->url);
            free(b);
            b = NULL;
        } else {
            pthread_mutex_init(&b->lock, NULL);
            atomic_init(&b->healthy, true);
            b->next = backends->servers;
            backends->servers = b;
        }
    }
    pthread_mutex_unlock(&backends->lock);
    return b;
}

struct gw_retry_budget *gw_backends_budget(struct gw_backends *backends, const char *route)
{
    struct gw_retry_budget *r;

    pthread_mutex_lock(&backends->lock);
    for (r = backends->budgets; r != NULL; r = r->next)
        if (strcmp(r->route, route) == 0)
            break;
    if (r == NULL && (r = calloc(1, sizeof *r)) != NULL) {
        if ((r->route = strdup(route)) == NULL) {
            free(r);
            r = NULL;
        } else {
            r->next = backends->budgets;
            backends->budgets = r;
        }
    }
    pthread_mutex_unlock(&backends->lock);
    return r;
}

static uint32_t gcd(uint32_t a, uint32_t b)
{
    while (b != 0) {
        uint32_t t = a % b;

        a = b;
        b = t;
    }
    return a;
}

/* nginx's smooth weighted round robin, run once over a whole cycle: each turn every server
 * gains its weight, the one with the most goes next and loses the total. */
static int build_schedule(struct gw_backend_set *set)
{
    uint32_t divisor = 0;
    int64_t current[CONFIG_MAX_SERVERS] = {0}, total = 0;

    for (size_t i = 0; i < set->n; i++)
        divisor = gcd(divisor, set->weights[i]);
    for (size_t i = 0; i < set->n; i++)
        total += set->weights[i] / divisor;
    set->schedule = malloc((size_t)total * sizeof *set->schedule);
    if (set->schedule == NULL)
        return -1;
    set->n_schedule = (size_t)total;
    for (size_t turn = 0; turn < set->n_schedule; turn++) {
        size_t best = 0;

        for (size_t i = 0; i < set->n; i++) {
            current[i] += set->weights[i] / divisor;
            if (current[i] > current[best])
                best = i;
        }
        current[best] -= total;
        set->schedule[turn] = (uint16_t)best;
    }
    return 0;
}

int gw_backend_set_init(struct gw_backend_set *set, struct gw_backends *backends,
                        const struct config_route *route)
{
    uint32_t *weights;

    const struct config_upstream *up = &route->upstream;
    const char *owner = up->name != NULL ? up->name : route->name;

    memset(set, 0, sizeof *set);
    set->n = up->n_servers;
    set->balance = up->balance;
    set->servers = calloc(set->n, sizeof *set->servers);
    weights = calloc(set->n, sizeof *weights);
    set->weights = weights;
    if (set->servers == NULL || weights == NULL)
        return -1;
    for (size_t i = 0; i < set->n; i++) {
        weights[i] = up->servers[i].weight;
        set->servers[i] = gw_backends_get(backends, owner, up->name != NULL, up->servers[i].url);
        if (set->servers[i] == NULL)
            return -1;
    }
    return build_schedule(set);
}

void gw_backend_set_free(struct gw_backend_set *set)
{
    free(set->servers);
    free((uint32_t *)set->weights);
    free(set->schedule);
    memset(set, 0, sizeof *set);
}

/* --- choosing ------------------------------------------------------------------------ */

static uint64_t random_next(void)
{
    static _Thread_local uint64_t state;

    /* Seeded from the system's randomness: threads made one after another (one per
     * connection) reuse the same memory and start within the same second. */
    while (state == 0)
        randombytes_buf(&state, sizeof state);
    state ^= state << 13; /* xorshift64 */
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* Passive health alone: not skipped, or due its one probe and nobody has taken it. */
static bool passively_up(const struct gw_backend *b, int64_t now_ns)
{
    int64_t until = atomic_load_explicit(&b->down_until_ns, memory_order_relaxed);

    return until == 0 || (now_ns >= until && !atomic_load(&b->probing));
}

bool gw_backend_healthy(const struct gw_backend *b, int64_t now_ns)
{
    return atomic_load_explicit(&b->healthy, memory_order_relaxed) && passively_up(b, now_ns);
}

/* Of the servers marked in `allowed`, the one the balance picks. */
static size_t choose(struct gw_backend_set *set, uint64_t allowed)
{
    size_t idx[CONFIG_MAX_SERVERS], m = 0, a, b;
    int64_t load_a, load_b;
    uint64_t turn = 0, total = 0, r;

    if (set->balance == CONFIG_BALANCE_ROUND_ROBIN) {
        size_t i;

        turn = atomic_fetch_add_explicit(&set->turn, 1, memory_order_relaxed);
        i = set->schedule[turn % set->n_schedule];
        if (allowed & (UINT64_C(1) << i))
            return i;
    }
    for (size_t i = 0; i < set->n; i++)
        if (allowed & (UINT64_C(1) << i)) {
            idx[m++] = i;
            total += set->weights[i];
        }
    if (m == 1)
        return idx[0];
    if (set->balance != CONFIG_BALANCE_LEAST_REQUEST) {
        /* random_two's first draw; or, for round_robin, the turn of a server left out, given
         * to the others by weight (the turn, mixed, picks one as a draw would) */
        r = set->balance == CONFIG_BALANCE_ROUND_ROBIN
                ? ((turn * UINT64_C(0x9E3779B97F4A7C15)) >> 32) % total
                : random_next() % total;
        for (a = 0; r >= set->weights[idx[a]]; a++)
            r -= set->weights[idx[a]];
        if (set->balance == CONFIG_BALANCE_ROUND_ROBIN)
            return idx[a];
        total -= set->weights[idx[a]];
        r = random_next() % total;
        for (b = 0; b == a || r >= set->weights[idx[b]]; b++)
            if (b != a)
                r -= set->weights[idx[b]];
        load_a = atomic_load(&set->servers[idx[a]]->in_flight);
        load_b = atomic_load(&set->servers[idx[b]]->in_flight);
        return load_b < load_a ? idx[b] : idx[a];
    }
    a = random_next() % m; /* least_request: two uniform draws, load per unit of weight */
    b = random_next() % (m - 1);
    if (b >= a)
        b++;
    load_a = (atomic_load(&set->servers[idx[a]]->in_flight) + 1) * set->weights[idx[b]];
    load_b = (atomic_load(&set->servers[idx[b]]->in_flight) + 1) * set->weights[idx[a]];
    return load_b < load_a ? idx[b] : idx[a];
}

/* Panic mode: the server that failed longest ago, among `among` (or all when none). */
static size_t least_recently_failed(const struct gw_backend_set *set, uint64_t among)
{
    size_t best = set->n;

    for (size_t i = 0; i < set->n; i++) {
        if (among != 0 && !(among & (UINT64_C(1) << i)))
            continue;
        if (best == set->n || atomic_load(&set->servers[i]->last_failed_ns) <
                                  atomic_load(&set->servers[best]->last_failed_ns))
            best = i;
    }
    return best;
}

size_t gw_backend_pick(struct gw_backend_set *set, uint64_t tried, int64_t now_ns, bool *probe)
{
    uint64_t all = set->n == 64 ? UINT64_MAX : (UINT64_C(1) << set->n) - 1, healthy = 0;
    uint64_t untried = all & ~tried;

    *probe = false;
    for (size_t i = 0; i < set->n; i++)
        if (gw_backend_healthy(set->servers[i], now_ns))
            healthy |= UINT64_C(1) << i;
    /* Untried and healthy; else healthy, tried or not; else the panic choice. A server due
     * its probe is taken by one request only: the others look again without it. */
    for (int round = 0; round < 4; round++) {
        uint64_t allowed = (healthy & untried) != 0 ? healthy & untried : healthy;
        size_t i;
        struct gw_backend *b;
        bool expected = false;

        if (allowed == 0)
            break;
        i = choose(set, allowed);
        b = set->servers[i];
        if (atomic_load_explicit(&b->down_until_ns, memory_order_relaxed) == 0)
            return i;
        if (atomic_compare_exchange_strong(&b->probing, &expected, true)) {
            *probe = true;
            return i;
        }
        healthy &= ~(UINT64_C(1) << i);
    }
    return least_recently_failed(set, untried);
}

/* --- outcomes ------------------------------------------------------------------------- */

void gw_backend_begin(struct gw_backend *b)
{
    atomic_fetch_add_explicit(&b->in_flight, 1, memory_order_relaxed);
}

void gw_backend_finish(struct gw_backend *b, bool reported, bool probe)
{
    atomic_fetch_sub_explicit(&b->in_flight, 1, memory_order_relaxed);
    if (probe && !reported) /* a probe given up says nothing: the next request probes */
        atomic_store(&b->probing, false);
}

bool gw_backend_report(struct gw_backend *b, const struct config_route *route, enum gw_fault fault,
                       long status, int64_t now_ns, bool probe)
{
    bool failed = (gw_fault_class(fault, status) & route->upstream.passive.fail_on) != 0,
         skipped = false;
    int cls = fault == GW_FAULT_NONE && status >= 100 && status < 600 ? (int)(status / 100) - 1
                                                                      : GW_STATUS_CLASSES - 1;

    atomic_fetch_add_explicit(&b->answers[cls], 1, memory_order_relaxed);
    if (failed)
        atomic_store_explicit(&b->last_failed_ns, now_ns, memory_order_relaxed);
    if (probe) { /* the probe's outcome decides */
        pthread_mutex_lock(&b->lock);
        atomic_store(&b->down_until_ns,
                     failed ? now_ns + route->upstream.passive.fail_timeout_ns : 0);
        b->fails = 0;
        atomic_store(&b->probing, false);
        pthread_mutex_unlock(&b->lock);
        return failed;
    }
    if (!failed || route->upstream.passive.max_fails == 0 || atomic_load(&b->down_until_ns) != 0)
        return false; /* a straggler's failure while skipped changes nothing */
    pthread_mutex_lock(&b->lock);
    if (b->fails == 0 || now_ns - b->window_start_ns > route->upstream.passive.fail_window_ns) {
        b->fails = 0;
        b->window_start_ns = now_ns;
    }
    if (++b->fails >= route->upstream.passive.max_fails && atomic_load(&b->down_until_ns) == 0) {
        atomic_store(&b->down_until_ns, now_ns + route->upstream.passive.fail_timeout_ns);
        b->fails = 0;
        skipped = true;
    }
    pthread_mutex_unlock(&b->lock);
    return skipped;
}

bool gw_backend_should_log(struct gw_backend *b, enum gw_fault fault, int64_t now_ns)
{
    int64_t last = atomic_load_explicit(&b->logged_ns[fault], memory_order_relaxed);

    return (last == 0 || now_ns - last >= 1000000000) &&
           atomic_compare_exchange_strong(&b->logged_ns[fault], &last, now_ns);
}

/* Moves the budget to the window of `now_ns`, starting it afresh when it has passed. */
static void budget_roll(struct gw_retry_budget *budget, int64_t now_ns)
{
    int64_t window = now_ns / GW_BUDGET_WINDOW_NS;
    int64_t seen = atomic_load_explicit(&budget->window, memory_order_relaxed);

    if (seen != window && atomic_compare_exchange_strong(&budget->window, &seen, window)) {
        atomic_store(&budget->requests, 0);
        atomic_store(&budget->retries, 0);
    }
}

void gw_retry_budget_count(struct gw_retry_budget *budget, int64_t now_ns)
{
    budget_roll(budget, now_ns);
    atomic_fetch_add_explicit(&budget->requests, 1, memory_order_relaxed);
}

bool gw_retry_budget_take(struct gw_retry_budget *budget, uint32_t percent, int64_t now_ns)
{
    uint64_t allowance, taken;

    budget_roll(budget, now_ns);
    allowance = atomic_load(&budget->requests) * percent / 100 + (percent > 0 ? GW_RETRY_MIN : 0);
    taken = atomic_load(&budget->retries);
    do /* taken only while under the allowance: a window's roll never meets a half step */
        if (taken >= allowance)
            return false;
    while (!atomic_compare_exchange_weak(&budget->retries, &taken, taken + 1));
    return true;
}

void gw_backend_set_render(const struct gw_backend_set *set, FILE *out,
                           enum gw_backend_family family, int64_t now_ns)
{
    static const char *const classes[GW_STATUS_CLASSES] = {"1xx", "2xx", "3xx",
                                                           "4xx", "5xx", "error"};

    for (size_t i = 0; i < set->n; i++) {
        struct gw_backend *b = set->servers[i];

        const char *label = gw_backend_owner_kind(b);

        if (family == GW_FAMILY_HEALTHY)
            fprintf(out, "sluice_upstream_healthy{%s=\"%s\",server=\"%s\"} %d\n", label, b->owner,
                    b->url, gw_backend_healthy(b, now_ns) ? 1 : 0);
        else if (family == GW_FAMILY_INFLIGHT)
            fprintf(out, "sluice_upstream_inflight{%s=\"%s\",server=\"%s\"} %lld\n", label,
                    b->owner, b->url, (long long)atomic_load(&b->in_flight));
        else
            for (int c = 0; c < GW_STATUS_CLASSES; c++)
                fprintf(out,
                        "sluice_upstream_requests_total{%s=\"%s\",server=\"%s\","
                        "status_class=\"%s\"} %llu\n",
                        label, b->owner, b->url, classes[c],
                        (unsigned long long)atomic_load(&b->answers[c]));
    }
}

const char *gw_backend_owner_kind(const struct gw_backend *b)
{
    return b->shared ? "upstream" : "route";
}
