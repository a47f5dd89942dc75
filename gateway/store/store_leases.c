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

    if (l == NULL)
        return NULL;
    l->workers = workers;
    l->health = health;
    l->lease_ns = lease_ns;
    l->timeout_ns = timeout_ns;
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);
    return l;
}

/* Queues `args` (copied) with the usual deadline and no one to tell: what it did shows in
 * Redis alone. A store that is degraded is asked only as its probe (store_health.h). */
static void tell(struct gw_store_leases *l, const struct gw_script_args *args)
{
    uint64_t state;
    struct gw_store_call *call;

    if (!gw_store_health_may_try(l->health, &state))
        return;
    call = gw_store_call_new(limiter_now_ns() + l->timeout_ns, state);
    if (call == NULL)
        return;
    gw_script_args_copy(&call->args, args);
    if (gw_store_workers_queue(l->workers, call) != 0)
        gw_store_call_free(call);
}

/* Every third of a lease, each lease held is renewed. Calls are queued under the lock, which
 * only queues them: the store's threads send them. */
static void *renew_loop(void *arg)
{
    struct gw_store_leases *l = arg;
    struct timespec until;

    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (l->lease_ns / 3) / 1000000000;
        until.tv_nsec += (l->lease_ns / 3) % 1000000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        while (!l->stopping && pthread_cond_timedwait(&l->wake, &l->lock, &until) == 0)
            ;
        for (struct gw_store_lease *lease = l->head; !l->stopping && lease; lease = lease->next)
            tell(l, &lease->args);
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
    tell(l, &lease->args);
    free(lease);
}

uint64_t gw_store_leases_held(const struct gw_store_leases *l)
{
    return atomic_load(&l->held);
}

void gw_store_leases_stop(struct gw_store_leases *l)
{
    bool started;

    pthread_mutex_lock(&l->lock);
    l->stopping = true;
    started = l->started;
    l->started = false;
    pthread_cond_broadcast(&l->wake);
    pthread_mutex_unlock(&l->lock);
    if (started)
        pthread_join(l->thread, NULL);
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
