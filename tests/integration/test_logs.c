/*
 * Logs an operator can ship, against the real binary: the process log in text and json (every
 * line whole and parseable, json escaping), log.level filtering (and its change on reload),
 * libmicrohttpd's messages provoked by real clients (a reset or a close mid-body on the
 * proxied port, a request libmicrohttpd cannot read on the admin port) as one clean line each
 * and rate-limited, the access log's client (address, hash, none), limit and user_agent
 * fields, and `sluice --healthcheck -c FILE`.
 */
#include <ctype.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define ROUTE                                                                                      \
    "routes:\n  - name: r\n    match: {path_prefix: /}\n"                                          \
    "    upstream: \"http://127.0.0.1:%1$u\"\n"                                                    \
    "    limit: {algorithm: fixed_window, requests: 1000, per: 1m}\n"

/* The log's length now: what a check later reads from. */
static size_t log_len(const struct proc *p)
{
    char *log = read_log(p);
    size_t len = log ? strlen(log) : 0;

    free(log);
    return len;
}

/* The log from byte `from` on (the caller frees it). */
static char *log_from(const struct proc *p, size_t from)
{
    char *log = read_log(p), *tail;

    if (log == NULL)
        return strdup("");
    tail = strdup(strlen(log) >= from ? log + from : "");
    free(log);
    return tail;
}

/* Waits up to `timeout_ms` for `needle` in the log from `from` on. */
static bool wait_from(const struct proc *p, size_t from, const char *needle, int timeout_ms)
{
    for (int waited = 0;; waited += 20) {
        char *tail = log_from(p, from);
        bool found = strstr(tail, needle) != NULL;

        free(tail);
        if (found || waited >= timeout_ms)
            return found;
        sleep_ms(20);
    }
}

/* Rewrites the config of `gw` (as rewrite_config()) and reloads it at once with SIGHUP,
 * rather than wait for the file watch (which may reload it too). */
#define RELOAD_WITH(gw, ...) (rewrite_config((gw), false, __VA_ARGS__), kill((gw)->pid, SIGHUP))

/* Waits for the count of successful reloads to pass `before`; the new count. */
static double wait_reload(const struct proc *p, double before)
{
    double now = before;

    for (int i = 0; i < 250 && now <= before; i++) {
        sleep_ms(20);
        now = metric_now(p, "sluice_config_reloads_total{result=\"success\"}");
    }
    CU_ASSERT_TRUE(now > before);
    return now;
}

static double reloads(const struct proc *p)
{
    return metric_now(p, "sluice_config_reloads_total{result=\"success\"}");
}

/* Every line of `log` is whole and in `json` or text form: a JSON object of exactly time,
 * level and msg, or "TIME LEVEL msg"; the time 2026-12-01T10:00:00.123Z-shaped, the level
 * one of the four; no empty line, no HTML. Returns the lines checked. */
static int check_lines(const char *log, bool json, const char *label)
{
    static const char *const levels[] = {"debug", "info", "warn", "error"};
    char *copy = strdup(log), *save = NULL;
    int lines = 0;

    check_case(log[0] == '\0' || log[strlen(log) - 1] == '\n', label, "a last line not ended");
    check_case(strstr(log, "\n\n") == NULL && log[0] != '\n', label, "an empty line");
    check_case(strstr(log, "<html") == NULL && strstr(log, "</") == NULL, label, "HTML in: %s",
               log);
    for (char *line = strtok_r(copy, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save), lines++) {
        char time[64] = "", level[16] = "";
        bool known = false;

        if (json) {
            struct json_object *o = json_tokener_parse(line), *v;

            check_case(o != NULL && json_object_is_type(o, json_type_object) &&
                           json_object_object_length(o) == 3 &&
                           json_object_object_get_ex(o, "msg", &v) &&
                           json_object_is_type(v, json_type_string),
                       label, "not a {time, level, msg} object: %s", line);
            if (o != NULL && json_object_object_get_ex(o, "time", &v))
                snprintf(time, sizeof time, "%s", json_object_get_string(v));
            if (o != NULL && json_object_object_get_ex(o, "level", &v))
                snprintf(level, sizeof level, "%s", json_object_get_string(v));
            json_object_put(o);
        } else {
            sscanf(line, "%63s %15s ", time, level);
        }
        for (size_t i = 0; i < 4; i++)
            known = known || strcmp(level, levels[i]) == 0;
        check_case(known, label, "level \"%s\" in: %s", level, line);
        check_case(strlen(time) == 24 && time[4] == '-' && time[10] == 'T' && time[19] == '.' &&
                       time[23] == 'Z' && isdigit((unsigned char)time[22]),
                   label, "time \"%s\" in: %s", time, line);
    }
    free(copy);
    return lines;
}

/* The msg of the first json line (or the text line's message) holding `needle`, into `msg`;
 * its level into `level`. False when none does. */
static bool find_line(const char *log, bool json, const char *needle, char *msg, size_t cap,
                      char level[16])
{
    char *copy = strdup(log), *save = NULL;
    bool found = false;

    for (char *line = strtok_r(copy, "\n", &save); line != NULL && !found;
         line = strtok_r(NULL, "\n", &save)) {
        if (strstr(line, needle) == NULL)
            continue;
        found = true;
        if (json) {
            struct json_object *o = json_tokener_parse(line), *v;

            json_object_object_get_ex(o, "msg", &v);
            snprintf(msg, cap, "%s", json_object_get_string(v));
            json_object_object_get_ex(o, "level", &v);
            snprintf(level, 16, "%s", json_object_get_string(v));
            json_object_put(o);
        } else {
            char *space = strchr(line, ' ');

            sscanf(space + 1, "%15s", level);
            snprintf(msg, cap, "%s", strchr(space + 1, ' ') + 1);
        }
    }
    free(copy);
    return found;
}

/* Sends `request` on a new connection, waits for it to be read, then ends the connection with
 * a reset (`reset`) or an orderly close, without reading an answer. */
static void send_and_drop(unsigned port, const char *request, bool reset)
{
    int fd = raw_connect(port);
    struct linger abort_close = {1, 0};

    CU_ASSERT_TRUE_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(send(fd, request, strlen(request), MSG_NOSIGNAL), (ssize_t)strlen(request));
    sleep_ms(100);
    if (reset)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof abort_close);
    close(fd);
}

#define HALF_HEAD "GET /healthz HTTP/1.1\r\nHost: x\r\n"

/* `n` connections (at most 8) each send half a head, which is read; then all are reset at
 * once. */
static void reset_at_once(unsigned port, int n)
{
    struct linger abort_close = {1, 0};
    int fds[8];

    for (int i = 0; i < n; i++) {
        fds[i] = raw_connect(port);
        CU_ASSERT_TRUE_FATAL(fds[i] >= 0);
        send(fds[i], HALF_HEAD, strlen(HALF_HEAD), MSG_NOSIGNAL);
    }
    sleep_ms(300);
    for (int i = 0; i < n; i++) {
        setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &abort_close, sizeof abort_close);
        close(fds[i]);
    }
}

#define PARTIAL_BODY "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc"
#define RESET_LINE   "http: Socket has been disconnected when reading request"
#define CLOSE_LINE   "http: Connection was closed by remote side with incomplete request"
#define ANSWERED_413 "http: answered 413 to a request it could not read and closed the connection"
#define ANSWERED_505 "http: answered 505 to a request it could not read and closed the connection"
#define HUGE_LENGTH                                                                                \
    "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n"

/* Lines in text and json, each whole; a message with quotes and a backslash (a rejected
 * reload quoting the file), or control characters, escaped so that it parses back to itself
 * (json) or reads as \n, \t, \xNN (text). */
static void test_process_log_formats(void)
{
    for (int json = 0; json <= 1; json++) {
        const char *format = json ? "json" : "text", *label = format;
        char msg[1024] = "", level[16] = "", *log;
        struct proc gw;

        CU_ASSERT_EQUAL_FATAL(
            start_sluice(&gw, "server: {listen: \"127.0.0.1:0\"}\nlog: {format: %2$s}\n" ROUTE,
                         upstream.port, format),
            0);
        RELOAD_WITH(&gw,
                    "server: {listen: \"127.0.0.1:0\"}\nlog: {format: %2$s}\n"
                    "routes:\n  - name: r\n    match: {path_prefix: /}\n"
                    "    upstream: \"http://127.0.0.1:%1$u\"\n"
                    "    limit: {algorithm: \"ma\\\"gic\\\\x\", requests: 1, per: 1m}\n",
                    upstream.port, format);
        check_case(wait_for_log(&gw, "reload rejected", 1, 5000), label, "no rejected reload");
        /* A message holding control characters (the file name of an access log that cannot
         * be opened) stays on its line. */
        RELOAD_WITH(&gw,
                    "server: {listen: \"127.0.0.1:0\", "
                    "access_log: \"/nonexistent-dir/a\\tb\\nc\\x01d\"}\n"
                    "log: {format: %2$s}\n" ROUTE,
                    upstream.port, format);
        check_case(wait_for_log(&gw, "cannot open access_log", 1, 5000), label, "no second");
        log = read_log(&gw);
        check_case(check_lines(log, json, label) >= 2, label, "too few lines: %s", log);
        check_case(find_line(log, json, "listening on", msg, sizeof msg, level) &&
                       strcmp(level, "info") == 0 && strncmp(msg, "sluice ", 7) == 0,
                   label, "the listening line: %s %s", level, msg);
        check_case(find_line(log, json, "reload rejected", msg, sizeof msg, level) &&
                       strcmp(level, "error") == 0 &&
                       strstr(msg, "algorithm: unknown \"ma\"gic\\x\"") != NULL,
                   label, "the rejected reload: %s %s", level, msg);
        check_case(find_line(log, json, "cannot open access_log", msg, sizeof msg, level) &&
                       strcmp(msg, json ? "reload rejected: cannot open access_log "
                                          "/nonexistent-dir/a\tb\nc\x01"
                                          "d"
                                        : "reload rejected: cannot open access_log "
                                          "/nonexistent-dir/a\\tb\\nc\\x01d") == 0,
                   label, "the control characters: %s", msg);
        free(log);
        CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    }
}

/* log.level: info hides debug, warn hides info, debug shows both; each change takes effect on
 * reload. */
static void test_level_filtering(void)
{
    struct proc gw;
    size_t from;
    double done;
    char *tail;

    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw,
                     "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
                     "log: {level: info}\n" ROUTE,
                     upstream.port),
        0);
    /* info: the client's reset is logged, the reason before a 413 (debug) is not. */
    from = log_len(&gw);
    send_and_drop(gw.admin_port, HALF_HEAD, true);
    CU_ASSERT_TRUE(wait_from(&gw, from, RESET_LINE, 5000));
    send_and_drop(gw.admin_port, HUGE_LENGTH, false);
    CU_ASSERT_TRUE(wait_from(&gw, from, ANSWERED_413, 5000));
    tail = log_from(&gw, from);
    CU_ASSERT_PTR_NULL(strstr(tail, "Too large value of 'Content-Length'"));
    CU_ASSERT_PTR_NULL(strstr(tail, "debug"));
    free(tail);

    /* warn: neither the reset nor "reloaded" (info); a warning still is. */
    done = reloads(&gw);
    from = log_len(&gw);
    sleep_ms(1100); /* past the reset line's once-a-second */
    RELOAD_WITH(&gw,
                "server: {listen: \"127.0.0.1:%3$u\", admin_listen: \"127.0.0.1:%2$u\"}\n"
                "log: {level: warn}\n" ROUTE,
                upstream.port, gw.admin_port, gw.port);
    done = wait_reload(&gw, done);
    send_and_drop(gw.admin_port, HALF_HEAD, true);
    sleep_ms(300);
    RELOAD_WITH(&gw,
                "server: {listen: \"127.0.0.1:%3$u\", admin_listen: \"127.0.0.1:%2$u\",\n"
                "  max_connections: 500}\n"
                "log: {level: warn}\n" ROUTE,
                upstream.port, gw.admin_port, gw.port);
    CU_ASSERT_TRUE(wait_from(&gw, from, "max_connections(_per_ip) changed", 5000));
    done = wait_reload(&gw, done);
    tail = log_from(&gw, from);
    CU_ASSERT_PTR_NULL(strstr(tail, RESET_LINE));
    CU_ASSERT_PTR_NULL(strstr(tail, "reloaded"));
    CU_ASSERT_PTR_NULL(strstr(tail, " info "));
    check_lines(tail, false, "warn");
    free(tail);

    /* debug: "reloaded" again, and the reason before the 413 as well as the 413. */
    from = log_len(&gw);
    RELOAD_WITH(&gw,
                "server: {listen: \"127.0.0.1:%3$u\", admin_listen: \"127.0.0.1:%2$u\"}\n"
                "log: {level: debug}\n" ROUTE,
                upstream.port, gw.admin_port, gw.port);
    CU_ASSERT_TRUE(wait_from(&gw, from, "reloaded", 5000));
    send_and_drop(gw.admin_port, HUGE_LENGTH, false);
    CU_ASSERT_TRUE(wait_from(&gw, from, ANSWERED_413, 5000));
    tail = log_from(&gw, from);
    CU_ASSERT_PTR_NOT_NULL(strstr(tail, " debug http: Too large value of 'Content-Length' header"));
    check_lines(tail, false, "debug");
    free(tail);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* What real clients provoke from libmicrohttpd: each event exactly one clean line "http: ..."
 * at info, in both formats; and a flood of one kind a line a second, with the count of the
 * others. A reset or a close mid-head on the admin port (the proxied port's strict reader
 * takes heads itself) or mid-body on the proxied port; a head libmicrohttpd cannot read on the
 * admin port. (The proxied port's mid-body aborts are kept to two: a few more in a row leave
 * the next upstream connections failing as "refused", a separate matter.) */
static void test_libmicrohttpd_messages(void)
{
    static const struct {
        bool admin;
        const char *request;
        bool reset;
        const char *line;
    } events[] = {
        {false, PARTIAL_BODY, true, RESET_LINE},
        {false, PARTIAL_BODY, false, CLOSE_LINE},
        {true, HALF_HEAD, true, RESET_LINE},
        {true, HALF_HEAD, false, CLOSE_LINE},
        {true, HUGE_LENGTH, false, ANSWERED_413},
        {true, "GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", false, ANSWERED_505},
    };

    for (int json = 0; json <= 1; json++) {
        const char *format = json ? "json" : "text";
        struct proc gw;
        char *tail, msg[512], level[16], label[96];
        size_t from;

        CU_ASSERT_EQUAL_FATAL(
            start_sluice(&gw,
                         "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
                         "log: {format: %2$s}\n" ROUTE,
                         upstream.port, format),
            0);
        for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
            snprintf(label, sizeof label, "%s: %s", format, events[i].line);
            from = log_len(&gw);
            send_and_drop(events[i].admin ? gw.admin_port : gw.port, events[i].request,
                          events[i].reset);
            check_case(wait_from(&gw, from, events[i].line, 5000), label, "no line");
            sleep_ms(1100); /* anything else it would log, and past the once-a-second */
            tail = log_from(&gw, from);
            check_case(check_lines(tail, json, label) == 1 && occurrences(tail, "http: ") == 1,
                       label, "not one line: %s", tail);
            check_case(find_line(tail, json, "http: ", msg, sizeof msg, level) &&
                           strcmp(msg, events[i].line) == 0 && strcmp(level, "info") == 0,
                       label, "the line: %s", tail);
            free(tail);
        }

        /* Five resets at once: one line; the next, a second on, counts the rest. */
        snprintf(label, sizeof label, "%s: a flood of resets", format);
        from = log_len(&gw);
        reset_at_once(gw.admin_port, 5);
        sleep_ms(1100);
        /* The next line says how many were held back. (A reset can come before
         * libmicrohttpd read anything, and then it has nothing to say: so try a few.) */
        for (int i = 0; i < 5 && !wait_from(&gw, from, " more since the last such line)", 500); i++)
            send_and_drop(gw.admin_port, HALF_HEAD, true);
        check_case(wait_from(&gw, from, " more since the last such line)", 1000), label,
                   "no count of the held back");
        tail = log_from(&gw, from);
        check_case(occurrences(tail, RESET_LINE) == 2 && check_lines(tail, json, label) == 2 &&
                       strstr(tail, RESET_LINE " (and ") != NULL &&
                       strstr(tail, RESET_LINE " (and 0 more") == NULL,
                   label, "lines: %s", tail);
        free(tail);
        CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    }
}

/* The access log line whose path is `path` (the first), parsed; NULL after 3 s without. The
 * caller puts it. */
static struct json_object *access_line(const struct proc *gw, const char *path)
{
    for (int i = 0; i < 150; i++) {
        char *log = read_file(gw->access_path), *save = NULL;
        struct json_object *found = NULL;

        for (char *line = log ? strtok_r(log, "\n", &save) : NULL; line != NULL && !found;
             line = strtok_r(NULL, "\n", &save)) {
            struct json_object *o = json_tokener_parse(line), *v;

            if (o != NULL && json_object_object_get_ex(o, "path", &v) &&
                strcmp(json_object_get_string(v), path) == 0)
                found = o;
            else
                json_object_put(o);
        }
        free(log);
        if (found != NULL)
            return found;
        sleep_ms(20);
    }
    return NULL;
}

/* The string field `name` of the access line of `path` into `out` ("?" when missing). */
static void access_field(const struct proc *gw, const char *path, const char *name, char *out,
                         size_t cap)
{
    struct json_object *o = access_line(gw, path), *v;

    snprintf(out, cap, "?");
    if (o != NULL && json_object_object_get_ex(o, name, &v) &&
        json_object_is_type(v, json_type_string))
        snprintf(out, cap, "%s", json_object_get_string(v));
    json_object_put(o);
}

/* The keys entry of `source` in the access line of `path` into `out` ("?" when missing). */
static void access_key(const struct proc *gw, const char *path, const char *source, char *out,
                       size_t cap)
{
    struct json_object *o = access_line(gw, path), *keys, *v;

    snprintf(out, cap, "?");
    if (o != NULL && json_object_object_get_ex(o, "keys", &keys) &&
        json_object_object_get_ex(keys, source, &v) && json_object_is_type(v, json_type_string))
        snprintf(out, cap, "%s", json_object_get_string(v));
    json_object_put(o);
}

/* GET `target` with `field` (a "Name: value" header, or NULL); the status. */
static long get_with(unsigned port, const char *target, const char *field)
{
    const char *headers[] = {field, NULL};
    struct reply r;
    long status;

    http(port, "GET", target, field ? headers : NULL, NULL, &r);
    status = r.status;
    reply_free(&r);
    return status;
}

static bool is_hash(const char *text)
{
    return strlen(text) == 16 && strspn(text, "0123456789abcdef") == 16;
}

#define CLIENT_CONFIG                                                                              \
    "server:\n  listen: \"127.0.0.1:%5$u\"\n  admin_listen: \"127.0.0.1:%2$u\"\n"                  \
    "  trusted_proxies: [%3$s]\n"                                                                  \
    "  access_log: {path: stdout, client: %4$s}\n"                                                 \
    "routes:\n  - name: r\n    match: {path_prefix: /}\n"                                          \
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"                     \
    "    limit: {algorithm: fixed_window, requests: 1000, per: 1m}\n"

/* client: the address as keys see it (behind a trusted proxy the X-Forwarded-For one, not
 * otherwise), a hash of the key that never shows the key, or "". */
static void test_access_log_client(void)
{
    static const char xff[] = "X-Forwarded-For: 203.0.113.9";
    char a[64], b[64], c[64];
    unsigned admin = free_port(), port = free_port();
    struct proc gw;
    double done;
    char *log;

    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw, CLIENT_CONFIG, upstream.port, admin, "\"127.0.0.1/32\"", "address", port),
        0);
    CU_ASSERT_EQUAL(get_with(gw.port, "/addr/proxied", xff), 200);
    CU_ASSERT_EQUAL(get_with(gw.port, "/addr/direct", NULL), 200);
    access_field(&gw, "/addr/proxied", "client", a, sizeof a);
    access_field(&gw, "/addr/direct", "client", b, sizeof b);
    CU_ASSERT_STRING_EQUAL(a, "203.0.113.9");
    CU_ASSERT_STRING_EQUAL(b, "127.0.0.1");

    done = reloads(&gw);
    RELOAD_WITH(&gw, CLIENT_CONFIG, upstream.port, admin, "\"127.0.0.1/32\"", "hash", port);
    done = wait_reload(&gw, done);
    CU_ASSERT_EQUAL(get_with(gw.port, "/hash/key-1", "X-API-Key: secret-key-one"), 200);
    CU_ASSERT_EQUAL(get_with(gw.port, "/hash/key-2", "X-API-Key: secret-key-one"), 200);
    CU_ASSERT_EQUAL(get_with(gw.port, "/hash/other", "X-API-Key: secret-key-two"), 200);
    access_field(&gw, "/hash/key-1", "client", a, sizeof a);
    access_field(&gw, "/hash/key-2", "client", b, sizeof b);
    access_field(&gw, "/hash/other", "client", c, sizeof c);
    CU_ASSERT_TRUE(is_hash(a) && is_hash(c));
    CU_ASSERT_STRING_EQUAL(a, b); /* one key, one hash */
    CU_ASSERT_STRING_NOT_EQUAL(a, c);
    /* keys: the route's key by its source, the same hash as client; the ip key beside it. */
    access_key(&gw, "/hash/key-1", "header:x-api-key", b, sizeof b);
    CU_ASSERT_STRING_EQUAL(a, b);
    access_key(&gw, "/hash/key-1", "ip", b, sizeof b);
    access_key(&gw, "/hash/other", "ip", c, sizeof c);
    CU_ASSERT_TRUE(is_hash(b) && strcmp(a, b) != 0);
    CU_ASSERT_STRING_EQUAL(b, c); /* one address (the peer, no X-Forwarded-For) */
    log = read_file(gw.access_path);
    CU_ASSERT_PTR_NULL(strstr(log, "secret-key"));
    free(log);

    RELOAD_WITH(&gw, CLIENT_CONFIG, upstream.port, admin, "\"127.0.0.1/32\"", "none", port);
    done = wait_reload(&gw, done);
    CU_ASSERT_EQUAL(get_with(gw.port, "/none", xff), 200);
    access_field(&gw, "/none", "client", a, sizeof a);
    CU_ASSERT_STRING_EQUAL(a, "");
    access_key(&gw, "/none", "ip", a, sizeof a); /* keys are hashes, whatever client says */
    CU_ASSERT_TRUE(is_hash(a));

    /* Without trusted_proxies, a client's X-Forwarded-For is no address of its own. */
    RELOAD_WITH(&gw, CLIENT_CONFIG, upstream.port, admin, "", "address", port);
    wait_reload(&gw, done);
    CU_ASSERT_EQUAL(get_with(gw.port, "/addr/untrusted", xff), 200);
    access_field(&gw, "/addr/untrusted", "client", a, sizeof a);
    CU_ASSERT_STRING_EQUAL(a, "127.0.0.1");
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* The access log's digest of `key`, made here as access_log.h says: a 64-bit BLAKE2b. */
static void expected_hash(const char *key, char out[17])
{
    unsigned char digest[8];

    crypto_generichash(digest, sizeof digest, (const unsigned char *)key, strlen(key), NULL, 0);
    sodium_bin2hex(out, 17, digest, sizeof digest);
}

/* A connection's address key is hashed once and remembered (access_log.h): on one connection
 * from a trusted proxy whose X-Forwarded-For changes from request to request, every line's
 * keys.ip and client hash is still its own request's, never the previous one's. */
static void test_access_log_address_memo(void)
{
    static const char request[] =
        "GET /memo/1 HTTP/1.1\r\nHost: h\r\nX-API-Key: k\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n"
        "GET /memo/2 HTTP/1.1\r\nHost: h\r\nX-API-Key: k\r\nX-Forwarded-For: 198.51.100.4\r\n\r\n"
        "GET /memo/3 HTTP/1.1\r\nHost: h\r\nX-API-Key: k\r\nX-Forwarded-For: 203.0.113.9\r\n"
        "Connection: close\r\n\r\n";
    static const struct {
        const char *path, *client;
    } lines[] = {{"/memo/1", "ip:203.0.113.9"},
                 {"/memo/2", "ip:198.51.100.4"},
                 {"/memo/3", "ip:203.0.113.9"},
                 {"/memo/4", "ip:198.51.100.4"}};
    char answer[4096], seen[64], expected[17];
    unsigned admin = free_port(), port = free_port();
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(sodium_init() >= 0, true);
    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw, CLIENT_CONFIG, upstream.port, admin, "\"127.0.0.1/32\"", "hash", port),
        0);
    CU_ASSERT_EQUAL(raw_exchange(gw.port, request, sizeof request - 1, answer, sizeof answer, 3000),
                    200);
    CU_ASSERT_EQUAL(get_with(gw.port, "/memo/4", "X-Forwarded-For: 198.51.100.4"), 200);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        expected_hash(lines[i].client, expected);
        access_key(&gw, lines[i].path, "ip", seen, sizeof seen);
        check_case(strcmp(seen, expected) == 0, lines[i].path, "keys.ip %s, expected %s", seen,
                   expected);
    }
    /* The route's key is the header's: client hashes it, not the address. */
    expected_hash("header:k", expected);
    access_field(&gw, "/memo/2", "client", seen, sizeof seen);
    CU_ASSERT_STRING_EQUAL(seen, expected);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* limit: the limit that denied a request, of two on a route, whichever place it has; on a
 * dry_run route the one that would have; "" for a request allowed. */
static void test_access_log_limit(void)
{
    static const struct {
        const char *path;
        long status;
        const char *decision, *limit;
    } cases[] = {
        {"/first/1", 200, "allowed", ""},  {"/first/2", 429, "denied", "tight_first"},
        {"/second/1", 200, "allowed", ""}, {"/second/2", 429, "denied", "tight_second"},
        {"/dry/1", 200, "allowed", ""},    {"/dry/2", 200, "dry_run_denied", "trial"},
    };
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw,
                     "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
                     "  - name: first\n    match: {path_prefix: /first/}\n"
                     "    upstream: \"http://127.0.0.1:%1$u\"\n    limit:\n"
                     "      - {name: tight_first, algorithm: fixed_window, requests: 1, per: 1m}\n"
                     "      - {name: loose, algorithm: fixed_window, requests: 100, per: 1m}\n"
                     "  - name: second\n    match: {path_prefix: /second/}\n"
                     "    upstream: \"http://127.0.0.1:%1$u\"\n    limit:\n"
                     "      - {name: loose, algorithm: fixed_window, requests: 100, per: 1m}\n"
                     "      - {name: tight_second, algorithm: fixed_window, requests: 1, per: 1m}\n"
                     "  - name: dry\n    match: {path_prefix: /dry/}\n"
                     "    upstream: \"http://127.0.0.1:%1$u\"\n    dry_run: true\n    limit:\n"
                     "      - {name: roomy, algorithm: fixed_window, requests: 100, per: 1m}\n"
                     "      - {name: trial, algorithm: fixed_window, requests: 1, per: 1m}\n",
                     upstream.port),
        0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char decision[32], limit[80];

        check_case(get_with(gw.port, cases[i].path, NULL) == cases[i].status, cases[i].path,
                   "status");
        access_field(&gw, cases[i].path, "decision", decision, sizeof decision);
        access_field(&gw, cases[i].path, "limit", limit, sizeof limit);
        check_case(strcmp(decision, cases[i].decision) == 0 && strcmp(limit, cases[i].limit) == 0,
                   cases[i].path, "decision %s, limit \"%s\"", decision, limit);
    }
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* user_agent: the field JSON-escaped, at most 256 bytes of it, cut where no UTF-8 character
 * is split; "" without one. Bytes that are not UTF-8 (obs-text, which HTTP allows in a field
 * value) are logged as U+FFFD, so that the line stays valid JSON. */
static void test_access_log_user_agent(void)
{
    struct {
        const char *path;
        char field[700];
        char want[300];
    } cases[8] = {
        {"/ua/plain", "User-Agent: curl/7.88.1 (x86_64) \xc3\xa9", "curl/7.88.1 (x86_64) \xc3\xa9"},
        {"/ua/escaped", "User-Agent: a \"quoted\"\tback\\slash", "a \"quoted\"\tback\\slash"},
        {"/ua/none", "", ""},
        {"/ua/latin1", "User-Agent: caf\xe9 \xc3", "caf\xef\xbf\xbd \xef\xbf\xbd"},
    };
    size_t n = 4;
    struct proc gw;

    /* 300 bytes: the first 256. */
    cases[n].path = "/ua/long";
    snprintf(cases[n].field, sizeof cases[n].field, "User-Agent: %0300d", 7);
    snprintf(cases[n].want, sizeof cases[n].want, "%0256d", 0);
    n++;
    /* 255 bytes and a two-byte character: the character would be split, so it goes. */
    cases[n].path = "/ua/split";
    snprintf(cases[n].field, sizeof cases[n].field, "User-Agent: %0255d\xc3\xa9", 0);
    snprintf(cases[n].want, sizeof cases[n].want, "%0255d", 0);
    n++;
    /* 254 and the character: 256 exactly, whole. */
    cases[n].path = "/ua/whole";
    snprintf(cases[n].field, sizeof cases[n].field, "User-Agent: %0254d\xc3\xa9", 0);
    snprintf(cases[n].want, sizeof cases[n].want, "%0254d\xc3\xa9", 0);
    n++;
    /* 200 quotes escape to 400 bytes: 128 of them fit the 256. */
    cases[n].path = "/ua/quotes";
    snprintf(cases[n].field, sizeof cases[n].field, "User-Agent: ");
    memset(cases[n].field + 12, '"', 200);
    memset(cases[n].want, '"', 128);
    n++;

    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw, "server: {listen: \"127.0.0.1:0\"}\n" ROUTE, upstream.port), 0);
    for (size_t i = 0; i < n; i++) {
        char got[700];

        get_with(gw.port, cases[i].path, cases[i].field[0] ? cases[i].field : NULL);
        access_field(&gw, cases[i].path, "user_agent", got, sizeof got);
        check_case(strcmp(got, cases[i].want) == 0, cases[i].path, "user_agent \"%s\"", got);
    }
    /* Only the log line says U+FFFD: the field goes upstream as the client sent it. */
    {
        const char *headers[] = {"User-Agent: caf\xe9 \xc3", NULL};
        struct reply r;

        http(gw.port, "GET", "/ua/upstream", headers, NULL, &r);
        check_case(r.status == 200 && r.body != NULL &&
                       strstr(r.body, "\nheader User-Agent: caf\xe9 \xc3\n") != NULL,
                   "/ua/upstream", "status %ld; the upstream saw: %.300s", r.status,
                   r.body ? r.body : "");
        reply_free(&r);
    }
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

static bool has_ipv6_loopback(void)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;

    if (fd >= 0)
        close(fd);
    return ok;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* --healthcheck -c FILE asks /healthz on FILE's admin_listen (a wildcard on loopback): 0 while
 * sluice runs, 1 once it stopped; 1 and a clear message without admin_listen; the config's
 * own problems at FILE:LINE:COL; no URL and no file is a usage error. */
static void test_healthcheck_from_config(void)
{
    char yaml[512], args[128], out[2048], path[64];
    unsigned admin = free_port();
    struct proc gw;

    scratch_path(path, sizeof path, "health.yaml");
    snprintf(args, sizeof args, "--healthcheck -c %s", path);
    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw,
                     "server: {listen: \"127.0.0.1:0\", admin_listen: \"0.0.0.0:%2$u\"}\n" ROUTE,
                     upstream.port, admin),
        0);
    CU_ASSERT_EQUAL(gw.admin_port, admin);
    snprintf(out, sizeof out, "--healthcheck -c %s", gw.config_path);
    CU_ASSERT_EQUAL(run_sluice(out, out, sizeof out), 0);
    snprintf(
        yaml, sizeof yaml,
        "server: {listen: \"127.0.0.1:1\", admin_listen: \"127.0.0.1:%u\"}\nroutes:\n  - name: r\n"
        "    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:1\"\n",
        admin);
    write_text(path, yaml);
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);

    /* An IPv6 wildcard is asked on ::1 (where the host has IPv6 at all). */
    if (has_ipv6_loopback()) {
        CU_ASSERT_EQUAL_FATAL(start_sluice(&gw,
                                           "server: {listen: \"127.0.0.1:0\", "
                                           "admin_listen: \"[::]:%2$u\"}\n" ROUTE,
                                           upstream.port, admin),
                              0);
        snprintf(out, sizeof out, "--healthcheck -c %s", gw.config_path);
        CU_ASSERT_EQUAL(run_sluice(out, out, sizeof out), 0);
        CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    }

    /* Nothing listens there now. */
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "sluice: healthcheck http://127.0.0.1:"));

    write_text(path, "routes:\n  - name: r\n    match: {path_prefix: /}\n"
                     "    upstream: \"http://127.0.0.1:1\"\n");
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "sets no server.admin_listen"));

    write_text(path, "server: {admin_listen: nowhere}\nroutes:\n  - name: r\n"
                     "    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:1\"\n");
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-health.yaml:1:24: admin_listen:"));
    unlink(path);

    CU_ASSERT_EQUAL(run_sluice("--healthcheck", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--healthcheck -c FILE"));
}

void register_logs_tests(void)
{
    CU_pSuite s = add_suite("logs");

    add_test(s, "the process log in text and json, escaped", test_process_log_formats);
    add_test(s, "log.level filters, and changes on reload", test_level_filtering);
    add_test(s, "libmicrohttpd's messages: one clean line each, rate-limited",
             test_libmicrohttpd_messages);
    add_test(s, "access log client: address, hash, none", test_access_log_client);
    add_test(s, "access log: an address key's digest remembered per connection, never stale",
             test_access_log_address_memo);
    add_test(s, "access log limit: the one that denied", test_access_log_limit);
    add_test(s, "access log user_agent: escaped, cut at 256 bytes", test_access_log_user_agent);
    add_test(s, "--healthcheck -c FILE asks admin_listen's /healthz", test_healthcheck_from_config);
}
