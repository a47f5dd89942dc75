/* Leases of concurrency slots held in Redis, renewed while their requests live; design in
 * store_leases.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "gateway/store/store_leases.h"

struct gw_store_lease {
    struct gw_store_lease *prev, *next;
    int64_t due_ns;             /* when it is renewed next */
    struct gw_script_args args; /* GW_STORE_RENEW of the request's slots */
};

struct gw_store_leases {
    struct gw_store_workers *workers;
    struct gw_store_health *health;
    int64_t lease_ns, timeout_ns;
    pthread_mutex_t lock; /* the list and the flags */
    pthread_cond_t wake;
    struct gw_store_lease *head;
    _Atomic uint64_t held;
    bool started, stopping;
    pthread_t thread;
};

struct gw_store_leases *gw_store_leases_new(struct gw_store_workers *workers,
                                            struct gw_store_health *health, int64_t lease_ns,
                                            int64_t timeout_ns)
{
    struct gw_store_leases *l = calloc(1, sizeof *l);
    pthread_condattr_t monotonic;

    if (l == NULL)
        return NULL;
    l->workers = workers;
    l->health = health;
    l->lease_ns = lease_ns;
    l->timeout_ns = timeout_ns;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC); /* a wall clock may step */
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, &monotonic);
    pthread_condattr_destroy(&monotonic);
    return l;
}

/* A call of `args` (copied) with the usual deadline, or NULL when the store is not to be
 * asked now (degraded: asked only as its probe, store_health.h) or memory is short. */
static struct gw_store_call *call_of(struct gw_store_leases *l, const struct gw_script_args *args)
{
    uint64_t state;
    struct gw_store_call *call;

    if (!gw_store_health_may_try(l->health, &state))
        return NULL;
    call = gw_store_call_new(limiter_now_ns() + l->timeout_ns, state);
    if (call != NULL)
        gw_script_args_copy(&call->args, args);
    return call;
}

/* Queues each of `calls` with no one to tell: what they did shows in Redis alone. */
static void send_all(struct gw_store_leases *l, struct gw_store_call *calls)
{
    while (calls != NULL) {
        struct gw_store_call *next = calls->next;

        calls->next = NULL;
        if (gw_store_workers_queue(l->workers, calls) != 0)
            gw_store_call_free(calls);
        calls = next;
    }
}

/* The instant a wait of `ns` from now ends, on the condition's clock. */
static struct timespec after(int64_t ns)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ns / 1000000000;
    t.tv_nsec += ns % 1000000000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    return t;
}

/* Every sixth of a lease, each lease due (a third of a lease after it was taken or last
 * renewed) is renewed: each on its own schedule, so requests that began together are not
 * all renewed in one burst forever. The calls are made under the lock and queued after it. */
static void *renew_loop(void *arg)
{
    struct gw_store_leases *l = arg;

    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        struct timespec until = after(l->lease_ns / 6);
        struct gw_store_call *calls = NULL;
        int64_t now;

        while (!l->stopping && pthread_cond_timedwait(&l->wake, &l->lock, &until) == 0)
            ;
        now = limiter_now_ns();
        for (struct gw_store_lease *lease = l->head; !l->stopping && lease; lease = lease->next) {
            struct gw_store_call *call;

            if (lease->due_ns > now || (call = call_of(l, &lease->args)) == NULL)
                continue;
            lease->due_ns = now + l->lease_ns / 3;
            call->next = calls;
            calls = call;
        }
        pthread_mutex_unlock(&l->lock);
        send_all(l, calls);
        pthread_mutex_lock(&l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

struct gw_store_lease *gw_store_lease_hold(struct gw_store_leases *l,
                                           const struct gw_script_args *renew)
{
    struct gw_store_lease *lease = malloc(sizeof *lease);

    if (lease == NULL)
        return NULL;
    gw_script_args_copy(&lease->args, renew);
    lease->due_ns = limiter_now_ns() + l->lease_ns / 3;
    pthread_mutex_lock(&l->lock);
    if (!l->started && !l->stopping)
        l->started = pthread_create(&l->thread, NULL, renew_loop, l) == 0;
    lease->prev = NULL;
    lease->next = l->head;
    if (l->head != NULL)
        l->head->prev = lease;
    l->head = lease;
    atomic_fetch_add(&l->held, 1);
    pthread_mutex_unlock(&l->lock);
    return lease;
}

void gw_store_lease_end(struct gw_store_leases *l, struct gw_store_lease *lease)
{
    pthread_mutex_lock(&l->lock);
    if (lease->prev != NULL)
        lease->prev->next = lease->next;
    else
        l->head = lease->next;
    if (lease->next != NULL)
        lease->next->prev = lease->prev;
    atomic_fetch_sub(&l->held, 1);
    pthread_mutex_unlock(&l->lock);
    gw_script_args_set_op(&lease->args, GW_STORE_GIVE_BACK);
    send_all(l, call_of(l, &lease->args));
    free(lease);
}

uint64_t gw_store_leases_held(const struct gw_store_leases *l)
{
    return atomic_load(&l->held);
}

void gw_store_leases_stop(struct gw_store_leases *l)
{
    struct gw_store_call *calls = NULL;
    bool started;

    pthread_mutex_lock(&l->lock);
    l->stopping = true;
    started = l->started;
    l->started = false;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
    if (started)
        pthread_join(l->thread, NULL);
    /* Requests still holding slots end with the daemons, after the store's threads: their
     * slots are given back now, while the threads can still send it, rather than left to
     * lapse. Their ends later send nothing more (the store is stopped by then). */
    pthread_mutex_lock(&l->lock);
    for (struct gw_store_lease *lease = l->head; lease != NULL; lease = lease->next) {
        struct gw_store_call *call;

        gw_script_args_set_op(&lease->args, GW_STORE_GIVE_BACK);
        if ((call = call_of(l, &lease->args)) != NULL) {
            call->next = calls;
            calls = call;
        }
    }
    pthread_mutex_unlock(&l->lock);
    send_all(l, calls);
}

void gw_store_leases_free(struct gw_store_leases *l)
{
    if (l == NULL)
        return;
    gw_store_leases_stop(l);
    while (l->head != NULL) { /* requests that never ended: their leases lapse in Redis */
        struct gw_store_lease *next = l->head->next;

        free(l->head);
        l->head = next;
    }
    pthread_cond_destroy(&l->wake);
    pthread_mutex_destroy(&l->lock);
    free(l);
}
