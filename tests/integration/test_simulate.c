/* `sluice simulate` (gateway/ops/simulate.h) on an access log recorded through the real
 * gateway, in the serving mode under test:
 *   - replayed against the config it was recorded with, every line gets the decision the
 *     gateway gave it (token_bucket, gcra, sliding_window_counter; a route with two limits
 *     on two keys and a POST cost; a route that names consumers, with a consumer's plan and
 *     the anonymous plan; denials among them), and the report's figures agree;
 *   - a consumer's plan follows the proposed config; a consumer it lacks, or anonymous lines
 *     where it refuses unknown keys, are counted as not replayed, each under its reason;
 *   - a tighter config denies more, and --compare names the clients it newly denies;
 *   - malformed lines are counted and named FILE:LINE, never fatal; --max-denied sets the
 *     exit code; --format json is one JSON document;
 *   - a 200 MB line, in the middle or last without a newline, from a file or a pipe, is one
 *     malformed line, the others all replayed, in under 64 MiB; a log that cannot be read to
 *     its end (a directory, standard input not readable) fails with exit 2 and no report. */
#include <fcntl.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define OUT_CAP (256 * 1024)

/* The consumer acme (key-one) on the gold plan, key-two held by none; the plans route counts
 * acme under gold and the others by address under the anonymous plan. The multi route is
 * keyed by address, its burst limit by X-API-Key's value: consumers are configured, so a
 * route keyed by a header would name consumers. */
#define SIM_CONFIG                                                                                 \
    "server: {listen: \"127.0.0.1:0\", trusted_proxies: [\"127.0.0.0/8\"]}\n"                      \
    "plans:\n"                                                                                     \
    "  gold:\n"                                                                                    \
    "    - {name: burst, algorithm: token_bucket, requests: 1, per: 1h, burst: %2$u}\n"            \
    "    - {name: per_ip, algorithm: fixed_window, requests: %3$u, per: 1h, key: ip}\n"            \
    "  silver: {algorithm: fixed_window, requests: 100, per: 1h}\n"                                \
    "  anonymous: {algorithm: gcra, requests: 1, per: 1h, burst: 1}\n"                             \
    "consumers:\n  - {name: %4$s, key: key-one, plan: %5$s}\n"                                     \
    "routes:\n"                                                                                    \
    "  - name: multi\n    match: {path_prefix: /multi/}\n"                                         \
    "    upstream: \"http://127.0.0.1:%1$u\"\n    limit:\n"                                        \
    "      - {name: burst, algorithm: token_bucket, requests: 1, per: 1h, burst: %2$u, "           \
    "key: \"header:X-API-Key\", cost: {POST: 2}}\n"                                                \
    "      - {name: per_ip, algorithm: fixed_window, requests: %3$u, per: 1h, key: ip}\n"          \
    "  - name: gcra\n    match: {path_prefix: /g/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"     \
    "    limit: {algorithm: gcra, requests: 1, per: 1h, burst: %2$u}\n"                            \
    "  - name: counter\n    match: {path_prefix: /c/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"  \
    "    limit: {algorithm: sliding_window_counter, requests: %2$u, per: 1h}\n"                    \
    "  - name: plans\n    match: {path_prefix: /p/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"    \
    "    key: \"header:X-API-Key\"\n    plan: silver\n    unknown_key: %6$s\n"                     \
    "  - name: open\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:%1$u\"\n"

/* Refills of an hour, and a per-IP quota (2) below the key burst (3): which limit denies
 * each request does not depend on how fast the run goes. */
static struct proc gw;
static char dir[64];       /* /tmp/sluice-sim-XXXXXX */
static char recorded[128]; /* the access log of the recording */
static char recorded_config[128];
static int recorded_lines, recorded_denied;

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

/* The config text with burst/quota `small` and per_ip `per_ip`, the consumer `consumer` on
 * `plan`, and `unknown_key` on the plans route, into `path`. */
static void write_config(const char *path, unsigned small, unsigned per_ip, const char *consumer,
                         const char *plan, const char *unknown_key)
{
    char text[4096];

    snprintf(text, sizeof text, SIM_CONFIG, upstream.port, small, per_ip, consumer, plan,
             unknown_key);
    write_text(path, text);
}

/* Records a run: three clients (by X-Forwarded-For) and two API keys over every route, GETs
 * and POSTs, enough to be denied by each limit. */
static int init(void)
{
    static const char *const paths[] = {"/multi/a", "/g/a", "/c/a", "/p/a", "/open/a"};
    static const char *const clients[] = {"X-Forwarded-For: 203.0.113.1",
                                          "X-Forwarded-For: 203.0.113.2",
                                          "X-Forwarded-For: 2001:db8::7"};
    static const char *const keys[] = {"X-API-Key: key-one", "X-API-Key: key-two", NULL};
    char *log, *save = NULL;

    snprintf(dir, sizeof dir, "/tmp/sluice-sim-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    if (start_sluice(&gw, SIM_CONFIG, upstream.port, 3u, 2u, "acme", "gold", "anonymous") != 0)
        return -1;
    for (int round = 0; round < 4; round++)
        for (size_t c = 0; c < 3; c++)
            for (size_t p = 0; p < 5; p++) {
                const char *headers[] = {clients[c], keys[(c + (size_t)round) % 3], NULL};
                struct reply r;

                http(gw.port, (round + (int)p) % 3 == 0 ? "POST" : "GET", paths[p], headers, NULL,
                     &r);
                reply_free(&r);
            }
    snprintf(recorded, sizeof recorded, "%s/access.log", dir);
    snprintf(recorded_config, sizeof recorded_config, "%s/recorded.yaml", dir);
    /* The log's writer thread writes on its own time: wait for every line, then copy the log
     * and the config (with the serving mode the run had) before stopping removes them. */
    wait_for_access_lines(&gw, 60);
    log = read_file(gw.access_path);
    if (log == NULL)
        return -1;
    write_text(recorded, log);
    for (char *line = strtok_r(log, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        recorded_lines++;
        recorded_denied += strstr(line, "\"decision\":\"denied\"") != NULL;
    }
    free(log);
    log = read_file(gw.config_path);
    if (log == NULL)
        return -1;
    write_text(recorded_config, log);
    free(log);
    return stop_sluice(&gw, 5000);
}

static int clean(void)
{
    char command[128];
    const char *keep = getenv("SLUICE_IT_KEEP");

    if (keep == NULL || keep[0] == '\0') {
        snprintf(command, sizeof command, "rm -rf %s", dir);
        if (system(command) != 0)
            return -1;
    }
    return 0;
}

/* Runs `sluice simulate ARGS`; its exit code, its output in a buffer the caller frees. */
static int simulate(char **out, const char *fmt, ...)
{
    char args[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    *out = malloc(OUT_CAP);
    return run_sluice(args, *out, OUT_CAP);
}

/* Every recorded line, replayed against its own config, gets the recorded decision; where it
 * was denied, the limit the log names is among those the replay says denied it (a plan's
 * named PLAN/LIMIT). */
static void test_replay_is_exact(void)
{
    char *out, *log = read_file(recorded), *save = NULL, *out_save = NULL;
    char *line, *decision;
    int lines = 0, denied = 0, limits_seen = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    CU_ASSERT_EQUAL(simulate(&out, "simulate --decisions -c %s %s", recorded_config, recorded), 0);
    CU_ASSERT_TRUE(recorded_lines >= 60);
    CU_ASSERT_TRUE(recorded_denied >= 6);
    decision = strtok_r(out, "\n", &out_save);
    for (line = strtok_r(log, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        struct json_object *o = json_tokener_parse(line), *v;
        char want[200], label[64];
        const char *recorded_decision = "?", *limit = "", *path = "";

        lines++;
        if (o != NULL && json_object_object_get_ex(o, "decision", &v))
            recorded_decision = json_object_get_string(v);
        if (o != NULL && json_object_object_get_ex(o, "limit", &v))
            limit = json_object_get_string(v);
        if (o != NULL && json_object_object_get_ex(o, "path", &v))
            path = json_object_get_string(v);
        snprintf(want, sizeof want, "%s:%d %s", recorded, lines, recorded_decision);
        snprintf(label, sizeof label, "line %d", lines);
        check_case(decision != NULL && strncmp(decision, want, strlen(want)) == 0, label,
                   "recorded \"%s\", replayed \"%s\"", want, decision ? decision : "(none)");
        if (decision != NULL && strcmp(recorded_decision, "denied") == 0) {
            char *listed = strchr(decision + strlen(want) - strlen("denied"), ' ');

            denied++;
            check_case(listed != NULL && strstr(listed, limit) != NULL, label,
                       "limit %s not among \"%s\"", limit, decision);
            if (strcmp(path, "/multi/a") == 0)
                limits_seen |= strcmp(limit, "burst") == 0    ? 1
                               : strcmp(limit, "per_ip") == 0 ? 2
                                                              : 0;
            if (strcmp(path, "/p/a") == 0 && listed != NULL)
                limits_seen |= strstr(listed, " gold/burst") != NULL     ? 4
                               : strncmp(listed, " anonymous/", 11) == 0 ? 8
                                                                         : 0;
        }
        json_object_put(o);
        decision = strtok_r(NULL, "\n", &out_save);
    }
    CU_ASSERT_PTR_NULL(decision); /* one decision per line, no more */
    CU_ASSERT_EQUAL(lines, recorded_lines);
    CU_ASSERT_EQUAL(denied, recorded_denied);
    CU_ASSERT_EQUAL(limits_seen & 3, 3);   /* both limits of the multi route denied some */
    CU_ASSERT_EQUAL(limits_seen & 12, 12); /* so did acme's gold plan and the anonymous plan */
    free(out);
    free(log);
}

/* The JSON report of `sluice simulate -c PROPOSED [--compare CURRENT]` over the recording,
 * which must exit 0; NULL when it is no JSON. The caller puts it. */
static struct json_object *json_report(const char *proposed, const char *current)
{
    char *out;
    struct json_object *o;

    CU_ASSERT_EQUAL(simulate(&out, "simulate --format json -c %s %s%s %s", proposed,
                             current ? "--compare " : "", current ? current : "", recorded),
                    0);
    o = json_tokener_parse(out);
    free(out);
    return o;
}

/* The value at `path` ("proposed.routes.0.name") in `o`, or NULL. */
static struct json_object *get(struct json_object *o, const char *path)
{
    char copy[128], *save = NULL;
    struct json_object *v = o;

    snprintf(copy, sizeof copy, "%s", path);
    for (char *name = strtok_r(copy, ".", &save); name != NULL && v != NULL;
         name = strtok_r(NULL, ".", &save)) {
        char *end;
        long index = strtol(name, &end, 10);

        if (*end == '\0')
            v = json_object_array_get_idx(v, (size_t)index);
        else if (!json_object_object_get_ex(v, name, &v))
            v = NULL;
    }
    return v;
}

static int64_t get_int(struct json_object *o, const char *path)
{
    struct json_object *v = get(o, path);

    return v ? json_object_get_int64(v) : -1;
}

static const char *get_string(struct json_object *o, const char *path)
{
    struct json_object *v = get(o, path);

    return v ? json_object_get_string(v) : "";
}

/* The report's totals agree with the log; every route and limit is there. */
static void test_report_figures(void)
{
    struct json_object *o = json_report(recorded_config, NULL);

    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(get_int(o, "lines"), recorded_lines);
    CU_ASSERT_EQUAL(get_int(o, "malformed.count"), 0);
    CU_ASSERT_EQUAL(get_int(o, "proposed.requests"), recorded_lines);
    CU_ASSERT_EQUAL(get_int(o, "proposed.denied"), recorded_denied);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.0.requests"), 12);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.4.requests"), 12);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.4.denied"), 0);
    CU_ASSERT_TRUE(get_int(o, "proposed.routes.1.limits.0.denied") > 0); /* gcra */
    CU_ASSERT_TRUE(get_int(o, "proposed.routes.2.limits.0.denied") > 0); /* counter */
    CU_ASSERT_TRUE(get_int(o, "proposed.routes.1.limits.0.top_clients.0.denials") > 0);
    json_object_put(o);
}

/* A tighter proposal denies more; --compare shows both and whom only it denies. */
static void test_tighter_and_compare(void)
{
    char tighter[160], *out;
    struct json_object *o;

    snprintf(tighter, sizeof tighter, "%s/tighter.yaml", dir);
    write_config(tighter, 2, 1, "acme", "gold", "anonymous");
    o = json_report(tighter, recorded_config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(get_int(o, "current.denied"), recorded_denied);
    CU_ASSERT_TRUE(get_int(o, "proposed.denied") > recorded_denied);
    /* Beside each config's figures, what the log recorded, whichever config replays it. */
    CU_ASSERT_EQUAL(get_int(o, "proposed.recorded_denied"), recorded_denied);
    CU_ASSERT_EQUAL(get_int(o, "current.recorded_denied"), recorded_denied);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.0.recorded_denied"),
                    get_int(o, "current.routes.0.denied"));
    CU_ASSERT_TRUE(get_int(o, "proposed.routes.0.limits.1.denied") >
                   get_int(o, "current.routes.0.limits.1.denied"));
    CU_ASSERT_TRUE(get_int(o, "newly_denied.4.clients") == 0); /* open: no limits */
    json_object_put(o);
    /* The text report puts the current figures beside the proposed ones. */
    CU_ASSERT_EQUAL(
        simulate(&out, "simulate -c %s --compare %s %s", tighter, recorded_config, recorded), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CURRENT:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "denied under the proposed config, never under"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, " RECORDED "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(denials per minute: each column sums"));
    free(out);
}

/* The plans route: acme sends 4 requests (from three addresses), the others 8 by address.
 * Recorded: gold's burst of 3 denies acme's fourth, the anonymous plan (1 an hour per
 * address) denies 5. Proposed: acme moved to silver (100 an hour) is denied nothing; a config
 * without acme that refuses unknown keys replays none of the route's lines, each counted
 * under its reason. The route's own limit has no row: with an anonymous plan it can decide
 * nothing, as the gateway builds it. */
static void test_consumer_plans(void)
{
    char proposed[160], *out;
    struct json_object *o = json_report(recorded_config, NULL);

    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_STRING_EQUAL(get_string(o, "proposed.routes.3.limits.0.name"), "gold/burst");
    CU_ASSERT_STRING_EQUAL(get_string(o, "proposed.routes.3.limits.0.plan"), "gold");
    CU_ASSERT_STRING_EQUAL(get_string(o, "proposed.routes.3.limits.0.key"), "consumer");
    CU_ASSERT_STRING_EQUAL(get_string(o, "proposed.routes.3.limits.1.key"), "ip"); /* per_ip */
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.requests"), 12);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.denied"), 6);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.limits.0.requests"), 4); /* gold/burst */
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.limits.0.denied"), 1);
    CU_ASSERT_STRING_EQUAL(get_string(o, "proposed.routes.3.limits.3.plan"), "anonymous");
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.limits.3.requests"), 8);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.limits.3.denied"), 5);
    /* A limit that counts consumers names its most denied by their configured names; one
     * that counts addresses has no consumer to name. */
    CU_ASSERT_STRING_EQUAL(get_string(o, "proposed.routes.3.limits.0.top_clients.0.consumer"),
                           "acme");
    CU_ASSERT_EQUAL(strlen(get_string(o, "proposed.routes.3.limits.0.top_clients.0.client")), 16);
    CU_ASSERT_PTR_NOT_NULL(get(o, "proposed.routes.3.limits.3.top_clients.0.client"));
    CU_ASSERT_PTR_NULL(get(o, "proposed.routes.3.limits.3.top_clients.0.consumer"));
    json_object_put(o);
    CU_ASSERT_EQUAL(simulate(&out, "simulate -c %s %s", recorded_config, recorded), 0);
    check_case(strstr(out, "most denied clients: acme (1)\n") != NULL, "consumer names",
               "the text report does not name acme among gold/burst's most denied:\n%s", out);
    free(out);

    snprintf(proposed, sizeof proposed, "%s/silver.yaml", dir);
    write_config(proposed, 3, 2, "acme", "silver", "anonymous");
    o = json_report(proposed, recorded_config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.requests"), 12);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.denied"), 5);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.limits.0.requests"), 0);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.limits.2.requests"), 4); /* silver */
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.limits.2.denied"), 0);
    CU_ASSERT_EQUAL(get_int(o, "current.routes.3.denied"), 6);
    json_object_put(o);

    snprintf(proposed, sizeof proposed, "%s/without-acme.yaml", dir);
    write_config(proposed, 3, 2, "someone_else", "gold", "reject");
    o = json_report(proposed, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(get_int(o, "proposed.routes.3.requests"), 0);
    CU_ASSERT_EQUAL(get_int(o, "proposed.not_replayed.consumer_missing"), 4);
    CU_ASSERT_EQUAL(get_int(o, "proposed.not_replayed.unknown_key"), 8);
    CU_ASSERT_EQUAL(get_int(o, "proposed.requests"), recorded_lines - 12);
    json_object_put(o);
}

/* Malformed lines are counted and named FILE:LINE; the good ones are still replayed. */
static void test_malformed_lines(void)
{
    char path[160], *log = read_file(recorded), *text, *out, *second;
    size_t len;

    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    CU_ASSERT_FATAL(recorded_lines >= 3);
    second = strchr(log, '\n') + 1;
    len = strlen(log) + 200;
    text = malloc(len);
    /* line 1 good, 2 not JSON, 3 good, 4 an old line without keys, 5 cut short, then the rest */
    snprintf(text, len,
             "%.*snot json\n%.*s{\"method\":\"GET\",\"path\":\"/g/a\"}\n{\"method\":\"GE\n%s",
             (int)(second - log), log, (int)(strchr(second, '\n') + 1 - second), second,
             strchr(second, '\n') + 1);
    snprintf(path, sizeof path, "%s/malformed.log", dir);
    write_text(path, text);
    CU_ASSERT_EQUAL(simulate(&out, "simulate -c %s %s", recorded_config, path), 0);
    {
        char want[256];

        snprintf(want, sizeof want, "%d lines, 3 malformed", recorded_lines + 3);
        check_case(strstr(out, want) != NULL, "count", "%s", out);
        snprintf(want, sizeof want, "%s:2: ", path);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
        snprintf(want, sizeof want, "%s:4: method, path, decided_ns or keys is missing", path);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
        snprintf(want, sizeof want, "%s:5: ", path);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
        snprintf(want, sizeof want, "%d requests replayed", recorded_lines);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    }
    free(out);
    free(text);
    free(log);
}

/* --max-denied: 1 when the proposal denies a larger share, 0 otherwise, 2 when misspelt; the
 * log may come on standard input. */
static void test_max_denied(void)
{
    char *out, command[600];

    CU_ASSERT_EQUAL(
        simulate(&out, "simulate --max-denied 100%% -c %s %s", recorded_config, recorded), 0);
    free(out);
    CU_ASSERT_EQUAL(
        simulate(&out, "simulate --max-denied 0.1%% -c %s %s", recorded_config, recorded), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "would be denied, over 0.100%"));
    free(out);
    CU_ASSERT_EQUAL(simulate(&out, "simulate --max-denied 5 -c %s %s", recorded_config, recorded),
                    2);
    free(out);
    CU_ASSERT_EQUAL(simulate(&out, "simulate -c %s %s/none.log", recorded_config, dir), 2);
    free(out);
    out = malloc(OUT_CAP);
    snprintf(command, sizeof command, "%s simulate --max-denied 0%% -c %s - < %s", sluice_binary(),
             recorded_config, recorded);
    CU_ASSERT_EQUAL(run_command(command, out, OUT_CAP), 1);
    free(out);
}

/* Runs `command` under /bin/sh as run_command() does (its exit code, its output in `out`),
 * and gives the largest peak RSS, in KiB, of the shell and each process it waited for (wait4:
 * Linux takes the maximum over the children a process reaped). */
static int run_measured(const char *command, char *out, size_t cap, long *peak_kib)
{
    int output[2], status = 0;
    struct rusage usage = {0};
    size_t n = 0;
    pid_t pid;

    *peak_kib = -1;
    out[0] = '\0';
    if (pipe(output) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(output[1], STDOUT_FILENO);
        dup2(output[1], STDERR_FILENO);
        close(output[0]);
        close(output[1]);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    close(output[1]);
    for (;;) {
        char drain[256]; /* what does not fit in `out` */
        bool room = n < cap - 1;
        ssize_t got = read(output[0], room ? out + n : drain, room ? cap - 1 - n : sizeof drain);

        if (got <= 0)
            break;
        n += room ? (size_t)got : 0;
    }
    out[n] = '\0';
    close(output[0]);
    if (pid < 0 || wait4(pid, &status, 0, &usage) != pid)
        return -1;
    *peak_kib = usage.ru_maxrss;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The first `lines` lines of the recording, then a line of 200 MiB (written a MiB at a time:
 * never whole in memory here), then, with `rest`, a newline and the rest of the recording,
 * into `path`. 0, or -1. */
static int write_long_line_log(const char *path, int lines, bool rest)
{
    static char chunk[1 << 20];
    char *log = read_file(recorded), *cut = log;
    FILE *f = fopen(path, "w");
    int rc = -1;

    if (log == NULL || f == NULL)
        goto out;
    for (int i = 0; i < lines && cut != NULL; i++) {
        cut = strchr(cut, '\n');
        cut = cut != NULL ? cut + 1 : NULL;
    }
    if (cut == NULL)
        goto out;
    memset(chunk, 'a', sizeof chunk);
    fwrite(log, 1, (size_t)(cut - log), f);
    fputs("{\"method\":\"GET\",\"path\":\"/", f);
    for (int mib = 0; mib < 200; mib++)
        fwrite(chunk, 1, sizeof chunk, f);
    if (rest)
        fprintf(f, "\"}\n%s", cut);
    rc = ferror(f) ? -1 : 0;
out:
    if (f != NULL && fclose(f) != 0)
        rc = -1;
    free(log);
    return rc;
}

/* `sluice simulate` over `path` (the long line its line `at`), as a file and through a pipe:
 * exit 0, `lines` lines and the one malformed, named, `replayed` requests replayed, and each
 * run's peak RSS under 64 MiB. */
static void check_long_line(const char *path, int at, int lines, int replayed)
{
    static const char *const ways[] = {"%s simulate -c %s %s",
                                       "cat %3$s | %1$s simulate -c %2$s -"};
    char *out = malloc(OUT_CAP);

    for (size_t w = 0; w < 2; w++) {
        const char *label = w == 0 ? "file" : "pipe";
        char command[600], want[300];
        long peak_kib;
        int rc;

        snprintf(command, sizeof command, ways[w], sluice_binary(), recorded_config, path);
        rc = run_measured(command, out, OUT_CAP, &peak_kib);
        check_case(rc == 0, label, "exit %d: %.2000s", rc, out);
        snprintf(want, sizeof want, "%d lines, 1 malformed", lines);
        check_case(strstr(out, want) != NULL, label, "no \"%s\" in %.2000s", want, out);
        snprintf(want, sizeof want, "%s:%d: longer than any line the access log writes",
                 w == 0 ? path : "-", at);
        check_case(strstr(out, want) != NULL, label, "no \"%s\" in %.2000s", want, out);
        snprintf(want, sizeof want, "%d requests replayed", replayed);
        check_case(strstr(out, want) != NULL, label, "no \"%s\" in %.2000s", want, out);
        check_case(peak_kib > 0 && peak_kib < 64 * 1024, label, "peak RSS %ld KiB", peak_kib);
    }
    free(out);
}

/* A line of 200 MiB between the two halves of the recording: skipped without being held, and
 * every line after it replayed. */
static void test_long_line_in_the_middle(void)
{
    char path[160];
    int half = recorded_lines / 2;

    snprintf(path, sizeof path, "%s/long-middle.log", dir);
    CU_ASSERT_EQUAL_FATAL(write_long_line_log(path, half, true), 0);
    check_long_line(path, half + 1, recorded_lines + 1, recorded_lines);
    unlink(path);
}

/* The same line last, without a newline. */
static void test_long_line_last(void)
{
    char path[160];

    snprintf(path, sizeof path, "%s/long-last.log", dir);
    CU_ASSERT_EQUAL_FATAL(write_long_line_log(path, recorded_lines, false), 0);
    check_long_line(path, recorded_lines + 1, recorded_lines + 1, recorded_lines);
    unlink(path);
}

/* A last line without a newline is a line: replayed when it is whole, and when a pipe's
 * writer stopped in the middle of it, counted malformed and named. */
static void test_last_line_without_newline(void)
{
    char command[1024], want[300], *out = malloc(OUT_CAP);
    int rc;

    snprintf(command, sizeof command, "head -c -1 %s | %s simulate -c %s -", recorded,
             sluice_binary(), recorded_config);
    rc = run_command(command, out, OUT_CAP);
    snprintf(want, sizeof want, "%d lines, 0 malformed", recorded_lines);
    check_case(rc == 0 && strstr(out, want) != NULL, "whole", "exit %d: %.2000s", rc, out);
    snprintf(want, sizeof want, "%d requests replayed", recorded_lines);
    check_case(strstr(out, want) != NULL, "whole", "no \"%s\" in %.2000s", want, out);
    snprintf(command, sizeof command, "(cat %s; printf '{\"method\":\"GE') | %s simulate -c %s -",
             recorded, sluice_binary(), recorded_config);
    rc = run_command(command, out, OUT_CAP);
    snprintf(want, sizeof want, "%d lines, 1 malformed", recorded_lines + 1);
    check_case(rc == 0 && strstr(out, want) != NULL, "cut", "exit %d: %.2000s", rc, out);
    snprintf(want, sizeof want, "\n  -:%d: ", recorded_lines + 1);
    check_case(strstr(out, want) != NULL, "cut", "no \"%s\" in %.2000s", want, out);
    free(out);
}

/* A log that cannot be read to its end ends the run with exit 2, its name and the reason, and
 * no report: a directory, alone or after a good log; standard input a directory, or open
 * for writing only. */
static void test_read_errors(void)
{
    static const struct {
        const char *label, *named; /* named: with the directory's name for %s */
    } cases[] = {
        {"directory", "%s: read failed after 0 lines: Is a directory"},
        {"after a log", "%s: read failed after 0 lines: Is a directory"},
        {"stdin directory", "-: read failed after 0 lines: Is a directory"},
        {"stdin write-only", "-: read failed after 0 lines: Bad file descriptor"},
    };
    char *out = malloc(OUT_CAP), args[4][300], write_only[160];

    snprintf(write_only, sizeof write_only, "%s/write-only", dir);
    snprintf(args[0], sizeof args[0], "%s", dir);
    snprintf(args[1], sizeof args[1], "%s %s", recorded, dir);
    snprintf(args[2], sizeof args[2], "- < %s", dir);
    snprintf(args[3], sizeof args[3], "- 0>>%s", write_only);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char command[1024], want[300];
        int rc;

        snprintf(command, sizeof command, "%s simulate -c %s %.299s", sluice_binary(),
                 recorded_config, args[i]);
        rc = run_command(command, out, OUT_CAP);
        check_case(rc == 2, cases[i].label, "exit %d: %.2000s", rc, out);
        snprintf(want, sizeof want, cases[i].named, dir);
        check_case(strstr(out, want) != NULL, cases[i].label, "no \"%s\" in %.2000s", want, out);
        check_case(strstr(out, "requests replayed") == NULL && strstr(out, " lines, ") == NULL,
                   cases[i].label, "a report over part of the input: %.2000s", out);
    }
    unlink(write_only);
    free(out);
}

void register_simulate_tests(void)
{
    CU_pSuite s = add_suite_with("simulate", init, clean);

    add_test(s, "replaying a recorded run gives its decisions, line for line",
             test_replay_is_exact);
    add_test(s, "the report's figures, as JSON", test_report_figures);
    add_test(s, "a tighter config denies more; --compare", test_tighter_and_compare);
    add_test(s, "consumer routes: each consumer's plan in the proposed config",
             test_consumer_plans);
    add_test(s, "malformed lines counted and named, never fatal", test_malformed_lines);
    add_test(s, "--max-denied sets the exit code; - reads stdin", test_max_denied);
    add_test(s, "a 200 MB line in the middle: one malformed line, all others replayed",
             test_long_line_in_the_middle);
    add_test(s, "a 200 MB line last, without a newline: the same", test_long_line_last);
    add_test(s, "a last line without a newline: replayed, or malformed when cut",
             test_last_line_without_newline);
    add_test(s, "a log that cannot be read to its end: exit 2, no report", test_read_errors);
}
