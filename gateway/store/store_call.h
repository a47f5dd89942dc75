/*
 * store_call: one decision asked of the Redis store, from the moment a request asks to the
 * moment its answer is delivered.
 *
 * A call holds its EVALSHA arguments whole (store_script.h), its deadline (when it was asked
 * plus limiter.redis.timeout), the health state it started under, its answer, and whom to
 * tell: gw_store_send() hands a callback, which the store thread that finishes the call calls
 * exactly once, with its answer or a failure; then the call is freed. The gateway asks so in
 * both serving modes: the limit module's step waits, and the HTTP adapter suspends the
 * connection (event) or blocks its thread until then. Every wait of a store thread is bounded
 * by the call's time left, so the callback comes by the deadline (store.h).
 *
 * The thread counts the outcome in the store's health before it delivers it, so that a client
 * that was answered and asks /metrics sees it.
 */
#ifndef SLUICE_GATEWAY_STORE_CALL_H
#define SLUICE_GATEWAY_STORE_CALL_H

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
    struct limiter_decision *out; /* where the answer goes; NULL: nowhere */
    gw_store_done_fn *done;       /* whom to tell; NULL: no one (renewals, giving back) */
    void *done_arg;
};

/* A call due by `deadline_ns`, started under health `state`, its arguments to be made by the
 * caller (gw_script_args_make()). NULL when memory is short. Freed by
 * gw_store_call_deliver(), or with gw_store_call_free() if never sent. */
struct gw_store_call *gw_store_call_new(int64_t deadline_ns, uint64_t state);
void gw_store_call_free(struct gw_store_call *call);

/* The outcome to the request (`out` filled first when GW_STORE_OK), and the call freed. */
void gw_store_call_deliver(struct gw_store_call *call, enum gw_store_result result);

#endif
