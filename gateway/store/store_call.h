/*
 * store_call: one decision asked of the Redis store, from the moment a request asks to the
 * moment its answer is delivered or given up.
 *
 * A call holds its EVALSHA arguments whole (store_script.h), its deadline (when it was asked
 * plus limiter.redis.timeout), the health state it started under, and its answer. A store
 * thread finishes it exactly once, with its answer or a failure. How the answer reaches the
 * caller depends on how it asked:
 *   - gw_store_send() hands a callback, which the finishing thread calls; then the call is
 *     freed. The gateway asks so in both serving modes: the limit module's step waits, and
 *     the HTTP adapter suspends the connection (event) or blocks its thread until then.
 *   - gw_store_decide() waits on the call's condition variable until it is finished or
 *     its deadline has passed. Past the deadline the waiter gives up: it marks the call
 *     abandoned and leaves; the store thread that comes to finish it later sees the mark and
 *     frees it, its answer unread. The mark and the thread's claim to finish are taken under
 *     the call's lock, so exactly one of the two decides the call's outcome (and counts it in
 *     the store's health), and whichever comes second frees it.
 * Finishing is two steps, claim then deliver, so that the store's health is updated before
 * the request hears its answer: a client that was answered and asks /metrics sees it.
 */
#ifndef SLUICE_GATEWAY_STORE_CALL_H
#define SLUICE_GATEWAY_STORE_CALL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/store/store.h"
#include "gateway/store/store_script.h"

struct gw_store_call {
    struct gw_store_call *next; /* in the store's queue */
    int64_t deadline_ns;        /* limiter_now_ns() by which it is answered or given up */
    uint64_t state;             /* the store's health when it was asked (store_health.h) */
    bool resent;                /* sent again after NOSCRIPT (once at most) */
    bool retried;               /* queued again after its connection broke (once at most) */
    struct gw_script_args args;
    struct limiter_decision answer[LIMITER_MAX_PER_REQUEST];

    /* Event mode: where the answer goes, and whom to tell. */
    struct limiter_decision *out;
    gw_store_done_fn *done;
    void *done_arg;

    /* thread_per_connection: the waiter's side. */
    pthread_mutex_t lock;
    pthread_cond_t finished_cond;
    bool claimed, finished, abandoned;
    enum gw_store_result result;
};

/* A call due by `deadline_ns`, started under health `state`, its arguments to be made by the
 * caller (gw_script_args_make()). NULL when memory is short. Freed as the functions below say
 * (the one that lets it go last), or with gw_store_call_free() if never queued. */
struct gw_store_call *gw_store_call_new(int64_t deadline_ns, uint64_t state);
void gw_store_call_free(struct gw_store_call *call);

/* On a store thread, once the call's outcome is known: true when the thread is now the one to
 * deliver it (the waiter, if any, waits for it); false when the waiter had given up (the call
 * is freed then, and its outcome is no one's: the waiter counted the failure). */
bool gw_store_call_claim(struct gw_store_call *call);

/* After a claim: the outcome to the request (`answer` filled when GW_STORE_OK). The call is
 * no longer the thread's. */
void gw_store_call_deliver(struct gw_store_call *call, enum gw_store_result result);

/* thread_per_connection: waits for the call until its deadline. GW_STORE_OK with `out`
 * filled, or GW_STORE_FAILED, when it failed or the deadline passed (`*gave_up` then set:
 * the failure is the waiter's to count). The call is no longer the caller's. */
enum gw_store_result gw_store_call_wait(struct gw_store_call *call, struct limiter_decision *out,
                                        bool *gave_up);

#endif
