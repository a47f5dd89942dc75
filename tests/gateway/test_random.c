#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "../unit.h"
#include "random.h"

static int compare_ids(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

/* 20,000 ids of 16 bytes, drawn across many refills of the buffer: no two alike. */
static void test_ids_differ(void)
{
    enum { COUNT = 20000 };
    unsigned char(*ids)[16] = malloc(COUNT * sizeof *ids);
    size_t repeats = 0;

    CU_ASSERT_FATAL(sodium_init() >= 0 && ids != NULL);
    for (size_t i = 0; i < COUNT; i++)
        gw_random_bytes(ids[i], sizeof ids[i]);
    qsort(ids, COUNT, sizeof *ids, compare_ids);
    for (size_t i = 1; i < COUNT; i++)
        repeats += memcmp(ids[i - 1], ids[i], 16) == 0;
    CU_ASSERT_EQUAL(repeats, 0);
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

static void *draw_in_thread(void *out)
{
    gw_random_bytes(out, 32);
    return NULL;
}

/* Each thread keys its own stream: two threads' first bytes differ, and differ from this
 * thread's. */
static void test_threads_have_own_streams(void)
{
    unsigned char first[32], second[32], here[32];
    pthread_t a, b;

    CU_ASSERT_FATAL(sodium_init() >= 0);
    CU_ASSERT_FATAL(pthread_create(&a, NULL, draw_in_thread, first) == 0);
    pthread_join(a, NULL);
    CU_ASSERT_FATAL(pthread_create(&b, NULL, draw_in_thread, second) == 0);
    pthread_join(b, NULL);
    gw_random_bytes(here, sizeof here);
    CU_ASSERT_NOT_EQUAL(memcmp(first, second, 32), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(first, here, 32), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(second, here, 32), 0);
}

void register_random_tests(void)
{
    CU_pSuite s = add_suite("gateway_random");

    add_test(s, "ids drawn across many refills never repeat", test_ids_differ);
    add_test(s, "bytes are uniform across refills and draw sizes", test_bytes_uniform);
    add_test(s, "each thread has its own stream", test_threads_have_own_streams);
}
