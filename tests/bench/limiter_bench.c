/*
 * The limiter benchmark (`make bench`): per algorithm,
 *   - ns per decision for one hot client, on 1 thread and on 2 threads at once;
 *   - decisions per second over 1,000,000 distinct clients, 1 thread and 2 (each its half);
 *   - bytes per client: RSS growth divided by the clients held, at 1,000,000 clients;
 *   - then, for a hot client on 1 thread, ns per decision followed by the refund of what it
 *     charged (count:'s refund of an answer that does not count, and concurrency's release
 *     of its slot when the request ends), beside the decision alone.
 * Every decision reads the production clock, as the gateway does. Quota: 1000 per second, so
 * hot clients see a mix of allowed and denied requests.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "limiter/limiter.h"

#define HOT_DECISIONS 4000000
#define CLIENTS       1000000
#define PASSES        3

static const char *const algorithms[] = {"token_bucket", "gcra", "fixed_window",
                                         "sliding_window_log", "sliding_window_counter"};

static char (*client_ids)[16];

struct run {
    struct limiter *limiter;
    unsigned first, count; /* client ids [first, first + count), or the hot client if 0 */
    long decisions;
    unsigned allowed;
};

static double seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * sysconf(_SC_PAGESIZE);
}

static void *work(void *arg)
{
    struct run *r = arg;
    struct limiter_decision d;

    if (r->count == 0) {
        for (long i = 0; i < r->decisions; i++) {
            limiter_decide(r->limiter, "hot-client", limiter_now_ns(), &d);
            r->allowed += d.allowed;
        }
        return NULL;
    }
    for (int pass = 0; pass < PASSES; pass++)
        for (unsigned i = r->first; i < r->first + r->count; i++) {
            limiter_decide(r->limiter, client_ids[i], limiter_now_ns(), &d);
            r->allowed += d.allowed;
        }
    r->decisions = (long)PASSES * r->count;
    return NULL;
}

/* Runs `n` threads over `runs` and returns the wall time. */
static double timed(struct run *runs, int n)
{
    pthread_t threads[2];
    double start = seconds();

    for (int t = 0; t < n; t++)
        pthread_create(&threads[t], NULL, work, &runs[t]);
    for (int t = 0; t < n; t++)
        pthread_join(threads[t], NULL);
    return seconds() - start;
}

static struct limiter *make(const char *algorithm)
{
    bool in_flight = limiter_algorithm_from_name(algorithm) == LIMITER_CONCURRENCY;
    struct limiter_params params = {.algorithm = algorithm,
                                    .requests = 1000,
                                    .per_ns = in_flight ? 0 : 1000000000,
                                    .max_clients = CLIENTS + CLIENTS / 16};
    char err[LIMITER_ERR_LEN];
    struct limiter *l = limiter_create(&params, err);

    if (l == NULL) {
        fprintf(stderr, "limiter_bench: %s\n", err);
        exit(1);
    }
    return l;
}

/* ns per decision of the hot client alone, and per decision followed by the refund of what it
 * charged, on 1 thread. */
static void refund_row(const char *algorithm)
{
    static const long n = HOT_DECISIONS / 2;
    struct limiter *l = make(algorithm);
    struct limiter_decision d;
    double start, alone = 0, with;

    if (limiter_algorithm_from_name(algorithm) != LIMITER_CONCURRENCY) {
        start = seconds();
        for (long i = 0; i < n; i++)
            limiter_decide(l, "hot-client", limiter_now_ns(), &d);
        alone = (seconds() - start) * 1e9 / (double)n;
    }
    limiter_free(l);
    l = make(algorithm);
    start = seconds();
    for (long i = 0; i < n; i++) {
        int64_t now = limiter_now_ns();

        if (limiter_decide(l, "hot-client", now, &d) == 0 && d.allowed)
            limiter_refund(l, "hot-client", 1, d.charged_ns, now);
    }
    with = (seconds() - start) * 1e9 / (double)n;
    limiter_free(l);
    if (alone > 0)
        printf("%-24s %11.1f %14.1f\n", algorithm, alone, with);
    else
        printf("%-24s %11s %14.1f\n", algorithm, "-", with);
}

static void refund_table(void)
{
    static const char *const all[] = {"token_bucket",           "gcra",
                                      "fixed_window",           "sliding_window_log",
                                      "sliding_window_counter", "concurrency"};

    printf("\n%-24s %11s %14s\n", "hot client, 1 thread", "decide ns", "+ refund ns");
    for (size_t a = 0; a < sizeof all / sizeof all[0]; a++)
        refund_row(all[a]);
}

int main(void)
{
    client_ids = malloc((size_t)CLIENTS * sizeof *client_ids);
    if (client_ids == NULL)
        return 1;
    for (unsigned i = 0; i < CLIENTS; i++)
        snprintf(client_ids[i], sizeof client_ids[i], "198.51.%u.%u", i >> 8, i & 255);

    printf("limiter benchmark: %ld cores, %d distinct clients, %d passes over them\n\n",
           sysconf(_SC_NPROCESSORS_ONLN), CLIENTS, PASSES);
    printf("%-24s %11s %11s %12s %12s %7s %12s\n", "algorithm", "hot 1T ns", "hot 2T ns",
           "1M 1T Mdec/s", "1M 2T Mdec/s", "2T/1T", "bytes/client");

    for (size_t a = 0; a < sizeof algorithms / sizeof algorithms[0]; a++) {
        struct limiter *l = make(algorithms[a]);
        struct run hot1 = {l, 0, 0, HOT_DECISIONS, 0};
        struct run hot2[2] = {{l, 0, 0, HOT_DECISIONS / 2, 0}, {l, 0, 0, HOT_DECISIONS / 2, 0}};
        struct run one = {NULL, 0, CLIENTS, 0, 0};
        struct run two[2] = {{NULL, 0, CLIENTS / 2, 0, 0}, {NULL, CLIENTS / 2, CLIENTS / 2, 0, 0}};
        double hot1_ns = timed(&hot1, 1) * 1e9 / HOT_DECISIONS;
        double hot2_ns = timed(hot2, 2) * 1e9 / HOT_DECISIONS;
        double one_rate, two_rate;
        long rss_before, grown;
        struct limiter_stats stats;

        limiter_free(l);

        rss_before = rss_bytes();
        one.limiter = make(algorithms[a]);
        one_rate = (double)PASSES * CLIENTS / timed(&one, 1) / 1e6;
        limiter_get_stats(one.limiter, &stats);
        grown = rss_bytes() - rss_before;
        limiter_free(one.limiter);

        two[0].limiter = two[1].limiter = make(algorithms[a]);
        two_rate = (double)PASSES * CLIENTS / timed(two, 2) / 1e6;
        limiter_free(two[0].limiter);

        printf("%-24s %11.1f %11.1f %12.2f %12.2f %7.2f %12.1f\n", algorithms[a], hot1_ns, hot2_ns,
               one_rate, two_rate, two_rate / one_rate, (double)grown / (double)stats.clients);
        fflush(stdout);
    }
    refund_table();
    free(client_ids);
    return 0;
}
