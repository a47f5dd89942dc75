/* The refusal cache (gateway/modules/limit/refusals.h, limiter.redis.refusal_cache) against a
 * real Redis: a client Redis refused is answered by the replica itself while that refusal must
 * hold, so a flood costs Redis one call per refusal, not one per request, whatever the
 * algorithm; yet the client gets through no later than Redis would let it (checked against
 * the clock, and against a look at Redis after each refusal), on either of two replicas; a
 * cheaper request than the one refused asks Redis; sets that give charges back are never
 * kept; an operator's reset or grant is seen at once here and within refusal_cache on the
 * other replica; a reload never reuses a refusal of the old limits; and what the client gets
 * from the cache is what Redis's refusal gave it. Both serving modes run it (harness.h).
 *
 * Redis's side is read from INFO commandstats: every decision is one EVALSHA (store.h), and
 * CONFIG RESETSTAT starts the count afresh. Keys differ per test and Redis is emptied before
 * each, so no test sees another's counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"
#include "tests/integration/quota_calls.h"

/* A route NAME at /NAME/, keyed by X-API-Key, with `limit` (a flow mapping or block list). */
#define LIMITED(name, limit)                                                                       \
    "  - name: " name "\n    match: {path_prefix: /" name "/}\n"                                   \
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"                     \
    "    limit: " limit "\n"

/* Routes ALGO (5 an hour) and quick-ALGO (5 in 500 ms) of an algorithm. */
#define BY_ALGORITHM(algo, requests)                                                               \
    LIMITED(algo, "{algorithm: " algo ", requests: " requests ", per: 1h}")                        \
    LIMITED("quick-" algo, "{algorithm: " algo ", requests: 5, per: 500ms}")

/* %1$u the upstream, %2$u Redis, %3$s refusal_cache, %4$s the requests of route fixed_window. */
// clang-format off
static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", admin_token: \"" TOKEN "\"}\n"
    "limiter:\n  store: redis\n"
    "  redis: {address: \"127.0.0.1:%2$u\", timeout: 1s, refusal_cache: %3$s}\n"
    "routes:\n"
    BY_ALGORITHM("fixed_window", "%4$s")
    BY_ALGORITHM("token_bucket", "5")
    BY_ALGORITHM("gcra", "5")
    BY_ALGORITHM("sliding_window_log", "5")
    BY_ALGORITHM("sliding_window_counter", "5")
    /* 10 a second, 2 at once: one every 100 ms once the burst is spent; a refusal's retry
     * (until the next interval) is then 100 ms short of its reset (until the bucket is full),
     * so a cache that held a refusal to its reset would show. */
    LIMITED("pace", "{algorithm: gcra, requests: 10, per: 1s, burst: 2}")
    LIMITED("priced", "{algorithm: fixed_window, requests: 5, per: 1h, cost: {POST: 2}}")
    LIMITED("counted", "{algorithm: fixed_window, requests: 5, per: 1h, count: {statuses: [200]}}")
    LIMITED("held", "\n"
            "      - {name: hourly, algorithm: fixed_window, requests: 5, per: 1h}\n"
            "      - {name: at_once, algorithm: concurrency, requests: 100}")
    LIMITED("queued", "{algorithm: gcra, requests: 5, per: 1h, delay: {max: 1s}}");
// clang-format on

static struct proc gws[2];

/* `n` replicas (1 or 2) on Redis emptied first, refusals kept at most `cache`; when one does
 * not start, none is left running. */
static int start_replicas(int n, const char *cache)
{
    if (redis_cli_wait(&suite_redis, "FLUSHALL") != 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (start_sluice(&gws[i], config, upstream.port, suite_redis.port, cache, "5") != 0) {
            while (i-- > 0)
                stop_sluice(&gws[i], 5000);
            return -1;
        }
    return 0;
}

static void stop_replicas(int n)
{
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL(stop_sluice(&gws[i], 5000), 0);
}

/* The EVALSHA calls Redis ran since the last CONFIG RESETSTAT (0 when none); -1 when it could
 * not be asked. */
static long evalsha_calls(void)
{
    static const char field[] = "cmdstat_evalsha:calls=";
    char command[96], line[256];
    long n = -1;
    FILE *out;

    snprintf(command, sizeof command, "redis-cli -p %u INFO commandstats", suite_redis.port);
    out = popen(command, "r");
    if (out == NULL)
        return -1;
    n = 0;
    while (fgets(line, sizeof line, out) != NULL)
        if (strncmp(line, field, strlen(field)) == 0)
            n = strtol(line + strlen(field), NULL, 10);
    if (pclose(out) != 0)
        n = -1;
    return n;
}

static void reset_stats(void)
{
    CU_ASSERT_EQUAL(redis_cli_wait(&suite_redis, "CONFIG RESETSTAT"), 0);
}

static long saved(const struct proc *gw)
{
    return (long)metric(gw, "sluice_store_calls_saved_total");
}

/* `n` GETs of /`route`/x with API key `key` on `port`, one after another; how many got 200.
 * Any answer but 200 and 429 is counted in `*other`. */
static int flood(unsigned port, const char *route, const char *key, int n, int *other)
{
    char target[64];
    int ok = 0;

    snprintf(target, sizeof target, "/%s/x", route);
    for (int i = 0; i < n; i++) {
        long status = get_status(port, target, key);

        ok += status == 200;
        *other += status != 200 && status != 429;
    }
    return ok;
}

/* 5 an hour, then 2000 more from the one client, for each algorithm: Redis is asked 5 times
 * for the passes and once for the first refusal; the 1999 after it are answered here
 * (refusal_cache: 1m). */
static void test_flood(void)
{
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++) {
        unsigned long mark = 0;
        long calls;
        int ok, other = 0;

        CU_ASSERT_FATAL(start_replicas(1, "1m") == 0);
        reset_stats();
        upstream_reached(&mark);
        ok = flood(gws[0].port, algorithms[i], "flood", 2005, &other);
        calls = evalsha_calls();
        check_case(ok == 5 && other == 0 && upstream_reached(&mark) == 5, algorithms[i],
                   "%d of 2005 passed (expected 5), %d neither 200 nor 429", ok, other);
        check_case(calls == 6, algorithms[i],
                   "Redis ran %ld EVALSHA for 2005 requests (expected 6)", calls);
        check_case(saved(&gws[0]) == 1999, algorithms[i],
                   "sluice_store_calls_saved_total %ld (expected 1999)", saved(&gws[0]));
        stop_replicas(1);
    }
}

/* The instants (s) a pass was sent at and answered at. */
struct pass {
    double sent, answered;
};

/* GETs of /pace/x every 5 ms for `seconds`: the passes into `at` (up to `cap`); how many. */
static int poll_pace(const char *key, double seconds, struct pass *at, int cap)
{
    double start = seconds_now();
    int n = 0;

    while (seconds_now() - start < seconds && n < cap) {
        double sent = seconds_now();

        if (get_status(gws[0].port, "/pace/x", key) == 200)
            at[n++] = (struct pass){sent, seconds_now()};
        sleep_ms(5);
    }
    return n;
}

/* One every 100 ms once the burst of 2 is spent, polled every 5 ms for 1.5 s. Each pass k
 * after the burst comes no later than Redis lets it, plus the poll's own step and a margin
 * (30 ms): Redis lets it pass at the latest 100 ms after pass k-1 was decided (the theoretical
 * arrival time is at most 100 ms past it), so the refusals kept in between never hold the
 * client longer than Redis does. Nor does any come sooner than the limit lets it, (k - 1)
 * intervals after the first; 2 + 15 at most pass, and 12 at least. */
static void test_lapses_with_redis(void)
{
    struct pass at[64];
    int n, late = 0, early = 0;
    double worst = 0;

    CU_ASSERT_FATAL(start_replicas(1, "1s") == 0);
    n = poll_pace("pace", 1.5, at, 64);
    for (int k = 2; k < n; k++) {
        double gap = at[k].sent - at[k - 1].answered;

        worst = gap > worst ? gap : worst;
        late += gap > 0.130;
        early += at[k].answered - at[0].sent < (k - 1) * 0.100 - 0.001;
    }
    check_case(n >= 12 && n <= 17, "passes", "%d passed in 1.5 s (expected 12 to 17)", n);
    check_case(late == 0, "late",
               "%d of %d passes came more than 30 ms after Redis allowed them (worst %.1f ms "
               "after the one before)",
               late, n - 2, worst * 1000);
    check_case(early == 0, "early", "%d passes came sooner than the limit lets them", early);
    check_case(saved(&gws[0]) >= 50, "cache used",
               "sluice_store_calls_saved_total %ld: the cache was hardly used", saved(&gws[0]));
    stop_replicas(1);
}

/* Two replicas, refusals kept a minute. The client spends its 5 on A and floods it, goes on
 * to B, then back to A: 5 passed in all; A asked Redis once for its refusal and B once for
 * its own, every other refusal was answered from the replica's own. Then one that spent 3 on
 * A and 2 on B, refused first on B: A knows nothing of B's refusal and asks Redis once. */
static void test_two_replicas(void)
{
    int ok, other = 0;
    long calls, saved_a, saved_b;

    CU_ASSERT_FATAL(start_replicas(2, "1m") == 0);
    reset_stats();
    ok = flood(gws[0].port, "fixed_window", "two", 50, &other);
    ok += flood(gws[1].port, "fixed_window", "two", 50, &other);
    ok += flood(gws[0].port, "fixed_window", "two", 50, &other);
    ok += race_requests((unsigned[]){gws[0].port, gws[1].port}, 2, 100, "/fixed_window/x", "two",
                        &other);
    calls = evalsha_calls();
    saved_a = saved(&gws[0]), saved_b = saved(&gws[1]);
    check_case(ok == 5 && other == 0, "A, B, A", "%d passed (expected 5), %d neither", ok, other);
    check_case(calls == 7, "A, B, A", "Redis ran %ld EVALSHA (expected 5 passes and 2 refusals)",
               calls);
    check_case(saved_a == 44 + 50 + 50 && saved_b == 49 + 50, "A, B, A",
               "A saved %ld calls (expected 144), B %ld (expected 99)", saved_a, saved_b);

    reset_stats();
    ok = flood(gws[0].port, "fixed_window", "split", 3, &other);
    ok += flood(gws[1].port, "fixed_window", "split", 20, &other);
    ok += flood(gws[0].port, "fixed_window", "split", 20, &other);
    calls = evalsha_calls();
    check_case(ok == 5 && other == 0, "3 on A, 2 on B", "%d passed (expected 5)", ok);
    check_case(calls == 7, "3 on A, 2 on B",
               "Redis ran %ld EVALSHA (expected 5 passes and a refusal on each replica)", calls);
    check_case(saved(&gws[0]) - saved_a == 19 && saved(&gws[1]) - saved_b == 17, "3 on A, 2 on B",
               "A saved %ld more (expected 19), B %ld (expected 17)", saved(&gws[0]) - saved_a,
               saved(&gws[1]) - saved_b);
    stop_replicas(2);
}

/* Whether Redis would let a GET of `key` through route `route` now, by a look (GET /quota,
 * which asks Redis and charges nothing); -1 when the look failed. */
static int redis_would_allow(const char *route, const char *key)
{
    char target[128];
    struct reply r;
    int allowed = -1;

    snprintf(target, sizeof target, "/quota?route=%s&key=%s", route, key);
    if (as_operator(&gws[0], "GET", target, &r) == 200)
        allowed = json_is(r.body, route, "allowed", "true")    ? 1
                  : json_is(r.body, route, "allowed", "false") ? 0
                                                               : -1;
    reply_free(&r);
    return allowed;
}

/* For each algorithm, 5 in 500 ms, for 1.2 s: after each refusal, a look at Redis; whenever
 * Redis would let the client through, its next request must pass, answered from no refusal
 * kept here (nothing is charged in between, and time only makes a look more likely to
 * allow). The cache never holds a client that Redis would admit, to the microsecond Redis
 * reckons in, whatever the algorithm. Over 1.2 s the quota comes back twice at least (10
 * pass), refusals kept here lapsing each time. */
static void test_never_longer_than_redis(void)
{
    CU_ASSERT_FATAL(start_replicas(1, "1s") == 0);
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++) {
        char route[64], target[80];
        int passed = 0, lapsed = 0, held = 0, unknown = 0;
        long saved_before = saved(&gws[0]);
        double start = seconds_now();

        snprintf(route, sizeof route, "quick-%s", algorithms[i]);
        snprintf(target, sizeof target, "/%s/x", route);
        while (seconds_now() - start < 1.2) {
            int allowed;

            if (get_status(gws[0].port, target, "look") == 200) {
                passed++;
                continue;
            }
            allowed = redis_would_allow(route, "look");
            unknown += allowed < 0;
            if (allowed == 1) { /* the refusal was one of Redis's last: it has lapsed now */
                bool passes = get_status(gws[0].port, target, "look") == 200;

                lapsed++;
                held += !passes;
                passed += passes;
            }
        }
        check_case(held == 0 && unknown == 0, algorithms[i],
                   "%d of %d times Redis would let the client through, the next request was "
                   "refused; %d looks failed",
                   held, lapsed, unknown);
        check_case(passed >= 10 && saved(&gws[0]) > saved_before, algorithms[i],
                   "%d passed, %ld answered here: the test saw too little", passed,
                   saved(&gws[0]) - saved_before);
    }
    stop_replicas(1);
}

/* A cheaper request might pass where a dearer one was refused. 4 GETs spend 4 of 5; a POST
 * (2 units) is refused by Redis, the next POST here; a GET (1 unit) asks Redis and passes; the
 * next GET is refused by Redis, and a POST after it here (as dear as the refused GET). */
static void test_cost_rule(void)
{
    static const struct {
        const char *method;
        long status;
        long saved; /* how many answered here so far */
    } steps[] = {{"POST", 429, 0}, {"POST", 429, 1}, {"GET", 200, 1},
                 {"GET", 429, 1},  {"POST", 429, 2}, {"GET", 429, 3}};
    const char *headers[] = {"X-API-Key: priced", NULL};
    int spent, other = 0;

    CU_ASSERT_FATAL(start_replicas(1, "1m") == 0);
    spent = flood(gws[0].port, "priced", "priced", 4, &other);
    check_case(spent == 4, "GET", "%d of 4 passed", spent);
    reset_stats();
    for (size_t i = 0; spent == 4 && i < sizeof steps / sizeof steps[0]; i++) {
        struct reply r;

        http(gws[0].port, steps[i].method, "/priced/x", headers, NULL, &r);
        check_case(r.status == steps[i].status && saved(&gws[0]) == steps[i].saved, steps[i].method,
                   "step %zu: %ld (expected %ld), %ld answered here (expected %ld)", i + 1,
                   r.status, steps[i].status, saved(&gws[0]), steps[i].saved);
        reply_free(&r);
    }
    check_case(evalsha_calls() == 3, "Redis", "ran %ld EVALSHA (expected 3)", evalsha_calls());
    stop_replicas(1);
}

/* Limits that give charges back (count:, a concurrency slot, a waiting request's place) are
 * never kept, refusal_cache 1m or not: each refused request asks Redis. Nor is any with
 * refusal_cache: 0. */
static void test_never_kept(void)
{
    static const struct {
        const char *route, *cache;
    } cases[] = {{"counted", "1m"}, {"held", "1m"}, {"queued", "1m"}, {"fixed_window", "0s"}};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ok, other = 0;
        long calls;

        CU_ASSERT_FATAL(start_replicas(1, cases[i].cache) == 0);
        ok = flood(gws[0].port, cases[i].route, "never", 5, &other);
        reset_stats();
        ok += flood(gws[0].port, cases[i].route, "never", 50, &other);
        calls = evalsha_calls();
        check_case(ok == 5 && other == 0, cases[i].route, "%d passed (expected 5), %d neither", ok,
                   other);
        check_case(calls >= 50, cases[i].route,
                   "Redis ran %ld EVALSHA for 50 refused requests (expected one each)", calls);
        check_case(saved(&gws[0]) == 0, cases[i].route, "sluice_store_calls_saved_total %ld",
                   saved(&gws[0]));
        stop_replicas(1);
    }
}

/* The client `key` spent its 5 on A, and both replicas hold its refusal; an operator's change
 * on A (`method` `target`, refusal_cache 500 ms) gives it some back. A forgets its refusal and
 * admits the client's next request at once. B hears nothing of it: its refusal, asked before the
 * change, holds until it lapses. That is by design (refusals.h: an operator's change reaches the
 * other replicas when their refusals lapse, at most refusal_cache on); so B admits the client
 * no later than 500 ms after the change (with 100 ms for the polling), and may refuse until
 * then. */
static void check_operator_change(const char *method, const char *target, const char *key)
{
    int ok, other = 0, refused_after = 0;
    long saved_a = saved(&gws[0]), saved_b = saved(&gws[1]);
    double changed_at, back = -1;
    struct reply r;
    long status;

    ok = flood(gws[0].port, "fixed_window", key, 10, &other);
    ok += flood(gws[1].port, "fixed_window", key, 10, &other);
    check_case(ok == 5 && other == 0, method, "%d passed (expected 5)", ok);
    check_case(saved(&gws[0]) - saved_a == 4 && saved(&gws[1]) - saved_b == 9, method,
               "A saved %ld calls (expected 4), B %ld (expected 9)", saved(&gws[0]) - saved_a,
               saved(&gws[1]) - saved_b);

    status = as_operator(&gws[0], method, target, &r);
    reply_free(&r);
    check_case(status == 200, method, "%s answered %ld", target, status);
    if (status != 200)
        return;
    changed_at = seconds_now();
    check_case(get_status(gws[0].port, "/fixed_window/x", key) == 200, method,
               "the replica changed on refused the client's next request");
    while (back < 0 && seconds_now() - changed_at < 2.0) {
        if (get_status(gws[1].port, "/fixed_window/x", key) == 200) {
            back = seconds_now() - changed_at;
        } else {
            refused_after++;
            sleep_ms(10);
        }
    }
    check_case(back >= 0 && back <= 0.6, method,
               "the other replica admitted the client %.0f ms after the change (-1: not in 2 s; "
               "refusal_cache is 500 ms), after %d refusals",
               back * 1000, refused_after);
}

/* A reset (5 back), and a grant of 2: one for each replica. */
static void test_operator_change(void)
{
    CU_ASSERT_FATAL(start_replicas(2, "500ms") == 0);
    check_operator_change("DELETE", "/quota?route=fixed_window&key=reset", "reset");
    check_operator_change(
        "POST", "/quota/grant?route=fixed_window&key=grant&limit=fixed_window&n=2", "grant");
    stop_replicas(2);
}

/* A reload that changes the limit (5 an hour to 6) builds a new set: the refusal kept for the
 * old one is not used, the next request asks Redis (and passes: the new limit counts afresh). */
static void test_reload(void)
{
    int ok, other = 0;
    long status, calls;

    CU_ASSERT_FATAL(start_replicas(1, "1m") == 0);
    ok = flood(gws[0].port, "fixed_window", "reload", 6, &other);
    reset_stats();
    ok += flood(gws[0].port, "fixed_window", "reload", 1, &other);
    check_case(ok == 5 && other == 0 && evalsha_calls() == 0, "before",
               "%d passed (expected 5); Redis ran %ld EVALSHA for a kept refusal", ok,
               evalsha_calls());
    reset_stats();
    rewrite_config(&gws[0], false, config, upstream.port, suite_redis.port, "1m", "6");
    check_case(wait_for_log(&gws[0], "reloaded", 1, 3000), "reload", "no reload was logged");
    status = get_status(gws[0].port, "/fixed_window/x", "reload");
    calls = evalsha_calls();
    check_case(status == 200 && calls == 1, "after",
               "status %ld (expected 200); Redis ran %ld EVALSHA (expected 1)", status, calls);
    stop_replicas(1);
}

/* The names of `r`'s header fields, in order, "Name\n" each, into `out`. */
static void field_names(const struct reply *r, char *out, size_t cap)
{
    size_t len = 0;

    out[0] = '\0';
    for (const char *line = strstr(r->head ? r->head : "", "\r\n"); line != NULL;) {
        const char *colon, *next;

        line += 2;
        colon = strchr(line, ':');
        next = strstr(line, "\r\n");
        if (colon == NULL || next == NULL || colon > next)
            break;
        len += (size_t)snprintf(out + len, cap - len, "%.*s\n", (int)(colon - line), line);
        if (len >= cap)
            break;
        line = next;
    }
}

/* The number after `name`= in `r`'s RateLimit, or -1. */
static long ratelimit_part(const struct reply *r, const char *name)
{
    const char *value = header(r, "RateLimit");
    char part[8];
    const char *at;

    snprintf(part, sizeof part, ";%s=", name);
    at = value != NULL ? strstr(value, part) : NULL;
    return at != NULL ? strtol(at + strlen(part), NULL, 10) : -1;
}

/* `r`'s body up to its request id, which differs per request. */
static size_t body_before_id(const struct reply *r)
{
    const char *id = r->body != NULL ? strstr(r->body, ",\"request_id\":") : NULL;

    return id != NULL ? (size_t)(id - r->body) : 0;
}

/* `cached` answers as `asked` did: a 429 of problem+json with the same fields and body, the
 * same RateLimit-Policy and remaining, Retry-After and RateLimit's t within a second. */
static void compare_answers(const char *route, const struct reply *asked,
                            const struct reply *cached)
{
    char names[2][1024], policy[256] = "";
    size_t len = body_before_id(asked);
    long retry[2] = {header_number(asked, "Retry-After"), header_number(cached, "Retry-After")};
    long t[2] = {ratelimit_part(asked, "t"), ratelimit_part(cached, "t")};

    field_names(asked, names[0], sizeof names[0]);
    field_names(cached, names[1], sizeof names[1]);
    if (header(asked, "RateLimit-Policy") != NULL)
        snprintf(policy, sizeof policy, "%s", header(asked, "RateLimit-Policy"));
    check_case(asked->status == 429 && cached->status == 429, route, "statuses %ld and %ld",
               asked->status, cached->status);
    expect_header(cached, "Content-Type", "application/problem+json");
    expect_header(cached, "RateLimit-Policy", policy);
    check_case(strcmp(names[0], names[1]) == 0, route, "fields\n%s\nand from the cache\n%s",
               names[0], names[1]);
    check_case(len > 0 && body_before_id(cached) == len &&
                   memcmp(asked->body, cached->body, len) == 0,
               route, "bodies\n%s\nand from the cache\n%s", asked->body, cached->body);
    check_case(retry[0] > 0 && retry[1] > 0 && labs(retry[0] - retry[1]) <= 1, route,
               "Retry-After %ld from Redis, %ld from the cache", retry[0], retry[1]);
    check_case(t[0] > 0 && t[1] > 0 && labs(t[0] - t[1]) <= 1, route,
               "RateLimit t=%ld from Redis, t=%ld from the cache", t[0], t[1]);
    check_case(ratelimit_part(asked, "r") == 0 && ratelimit_part(cached, "r") == 0, route,
               "RateLimit r= not 0 on a refusal");
}

/* For each algorithm, the first refusal, Redis's, and the next, this replica's, answer alike. */
static void test_same_answer(void)
{
    const char *headers[] = {"X-API-Key: same", NULL};

    CU_ASSERT_FATAL(start_replicas(1, "1m") == 0);
    for (size_t i = 0; i < sizeof algorithms / sizeof algorithms[0]; i++) {
        struct reply asked, cached;
        char target[64];
        int other = 0;
        long before;

        CU_ASSERT_EQUAL(flood(gws[0].port, algorithms[i], "same", 5, &other), 5);
        snprintf(target, sizeof target, "/%s/x", algorithms[i]);
        before = saved(&gws[0]);
        http(gws[0].port, "GET", target, headers, NULL, &asked);
        check_case(saved(&gws[0]) == before, algorithms[i], "the first refusal was not Redis's");
        http(gws[0].port, "GET", target, headers, NULL, &cached);
        check_case(saved(&gws[0]) == before + 1, algorithms[i], "the second refusal was Redis's");
        compare_answers(algorithms[i], &asked, &cached);
        reply_free(&asked);
        reply_free(&cached);
    }
    stop_replicas(1);
}

void register_refusals_it_tests(void)
{
    CU_pSuite s = add_suite_with("refusal cache", redis_suite_init, redis_suite_clean);

    add_test(s, "a flood costs Redis one call per refusal", test_flood);
    add_test(s, "a kept refusal lapses when Redis's does", test_lapses_with_redis);
    add_test(s, "never held longer than Redis would hold it, by algorithm",
             test_never_longer_than_redis);
    add_test(s, "a cheaper request asks Redis", test_cost_rule);
    add_test(s, "two replicas: exact, each asks once per refusal", test_two_replicas);
    add_test(s, "count:, concurrency, delay: and refusal_cache 0: never kept", test_never_kept);
    add_test(s, "an operator's reset or grant: at once here, within refusal_cache there",
             test_operator_change);
    add_test(s, "a reload's new limits never use an old refusal", test_reload);
    add_test(s, "a kept refusal answers as Redis's did", test_same_answer);
}
