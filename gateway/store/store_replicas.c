/* The replicas counted in Redis; design in store_replicas.h. */
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "gateway/store/store.h"
#include "gateway/store/store_replicas.h"

struct gw_store_replicas {
    struct gw_store *store;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a beat answered, or the beats stop */
    bool stopping, answered;
    enum gw_store_result result;
    struct limiter_decision answer;
    _Atomic uint32_t alive;
    char id[GW_STORE_LEASE_LEN];
};

static void beat_done(void *arg, enum gw_store_result result)
{
    struct gw_store_replicas *r = arg;

    pthread_mutex_lock(&r->lock);
    r->result = result;
    r->answered = true;
    pthread_cond_broadcast(&r->wake);
    pthread_mutex_unlock(&r->lock);
}

/* One beat, waited for (by the store's timeout); the count kept when it answered. */
static void beat(struct gw_store_replicas *r)
{
    const char *names[] = {"replicas"};
    struct gw_store_ask ask = {.op = GW_STORE_BEAT, .names = names, .n = 1, .lease = r->id};
    struct gw_store_call *call = gw_store_prepare(r->store, &ask);

    if (call == NULL) /* degraded: the last count stands */
        return;
    r->answered = false;
    gw_store_send(r->store, call, &r->answer, beat_done, r);
    pthread_mutex_lock(&r->lock);
    while (!r->answered)
        pthread_cond_wait(&r->wake, &r->lock);
    pthread_mutex_unlock(&r->lock);
    if (r->result == GW_STORE_OK && r->answer.remaining > 0)
        atomic_store(&r->alive, (uint32_t)r->answer.remaining);
}

static void *run(void *arg)
{
    struct gw_store_replicas *r = arg;
    struct timespec due;

    clock_gettime(CLOCK_MONOTONIC, &due);
    pthread_mutex_lock(&r->lock);
    while (!r->stopping) {
        pthread_mutex_unlock(&r->lock);
        beat(r);
        due.tv_sec += GW_STORE_BEAT_NS / 1000000000LL;
        pthread_mutex_lock(&r->lock);
        while (!r->stopping && pthread_cond_timedwait(&r->wake, &r->lock, &due) == 0)
            ;
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

struct gw_store_replicas *gw_store_replicas_start(struct gw_store *store)
{
    struct gw_store_replicas *r = calloc(1, sizeof *r);
    pthread_condattr_t attr;
    unsigned char id[16];

    if (r == NULL)
        return NULL;
    r->store = store;
    randombytes_buf(id, sizeof id);
    sodium_bin2hex(r->id, sizeof r->id, id, sizeof id);
    pthread_mutex_init(&r->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&r->thread, NULL, run, r) != 0) {
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
    }
    return r;
}

uint32_t gw_store_replicas_alive(const struct gw_store_replicas *r)
{
    return r != NULL ? atomic_load(&r->alive) : 0;
}

void gw_store_replicas_stop(struct gw_store_replicas *r)
{
    bool joined;

    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    joined = r->stopping;
    r->stopping = true;
    pthread_cond_broadcast(&r->wake);
    pthread_mutex_unlock(&r->lock);
    if (!joined)
        pthread_join(r->thread, NULL);
}

void gw_store_replicas_free(struct gw_store_replicas *r)
{
    if (r == NULL)
        return;
    gw_store_replicas_stop(r);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
}
