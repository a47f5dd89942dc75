/* One decision asked of the Redis store; design in store_call.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/store/store_call.h"

struct gw_store_call *gw_store_call_new(int64_t deadline_ns, uint64_t state)
{
    struct gw_store_call *call = malloc(sizeof *call);
    pthread_condattr_t attr;

    if (call == NULL)
        return NULL;
    call->next = NULL;
    call->deadline_ns = deadline_ns;
    call->state = state;
    call->resent = false;
    call->retried = false;
    call->out = NULL;
    call->done = NULL;
    call->done_arg = NULL;
    call->claimed = false;
    call->finished = false;
    call->abandoned = false;
    call->result = GW_STORE_FAILED;
    pthread_mutex_init(&call->lock, NULL);
    /* The wait is measured on the monotonic clock, as limiter_now_ns() is. */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&call->finished_cond, &attr);
    pthread_condattr_destroy(&attr);
    return call;
}

void gw_store_call_free(struct gw_store_call *call)
{
    if (call == NULL)
        return;
    pthread_cond_destroy(&call->finished_cond);
    pthread_mutex_destroy(&call->lock);
    free(call);
}

bool gw_store_call_claim(struct gw_store_call *call)
{
    bool abandoned;

    if (call->done != NULL)
        return true; /* event mode: no one gives up on it */
    pthread_mutex_lock(&call->lock);
    abandoned = call->abandoned;
    call->claimed = !abandoned;
    pthread_mutex_unlock(&call->lock);
    if (abandoned)
        gw_store_call_free(call);
    return !abandoned;
}

void gw_store_call_deliver(struct gw_store_call *call, enum gw_store_result result)
{
    if (call->done != NULL) {
        if (result == GW_STORE_OK)
            memcpy(call->out, call->answer, call->args.n_limits * sizeof *call->out);
        call->done(call->done_arg, result);
        gw_store_call_free(call);
        return;
    }
    pthread_mutex_lock(&call->lock);
    call->finished = true;
    call->result = result;
    pthread_cond_signal(&call->finished_cond);
    pthread_mutex_unlock(&call->lock);
}

/* The monotonic time at which `deadline_ns` (on limiter_now_ns()'s clock) falls. */
static struct timespec monotonic_at(int64_t deadline_ns)
{
    int64_t left = deadline_ns - limiter_now_ns();
    struct timespec at;
    int64_t ns;

    clock_gettime(CLOCK_MONOTONIC, &at);
    ns = (int64_t)at.tv_nsec + (left > 0 ? left : 0);
    at.tv_sec += (time_t)(ns / 1000000000);
    at.tv_nsec = (long)(ns % 1000000000);
    return at;
}

enum gw_store_result gw_store_call_wait(struct gw_store_call *call, struct limiter_decision *out,
                                        bool *gave_up)
{
    struct timespec at = monotonic_at(call->deadline_ns);
    enum gw_store_result result = GW_STORE_FAILED;
    bool finished;

    pthread_mutex_lock(&call->lock);
    while (!call->finished) {
        /* Claimed: the outcome is known and on its way; it is the thread's to count. */
        if (call->claimed) {
            pthread_cond_wait(&call->finished_cond, &call->lock);
        } else if (pthread_cond_timedwait(&call->finished_cond, &call->lock, &at) == ETIMEDOUT &&
                   !call->claimed && !call->finished) {
            call->abandoned = true; /* the store thread that comes to it frees it */
            break;
        }
    }
    finished = call->finished;
    pthread_mutex_unlock(&call->lock);
    *gave_up = !finished;
    if (!finished)
        return GW_STORE_FAILED;
    result = call->result;
    if (result == GW_STORE_OK)
        memcpy(out, call->answer, call->args.n_limits * sizeof *out);
    gw_store_call_free(call);
    return result;
}
