#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/random.h"
#include "tests/unit.h"

static int compare_ids(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

/* How many of the `n` ids are the same as another (sorts them). */
static size_t repeats_in(unsigned char (*ids)[16], size_t n)
{
    size_t repeats = 0;

    qsort(ids, n, sizeof *ids, compare_ids);
    for (size_t i = 1; i < n; i++)
        repeats += memcmp(ids[i - 1], ids[i], 16) == 0;
    return repeats;
}

/* 20,000 ids of 16 bytes, drawn across many refills of the buffer: no two alike. */
static void test_ids_differ(void)
{
    enum { COUNT = 20000 };
    unsigned char(*ids)[16] = malloc(COUNT * sizeof *ids);

    CU_ASSERT_FATAL(sodium_init() >= 0 && ids != NULL);
    for (size_t i = 0; i < COUNT; i++)
        gw_random_bytes(ids[i], sizeof ids[i]);
    CU_ASSERT_EQUAL(repeats_in(ids, COUNT), 0);
    free(ids);
}

/* Draws of odd sizes that straddle the buffer's refills, and one larger than the buffer:
 * every byte value turns up about as often as any other. 262,143 bytes give each value
 * 1,024 on average (a standard deviation of 32); a draw that handed out wiped (zero) bytes
 * or repeated a block would push counts far outside [800, 1250]. */
static void test_bytes_uniform(void)
{
    enum { TOTAL = 262143 };
    unsigned char *bytes = malloc(TOTAL);
    size_t counts[256] = {0}, low = SIZE_MAX, high = 0, at = 0, size = 1;

    CU_ASSERT_FATAL(sodium_init() >= 0 && bytes != NULL);
    gw_random_bytes(bytes, 3 * GW_RANDOM_BLOCK + 5);
    at = 3 * GW_RANDOM_BLOCK + 5;
    while (at < TOTAL) {
        size_t n = size < TOTAL - at ? size : TOTAL - at;

        gw_random_bytes(bytes + at, n);
        at += n;
        size = size % 37 + 1;
    }
    for (size_t i = 0; i < TOTAL; i++)
        counts[bytes[i]]++;
    for (size_t v = 0; v < 256; v++) {
        low = counts[v] < low ? counts[v] : low;
        high = counts[v] > high ? counts[v] : high;
    }
    CU_ASSERT_TRUE(low >= 800);
    CU_ASSERT_TRUE(high <= 1250);
    free(bytes);
}

enum { THREADS = 4, IDS_PER_THREAD = 5000 };

static void *draw_ids(void *ids)
{
    unsigned char(*out)[16] = ids;

    for (size_t i = 0; i < IDS_PER_THREAD; i++)
        gw_random_bytes(out[i], 16);
    return NULL;
}

/* Threads drawing at once: each has its own stream, so no id repeats across them all (a
 * stream shared without a lock would hand two threads the same bytes, and the TSan build of
 * this test would see the race). */
static void test_threads_draw_at_once(void)
{
    unsigned char(*ids)[16] = malloc(THREADS * IDS_PER_THREAD * sizeof *ids);
    pthread_t threads[THREADS];

    CU_ASSERT_FATAL(sodium_init() >= 0 && ids != NULL);
    for (size_t t = 0; t < THREADS; t++)
        CU_ASSERT_FATAL(pthread_create(&threads[t], NULL, draw_ids, ids + t * IDS_PER_THREAD) == 0);
    for (size_t t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    CU_ASSERT_EQUAL(repeats_in(ids, THREADS * IDS_PER_THREAD), 0);
    free(ids);
}

void register_random_tests(void)
{
    CU_pSuite s = add_suite("gateway_random");

    add_test(s, "ids drawn across many refills never repeat", test_ids_differ);
    add_test(s, "bytes are uniform across refills and draw sizes", test_bytes_uniform);
    add_test(add_suite("gateway_random_concurrency"),
             "threads drawing at once never get the same bytes", test_threads_draw_at_once);
}
