/* The pools of idle upstream handles, one per origin, for the blocking handles and for each
 * event loop: a handle taken for an exchange, given back after with its connection, and closed
 * once idle too long or beyond upstream_max_idle (design in proxy.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/upstream/handle.h"
#include "gateway/upstream/proxy.h"
#include "limiter/limiter.h"

/* How long a handle beyond max_idle stays before a prune closes it: long enough that one
 * given back in a burst of answers is taken again by the requests that follow. */
#define EXCESS_AFTER_NS (250 * 1000000LL)

static struct pool_set shared_pools = {.lock = PTHREAD_MUTEX_INITIALIZER};
static _Atomic int64_t idle_timeout_ns = 60 * (int64_t)1000000000;
static atomic_uint max_idle = 64;

void gw_proxy_configure(int64_t idle_timeout, unsigned idle_max)
{
    atomic_store(&idle_timeout_ns, idle_timeout);
    atomic_store(&max_idle, idle_max);
}

int64_t gw_upstream_idle_timeout_ns(void)
{
    return atomic_load(&idle_timeout_ns);
}

/* The pools of `loop`, or of the handles that block when it is NULL. */
static struct pool_set *pools_of(struct gw_upstream_loop *loop)
{
    return loop != NULL ? &loop->pools : &shared_pools;
}

void gw_upstream_pools_free(struct gw_upstream_loop *loop)
{
    struct pool_set *set = pools_of(loop);

    pthread_mutex_lock(&set->lock);
    while (set->pools != NULL) {
        struct upstream_pool *pool = set->pools;

        set->pools = pool->next;
        while (pool->n_idle > 0)
            gw_upstream_free(pool->idle[--pool->n_idle]);
        free(pool->idle);
        free(pool->origin);
        free(pool);
    }
    pthread_mutex_unlock(&set->lock);
}

/* The pool of `origin` in `set`, made on first use; NULL when memory is short. Under the
 * set's lock. */
static struct upstream_pool *pool_of(struct pool_set *set, const char *origin)
{
    struct upstream_pool *pool;

    for (pool = set->pools; pool != NULL; pool = pool->next)
        if (strcmp(pool->origin, origin) == 0)
            return pool;
    pool = calloc(1, sizeof *pool);
    if (pool == NULL || (pool->origin = strdup(origin)) == NULL) {
        free(pool);
        return NULL;
    }
    pool->next = set->pools;
    set->pools = pool;
    return pool;
}

struct gw_upstream *gw_upstream_acquire(struct gw_upstream_loop *loop, const char *origin)
{
    struct pool_set *set = pools_of(loop);
    struct gw_upstream *u = NULL;
    struct upstream_pool *pool;

    pthread_mutex_lock(&set->lock);
    pool = pool_of(set, origin);
    if (pool != NULL && pool->n_idle > 0)
        u = pool->idle[--pool->n_idle];
    pthread_mutex_unlock(&set->lock);
    if (u != NULL || pool == NULL)
        return u;
    return gw_upstream_new(loop, pool);
}

void gw_upstream_release(struct gw_upstream *u)
{
    struct pool_set *set;
    struct upstream_pool *pool;

    if (u == NULL)
        return;
    gw_upstream_finish(u);
    set = pools_of(u->loop);
    pool = u->pool;
    u->idle_since_ns = limiter_now_ns();
    /* Kept even past upstream_max_idle: the next prune closes the excess. Closing it here
     * would close, in a busy moment, the connections the next requests then open anew. */
    pthread_mutex_lock(&set->lock);
    if (!gw_proxy_aborting()) {
        if (pool->n_idle == pool->cap) {
            size_t cap = pool->cap ? 2 * pool->cap : 16;
            struct gw_upstream **grown = realloc(pool->idle, cap * sizeof *grown);

            if (grown != NULL) {
                pool->idle = grown;
                pool->cap = cap;
            }
        }
        if (pool->n_idle < pool->cap) {
            pool->idle[pool->n_idle++] = u;
            u = NULL;
        }
    }
    pthread_mutex_unlock(&set->lock);
    if (u != NULL)
        gw_upstream_free(u); /* its connection closes */
}

static void prune_pools(struct pool_set *set, int64_t now_ns)
{
    int64_t oldest = now_ns - atomic_load(&idle_timeout_ns), settled = now_ns - EXCESS_AFTER_NS;
    size_t keep = atomic_load(&max_idle);
    struct gw_upstream *expired[64];
    size_t n = 0;

    /* Least recently used first: the handles idle too long, and those beyond
     * upstream_max_idle that have been idle a while, are a run at the front of each pool. At
     * most a batch per call, so the lock is never held long; the caller calls again soon. */
    pthread_mutex_lock(&set->lock);
    for (struct upstream_pool *pool = set->pools; pool != NULL; pool = pool->next) {
        size_t k = 0;

        while (k < pool->n_idle && n < sizeof expired / sizeof expired[0] &&
               (pool->idle[k]->idle_since_ns < oldest ||
                (pool->n_idle - k > keep && pool->idle[k]->idle_since_ns < settled)))
            expired[n++] = pool->idle[k++];
        if (k == 0)
            continue;
        memmove(pool->idle, pool->idle + k, (pool->n_idle - k) * sizeof *pool->idle);
        pool->n_idle -= k;
    }
    pthread_mutex_unlock(&set->lock);
    while (n > 0)
        gw_upstream_free(expired[--n]);
}

void gw_proxy_prune(int64_t now_ns)
{
    prune_pools(&shared_pools, now_ns);
}

void gw_upstream_loop_prune(struct gw_upstream_loop *loop, int64_t now_ns)
{
    prune_pools(&loop->pools, now_ns);
}
