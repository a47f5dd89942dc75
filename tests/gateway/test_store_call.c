/* One decision asked of the Redis store (gateway/store/store_call.c), delivered to its
 * callback; and the Redis host's name resolved by a deadline (gateway/store/store_resolve.c). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/store/store_call.h"
#include "gateway/store/store_resolve.h"
#include "tests/unit.h"

static void count_done(void *arg, enum gw_store_result result)
{
    atomic_fetch_add((atomic_int *)arg, result == GW_STORE_OK ? 1 : 100);
}

static struct gw_store_call *new_call(struct limiter_decision *out, atomic_int *done)
{
    struct gw_store_call *call = gw_store_call_new(limiter_now_ns() + 1000000, 0);

    if (call != NULL) {
        call->args.n_limits = 2;
        call->out = out;
        call->done = count_done;
        call->done_arg = done;
    }
    return call;
}

/* The callback runs once, after the answer (all of its limits, no more) is copied where the
 * request wants it; a failure copies nothing. ASan sees the call freed once. */
static void test_callback_gets_the_answer(void)
{
    struct limiter_decision out[3] = {{0}};
    atomic_int done = 0;
    struct gw_store_call *call = new_call(out, &done);

    CU_ASSERT_FATAL(call != NULL);
    call->answer[0] = (struct limiter_decision){.allowed = true, .limit = 3};
    call->answer[1] = (struct limiter_decision){.allowed = false, .limit = 9};
    call->answer[2] = (struct limiter_decision){.allowed = true, .limit = 5};
    gw_store_call_deliver(call, GW_STORE_OK);
    CU_ASSERT_EQUAL(atomic_load(&done), 1);
    CU_ASSERT_TRUE(out[0].allowed);
    CU_ASSERT_EQUAL(out[1].limit, 9);
    CU_ASSERT_EQUAL(out[2].limit, 0);

    memset(out, 0, sizeof out);
    call = new_call(out, &done);
    CU_ASSERT_FATAL(call != NULL);
    call->answer[0] = (struct limiter_decision){.allowed = true, .limit = 3};
    gw_store_call_deliver(call, GW_STORE_FAILED);
    CU_ASSERT_EQUAL(atomic_load(&done), 101);
    CU_ASSERT_FALSE(out[0].allowed);
}

/* A numeric address is its own answer: no lookup is made. */
static void test_numeric_addresses(void)
{
    struct gw_store_lookup *lookup = NULL;
    char ip[INET6_ADDRSTRLEN], why[160];
    bool timed_out = true;

    CU_ASSERT_EQUAL(gw_store_resolve(&lookup, "127.0.0.1", limiter_now_ns() + 1000000000, ip,
                                     &timed_out, why, sizeof why),
                    0);
    CU_ASSERT_STRING_EQUAL(ip, "127.0.0.1");
    CU_ASSERT_FALSE(timed_out);
    CU_ASSERT_EQUAL(gw_store_resolve(&lookup, "::1", limiter_now_ns() + 1000000000, ip, &timed_out,
                                     why, sizeof why),
                    0);
    CU_ASSERT_STRING_EQUAL(ip, "::1");
    CU_ASSERT_PTR_NULL(lookup);
}

/* A name is looked up (localhost, from /etc/hosts: its IPv4 address first), and a name no one
 * knows fails, naming itself; within the deadline either way. */
static void test_names(void)
{
    struct gw_store_lookup *lookup = NULL, *unknown = NULL;
    char ip[INET6_ADDRSTRLEN], why[160] = "";
    bool timed_out = true;
    int64_t start = limiter_now_ns();

    CU_ASSERT_EQUAL(
        gw_store_resolve(&lookup, "localhost", start + 2000000000, ip, &timed_out, why, sizeof why),
        0);
    CU_ASSERT_STRING_EQUAL(ip, "127.0.0.1");
    CU_ASSERT_PTR_NOT_NULL(lookup);
    /* Done with it, the lookup is begun again for the next connection. */
    CU_ASSERT_EQUAL(gw_store_resolve(&lookup, "localhost", limiter_now_ns() + 2000000000, ip,
                                     &timed_out, why, sizeof why),
                    0);
    CU_ASSERT_STRING_EQUAL(ip, "127.0.0.1");
    gw_store_lookup_end(lookup);

    start = limiter_now_ns();
    CU_ASSERT_EQUAL(gw_store_resolve(&unknown, "sluice-test.invalid", start + 300000000, ip,
                                     &timed_out, why, sizeof why),
                    -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "resolve sluice-test.invalid: "));
    /* Refused at once, or by the deadline: never after the resolver's own timeouts. */
    CU_ASSERT(limiter_now_ns() - start < 1500000000);
    CU_ASSERT(timed_out == (limiter_now_ns() - start >= 300000000));
    gw_store_lookup_end(unknown);
    gw_store_lookup_end(NULL);
}

void register_store_call_tests(void)
{
    CU_pSuite s = add_suite("gateway_store_call");

    add_test(s, "a callback gets the answer once", test_callback_gets_the_answer);
    add_test(s, "a numeric Redis address needs no lookup", test_numeric_addresses);
    add_test(s, "a Redis name: looked up, or refused, by the deadline", test_names);
}
