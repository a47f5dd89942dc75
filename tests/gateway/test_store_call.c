/* One decision asked of the Redis store (gateway/store/store_call.c), delivered to its
 * callback; a peek's answer read (gateway/store/store_script.c) and a grant never sent twice
 * (gateway/store/store.c); and the Redis host's name resolved by a deadline
 * (gateway/store/store_resolve.c). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "gateway/store/store.h"
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

/* The script's answer for one limit, allowed with 7 left, charged 5 ms after it decided (a
 * place kept) at `now_us`: a decision reads the charge and the wait, a peek, which charged
 * nothing, reads neither but the rest alike. */
static void test_peek_answer_charges_nothing(void)
{
    const enum gw_store_op ops[] = {GW_STORE_DECIDE, GW_STORE_PEEK};
    long long now_us = 1764756000000000LL, fields[6] = {1, 7, 60000, 0, now_us + 5000, now_us};
    redisReply elements[6], *element[6];
    redisReply reply = {.type = REDIS_REPLY_ARRAY, .elements = 6, .element = element};

    for (int i = 0; i < 6; i++) {
        elements[i] = (redisReply){.type = REDIS_REPLY_INTEGER, .integer = fields[i]};
        element[i] = &elements[i];
    }
    for (size_t k = 0; k < 2; k++) {
        struct gw_script_args args = {.op = ops[k], .n_limits = 1, .requests = {10}};
        struct limiter_decision out;
        bool decide = ops[k] == GW_STORE_DECIDE;

        CU_ASSERT_EQUAL_FATAL(gw_script_answer(&reply, &args, &out), 0);
        CU_ASSERT_TRUE(out.allowed);
        CU_ASSERT_EQUAL(out.limit, 10);
        CU_ASSERT_EQUAL(out.remaining, 7);
        CU_ASSERT_EQUAL(out.reset_ms, 60000);
        CU_ASSERT_EQUAL(out.charged_ns, decide ? (now_us + 5000) * 1000 : 0);
        CU_ASSERT_EQUAL(out.wait_ns, decide ? 5000000 : 0);
    }
}

/* A grant, like a give-back, is marked tried already, so that a broken connection does not
 * send it again (Redis may have run it); a peek or a reset may be sent again. Nothing is sent:
 * the store starts its threads with the first call queued. */
static void test_grant_is_never_sent_twice(void)
{
    const enum gw_store_op ops[] = {GW_STORE_DECIDE, GW_STORE_GIVE_BACK, GW_STORE_PEEK,
                                    GW_STORE_RESET, GW_STORE_GRANT};
    const bool sent_once[] = {false, true, false, false, true};
    struct limiter_params gcra = {.algorithm = "gcra",
                                  .algorithm_id = LIMITER_GCRA,
                                  .requests = 10,
                                  .per_ns = 60000000000,
                                  .burst = 10};
    const struct limiter_params *limits[] = {&gcra};
    const char *names[] = {"minute"}, *keys[] = {"k1"};
    const uint64_t costs[] = {3};
    const int64_t charged[] = {0};
    struct config config = {0};
    struct gw_store *store;

    config.redis.address = (struct config_endpoint){.host = "127.0.0.1", .port = 1};
    config.redis.prefix = "test:";
    config.redis.timeout_ns = 50000000;
    config.redis.lease_ns = 10000000000;
    store = gw_store_new(&config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        struct gw_store_ask ask = {.op = ops[k],
                                   .route = "api",
                                   .names = names,
                                   .limits = limits,
                                   .costs = costs,
                                   .charged_ns = ops[k] == GW_STORE_GIVE_BACK ? charged : NULL,
                                   .client_keys = keys,
                                   .n = 1};
        struct gw_store_call *call = gw_store_prepare(store, &ask);

        CU_ASSERT_PTR_NOT_NULL_FATAL(call);
        CU_ASSERT_EQUAL(call->retried, sent_once[k]);
        CU_ASSERT_EQUAL(call->args.op, ops[k]);
        gw_store_call_free(call);
    }
    gw_store_free(store);
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
    add_test(s, "a peek's answer charges nothing", test_peek_answer_charges_nothing);
    add_test(s, "a grant is never sent twice", test_grant_is_never_sent_twice);
    add_test(s, "a numeric Redis address needs no lookup", test_numeric_addresses);
    add_test(s, "a Redis name: looked up, or refused, by the deadline", test_names);
}
