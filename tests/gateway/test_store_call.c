/* One decision asked of the Redis store (gateway/store/store_call.c): delivered to a waiter, to
 * a callback, or given up at its deadline and freed by whichever side lets it go last. The
 * concurrency suite races the waiter's giving up against the store thread's claim (run under
 * ThreadSanitizer by `make test`, and under ASan, which would see a call freed twice or
 * never). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "gateway/store/store_call.h"
#include "tests/unit.h"

static void pause_us(long us)
{
    struct timespec t = {us / 1000000, us % 1000000 * 1000};

    nanosleep(&t, NULL);
}

static struct gw_store_call *new_call(int64_t timeout_ns)
{
    struct gw_store_call *call = gw_store_call_new(limiter_now_ns() + timeout_ns, 0);

    if (call != NULL)
        call->args.n_limits = 1;
    return call;
}

/* A store thread's side: claims `arg` after a pause and delivers an answer. */
struct finisher {
    struct gw_store_call *call;
    long pause_us;
    bool claimed;
};

static void *finish_later(void *arg)
{
    struct finisher *f = arg;

    pause_us(f->pause_us);
    f->claimed = gw_store_call_claim(f->call);
    if (f->claimed) {
        f->call->answer[0] = (struct limiter_decision){.allowed = true, .limit = 7};
        gw_store_call_deliver(f->call, GW_STORE_OK);
    }
    return NULL;
}

static void test_answer_reaches_the_waiter(void)
{
    struct finisher f = {.call = new_call(1000000000), .pause_us = 5000};
    struct limiter_decision out = {0};
    pthread_t thread;
    bool gave_up = true;

    CU_ASSERT_FATAL(f.call != NULL);
    CU_ASSERT_FATAL(pthread_create(&thread, NULL, finish_later, &f) == 0);
    CU_ASSERT_EQUAL(gw_store_call_wait(f.call, &out, &gave_up), GW_STORE_OK);
    pthread_join(thread, NULL);
    CU_ASSERT_TRUE(f.claimed);
    CU_ASSERT_FALSE(gave_up);
    CU_ASSERT_TRUE(out.allowed);
    CU_ASSERT_EQUAL(out.limit, 7);
}

/* The waiter leaves at its deadline (20 ms), not when the answer comes (200 ms); the late
 * claim frees the call (ASan would see a leak or a second free). */
static void test_waiter_gives_up_at_the_deadline(void)
{
    struct finisher f = {.call = new_call(20000000), .pause_us = 200000};
    struct limiter_decision out = {0};
    pthread_t thread;
    bool gave_up = false;
    int64_t start = limiter_now_ns(), waited;

    CU_ASSERT_FATAL(f.call != NULL);
    CU_ASSERT_FATAL(pthread_create(&thread, NULL, finish_later, &f) == 0);
    CU_ASSERT_EQUAL(gw_store_call_wait(f.call, &out, &gave_up), GW_STORE_FAILED);
    waited = limiter_now_ns() - start;
    pthread_join(thread, NULL);
    CU_ASSERT_TRUE(gave_up);
    CU_ASSERT_FALSE(f.claimed);
    CU_ASSERT_FALSE(out.allowed);
    CU_ASSERT_TRUE(waited >= 19000000 && waited < 150000000);
}

static void count_done(void *arg, enum gw_store_result result)
{
    atomic_fetch_add((atomic_int *)arg, result == GW_STORE_OK ? 1 : 100);
}

/* Event mode: the callback runs once, after the answer is copied where the request wants it. */
static void test_callback_gets_the_answer(void)
{
    struct gw_store_call *call = new_call(1000000);
    struct limiter_decision out = {0};
    atomic_int done = 0;

    CU_ASSERT_FATAL(call != NULL);
    call->out = &out;
    call->done = count_done;
    call->done_arg = &done;
    pause_us(5000); /* past its deadline: no one gives up on a callback's call */
    CU_ASSERT_TRUE(gw_store_call_claim(call));
    call->answer[0] = (struct limiter_decision){.allowed = true, .limit = 3};
    gw_store_call_deliver(call, GW_STORE_OK);
    CU_ASSERT_EQUAL(atomic_load(&done), 1);
    CU_ASSERT_EQUAL(out.limit, 3);
}

/* Waiters and store threads racing at the deadline: calls due in 0-1 ms, finished 0-1 ms
 * after they are asked. Each call is decided by exactly one side: the thread that claimed it
 * (the waiter then has its answer) or the waiter that gave up (the claim then fails). */
enum { WAITERS = 4, CALLS_PER_WAITER = 400 };

struct race {
    pthread_mutex_t lock;
    pthread_cond_t queued;
    struct gw_store_call *head;
    int left; /* calls still to be queued */
    atomic_int claimed, gave_up, answered;
};

static void *wait_calls(void *arg)
{
    struct race *r = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;

    for (int i = 0; i < CALLS_PER_WAITER; i++) {
        struct gw_store_call *call = new_call(rand_r(&seed) % 1000000);
        struct limiter_decision out;
        bool gave_up = false;

        if (call == NULL)
            continue;
        pthread_mutex_lock(&r->lock);
        call->next = r->head;
        r->head = call;
        r->left--;
        pthread_cond_signal(&r->queued);
        pthread_mutex_unlock(&r->lock);
        if (gw_store_call_wait(call, &out, &gave_up) == GW_STORE_OK)
            atomic_fetch_add(&r->answered, 1);
        if (gave_up)
            atomic_fetch_add(&r->gave_up, 1);
    }
    return NULL;
}

static void *finish_calls(void *arg)
{
    struct race *r = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;

    for (;;) {
        struct gw_store_call *call;

        pthread_mutex_lock(&r->lock);
        while (r->head == NULL && r->left > 0)
            pthread_cond_wait(&r->queued, &r->lock);
        call = r->head;
        if (call != NULL)
            r->head = call->next;
        pthread_mutex_unlock(&r->lock);
        if (call == NULL)
            return NULL;
        pause_us(rand_r(&seed) % 1000);
        if (gw_store_call_claim(call)) {
            atomic_fetch_add(&r->claimed, 1);
            gw_store_call_deliver(call, GW_STORE_OK);
        }
    }
}

static void test_giving_up_races_the_claim(void)
{
    struct race r = {.left = WAITERS * CALLS_PER_WAITER};
    pthread_t waiters[WAITERS], finishers[2];

    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.queued, NULL);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_FATAL(pthread_create(&finishers[i], NULL, finish_calls, &r) == 0);
    for (int i = 0; i < WAITERS; i++)
        CU_ASSERT_FATAL(pthread_create(&waiters[i], NULL, wait_calls, &r) == 0);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(waiters[i], NULL);
    pthread_mutex_lock(&r.lock);
    pthread_cond_broadcast(&r.queued);
    pthread_mutex_unlock(&r.lock);
    for (int i = 0; i < 2; i++)
        pthread_join(finishers[i], NULL);
    CU_ASSERT_EQUAL(r.claimed + r.gave_up, WAITERS * CALLS_PER_WAITER);
    CU_ASSERT_EQUAL(r.answered, r.claimed);
    CU_ASSERT_TRUE(r.gave_up > 0); /* the race was run, not only one of its sides */
    CU_ASSERT_TRUE(r.claimed > 0);
    pthread_cond_destroy(&r.queued);
    pthread_mutex_destroy(&r.lock);
}

void register_store_call_tests(void)
{
    CU_pSuite s = add_suite("gateway_store_call");

    add_test(s, "an answer reaches its waiter", test_answer_reaches_the_waiter);
    add_test(s, "a waiter gives up at its deadline", test_waiter_gives_up_at_the_deadline);
    add_test(s, "a callback gets the answer once", test_callback_gets_the_answer);
    add_test(add_suite("gateway_store_call_concurrency"),
             "giving up races the claim: each call decided once, freed once",
             test_giving_up_races_the_claim);
}
