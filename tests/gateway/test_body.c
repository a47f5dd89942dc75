/* gw_body (gateway/upstream/body.c): the window a request body passes through upstream. */
#include <string.h>

#include "gateway/upstream/body.h"
#include "tests/unit.h"

/* Bytes `from`.. of a recognisable pattern: byte i is 'a' + i % 26. */
static void pattern(char *out, size_t len, size_t from)
{
    for (size_t i = 0; i < len; i++)
        out[i] = (char)('a' + (from + i) % 26);
}

/* Takes everything gw_body_take() gives now, checking it continues the pattern at *at. */
static size_t take_all(struct gw_body *b, size_t *at)
{
    char buf[8192], want[8192];
    size_t n, total = 0;

    while ((n = gw_body_take(b, buf, sizeof buf)) > 0) {
        pattern(want, n, *at);
        CU_ASSERT_EQUAL(memcmp(buf, want, n), 0);
        *at += n;
        total += n;
    }
    return total;
}

static void test_body_flows_through_one_window(void)
{
    struct gw_body b = {.length = -1};
    char chunk[10000];
    size_t put = 0, taken = 0;

    /* 1 MiB through, in pieces that do not divide the window: never more than it held. */
    while (put < 1024 * 1024) {
        size_t n;

        pattern(chunk, sizeof chunk, put);
        n = gw_body_put(&b, chunk, sizeof chunk);
        put += n;
        if (n < sizeof chunk) {
            CU_ASSERT_EQUAL(gw_body_room(&b), 0);
            take_all(&b, &taken);
            CU_ASSERT(gw_body_room(&b) > 0);
            CU_ASSERT_EQUAL(gw_body_put(&b, chunk + n, sizeof chunk - n), sizeof chunk - n);
            put += sizeof chunk - n;
        }
        CU_ASSERT(put - taken <= GW_BODY_WINDOW);
    }
    CU_ASSERT_EQUAL(b.received, put);
    CU_ASSERT_FALSE(gw_body_done(&b)); /* not ended: more may come */
    b.ended = true;
    take_all(&b, &taken);
    CU_ASSERT_EQUAL(taken, put);
    CU_ASSERT(gw_body_done(&b));
    CU_ASSERT_FALSE(gw_body_replayable(&b));
    CU_ASSERT_FALSE(gw_body_rewind(&b));
    gw_body_free(&b);
}

static void test_body_replays_while_it_fits(void)
{
    struct gw_body b = {.length = -1};
    char chunk[3000];
    size_t at = 0;

    pattern(chunk, sizeof chunk, 0);
    CU_ASSERT_EQUAL(gw_body_put(&b, chunk, sizeof chunk), sizeof chunk);
    CU_ASSERT_EQUAL(take_all(&b, &at), sizeof chunk);
    /* Sent, and still held: a retry sends it again from the start. */
    CU_ASSERT(gw_body_rewind(&b));
    at = 0;
    CU_ASSERT_EQUAL(take_all(&b, &at), sizeof chunk);

    /* Filled to the window with everything sent: still whole, so still replayable. */
    while (b.received < GW_BODY_WINDOW) {
        size_t n =
            GW_BODY_WINDOW - b.received < sizeof chunk ? GW_BODY_WINDOW - b.received : sizeof chunk;

        pattern(chunk, n, b.received);
        CU_ASSERT_EQUAL(gw_body_put(&b, chunk, n), n);
        take_all(&b, &at);
    }
    CU_ASSERT(gw_body_replayable(&b));
    /* One byte more lets the sent ones go: no replay from then on. */
    pattern(chunk, 1, b.received);
    CU_ASSERT_EQUAL(gw_body_put(&b, chunk, 1), 1);
    CU_ASSERT_FALSE(gw_body_replayable(&b));
    CU_ASSERT_FALSE(gw_body_rewind(&b));
    CU_ASSERT_EQUAL(take_all(&b, &at), 1);
    gw_body_free(&b);
}

static void test_body_holds_back_the_last_byte(void)
{
    struct gw_body b = {.length = 100};
    char chunk[100], buf[200];
    size_t at = 0;

    pattern(chunk, sizeof chunk, 0);
    CU_ASSERT_EQUAL(gw_body_put(&b, chunk, 60), 60);
    CU_ASSERT_EQUAL(take_all(&b, &at), 60);
    CU_ASSERT_EQUAL(gw_body_put(&b, chunk + 60, 40), 40);
    /* All 100 bytes are in, but the body is not ended: the 100th waits. */
    CU_ASSERT_EQUAL(take_all(&b, &at), 39);
    CU_ASSERT_EQUAL(gw_body_take(&b, buf, sizeof buf), 0);
    CU_ASSERT_FALSE(gw_body_done(&b));
    b.ended = true;
    CU_ASSERT_EQUAL(take_all(&b, &at), 1);
    CU_ASSERT(gw_body_done(&b));
    /* A known length smaller than the window takes no more room than it needs. */
    CU_ASSERT_EQUAL(gw_body_room(&b), 100);
    gw_body_free(&b);
}

static void test_body_empty(void)
{
    struct gw_body b = {.length = 0, .ended = true};
    char buf[16];

    CU_ASSERT_EQUAL(gw_body_take(&b, buf, sizeof buf), 0);
    CU_ASSERT(gw_body_done(&b));
    CU_ASSERT(gw_body_rewind(&b));
    gw_body_free(&b);
}

void register_body_tests(void)
{
    CU_pSuite s = add_suite("gateway_body");

    add_test(s, "1 MiB passes through one window", test_body_flows_through_one_window);
    add_test(s, "replayable until bytes are let go", test_body_replays_while_it_fits);
    add_test(s, "the last byte of a known length waits for the end",
             test_body_holds_back_the_last_byte);
    add_test(s, "an empty body", test_body_empty);
}
