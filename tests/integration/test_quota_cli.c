/* `sluice quota` (gateway/ops/quota_cli.h) against a real gateway, and keys of any bytes:
 * one that needs escaping in a URL is found through the CLI's %-escaping and a raw GET, and a
 * change is logged by the key's digest, never by the key; each of the CLI's exit codes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/quota_calls.h"

#define ODD_KEY     "a b&c=d/\xc3\xa9+%"
#define ODD_ESCAPED "a%20b%26c%3Dd%2F%C3%A9%2B%25"

/* `sluice quota ACTION -c CONFIG ARGS`: its exit code, its output in `out`. */
static int quota_cli(const char *action, const char *config, const char *args, char *out,
                     size_t cap)
{
    char line[512];

    snprintf(line, sizeof line, "quota %s -c %s %s", action, config, args);
    return run_sluice(line, out, cap);
}

/* The digest the access log gives the API key of the first request for `path`, into `out`. */
static void access_log_digest(const struct proc *gw, const char *path, char *out, size_t cap)
{
    char *line = access_log_line(gw, path);
    const char *at = line ? strstr(line, "\"header:x-api-key\":") : NULL;

    snprintf(out, cap, "(none)");
    if (at != NULL)
        snprintf(out, cap, "%.18s", at + strlen("\"header:x-api-key\":"));
    free(line);
}

/* A key that needs escaping, sent as a header, is found by the CLI (which %-escapes it) and
 * by a raw call, as the client the access log names; a reset of it is logged by digest and
 * counted, and neither log holds the key. */
static void test_odd_key_and_change_log(void)
{
    char out[4096], client[64], logged[64], line[256];
    char *log, *access;
    struct proc gw;
    struct reply r;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, free_port()), 0);
    CU_ASSERT_EQUAL(send_requests(&gw.port, 1, "/fixed_window/odd", ODD_KEY, 2), 2);
    CU_ASSERT_EQUAL(quota_cli("show", gw.config_path,
                              "--route fixed_window --key '" ODD_KEY "' --format json", out,
                              sizeof out),
                    0);
    check_case(limit_number(out, "hourly", "remaining") == QUOTA - 2, "the CLI", "%s", out);
    CU_ASSERT_EQUAL(as_operator(&gw, "GET", "/quota?route=fixed_window&key=" ODD_ESCAPED, &r), 200);
    check_case(limit_number(r.body, "hourly", "remaining") == QUOTA - 2, "raw", "%s", r.body);
    if (!json_at(r.body, NULL, "client", client, sizeof client))
        snprintf(client, sizeof client, "(none)");
    reply_free(&r);
    access_log_digest(&gw, "/fixed_window/odd", logged, sizeof logged);
    check_case(strcmp(client, logged) == 0, "digest", "/quota %s, the access log %s", client,
               logged);

    CU_ASSERT_EQUAL(as_operator(&gw, "DELETE", "/quota?route=fixed_window&key=" ODD_ESCAPED, &r),
                    200);
    reply_free(&r);
    snprintf(line, sizeof line,
             "quota reset: route=fixed_window limits=hourly client=%.16s from=127.0.0.1 "
             "operator=it-operator",
             client + 1);
    check_case(wait_for_log(&gw, line, 1, 2000), "the change log", "no \"%s\"", line);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"reset\"}"), 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_quota_changes_total{action=\"grant\"}"), 0);
    expect_passes(gw.port, "/fixed_window/odd", ODD_KEY, QUOTA, "after the reset");
    log = read_log(&gw);
    access = read_file(gw.access_path);
    CU_ASSERT_EQUAL(occurrences(log, ODD_KEY) + occurrences(access, ODD_KEY), 0);
    CU_ASSERT_EQUAL(occurrences(log, ODD_ESCAPED) + occurrences(access, ODD_ESCAPED), 0);
    CU_ASSERT_EQUAL(occurrences(log, "a b&c") + occurrences(access, "a b&c"), 0);
    free(log);
    free(access);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Writes a config for the CLI at `path`: admin_listen at `admin_port` (none when 0), then
 * `server` (more of the server mapping). */
static void write_cli_config(const char *path, unsigned admin_port, const char *server)
{
    char admin[64] = "";
    FILE *f = fopen(path, "w");

    if (admin_port != 0)
        snprintf(admin, sizeof admin, ", admin_listen: \"127.0.0.1:%u\"", admin_port);
    fprintf(f,
            "server: {listen: \"127.0.0.1:0\"%s%s}\nroutes:\n  - name: r\n"
            "    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:1\"\n",
            admin, server);
    fclose(f);
}

/* `sluice quota`: the table and the JSON; each exit code. */
static void test_cli(void)
{
    char out[4096], other[64];
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, free_port()), 0);
    CU_ASSERT_EQUAL(send_requests(&gw.port, 1, "/pair/x", "cli-key", 2), 2);
    CU_ASSERT_EQUAL(
        quota_cli("show", gw.config_path, "--route pair --key cli-key", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "first"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "second"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "by_ip"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "remaining 3"));
    CU_ASSERT_EQUAL(quota_cli("grant", gw.config_path,
                              "--route pair --key cli-key --limit second --n 1 --format json", out,
                              sizeof out),
                    0);
    check_case(limit_number(out, "second", "remaining") == 4 &&
                   json_is(out, NULL, "changed", "[\"second\"]"),
               "grant --format json", "%s", out);
    CU_ASSERT_EQUAL(quota_cli("show", gw.config_path,
                              "--route pair --key cli-key --ip 127.0.0.1 --format json", out,
                              sizeof out),
                    0);
    CU_ASSERT_EQUAL(limit_number(out, "by_ip", "remaining"), 8);

    scratch_path(other, sizeof other, "quota-cli.yaml");
    write_cli_config(other, gw.admin_port, ", admin_token: \"" OTHER_TOKEN "\"");
    CU_ASSERT_EQUAL(quota_cli("show", other, "--route pair --key cli-key", out, sizeof out), 4);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_admin_unauthorized_total"), 1);
    CU_ASSERT_EQUAL(quota_cli("show", gw.config_path, "--route nowhere --key k", out, sizeof out),
                    3);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no route is called"));
    CU_ASSERT_EQUAL(quota_cli("reset", gw.config_path, "--route concurrency --key k --limit hourly",
                              out, sizeof out),
                    3);
    CU_ASSERT_EQUAL(
        quota_cli("show", gw.config_path, "--route pair --key k --bogus", out, sizeof out), 2);
    CU_ASSERT_EQUAL(
        quota_cli("frobnicate", gw.config_path, "--route pair --key k", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_sluice("quota show --route pair --key k", out, sizeof out), 2);
    write_cli_config(other, 0, ", admin_token: \"" TOKEN "\"");
    CU_ASSERT_EQUAL(quota_cli("show", other, "--route pair --key k", out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "admin_listen"));
    write_cli_config(other, gw.admin_port, "");
    CU_ASSERT_EQUAL(quota_cli("show", other, "--route pair --key k", out, sizeof out), 1);
    CU_ASSERT_EQUAL(quota_cli("show", "/nonexistent.yaml", "--route pair --key k", out, sizeof out),
                    1);
    write_cli_config(other, free_port(), ", admin_token: \"" TOKEN "\""); /* none listens */
    CU_ASSERT_EQUAL(quota_cli("show", other, "--route pair --key k", out, sizeof out), 5);
    unlink(other);
    CU_ASSERT_EQUAL(remaining(&gw, "pair", "cli-key", "first"), 3); /* only the grant changed */
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A listening socket on loopback that never answers, its port in `*port`; -1 when none. */
static int silent_listener(unsigned *port)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(addr.sin_port);
    return fd;
}

/* How many connections `listener` (non-blocking) has waiting; they are closed. */
static int connections_to(int listener)
{
    int n = 0, fd;

    while ((fd = accept(listener, NULL, NULL)) >= 0) {
        close(fd);
        n++;
    }
    return n;
}

/* `sluice quota` goes straight to the admin listener whatever proxy its environment names
 * (http_proxy, HTTP_PROXY, ALL_PROXY and their kin, no no_proxy): it succeeds and the "proxy",
 * a socket that never answers, sees no connection, so it never saw the admin token or the key.
 * curl given the same environment does go to the proxy: the environment is one that works. */
static void test_cli_ignores_proxies(void)
{
    char env[512], command[1024], out[4096];
    unsigned proxy_port = 0;
    int proxy = silent_listener(&proxy_port);
    struct proc gw;

    CU_ASSERT_FATAL(proxy >= 0);
    snprintf(env, sizeof env,
             "env -u no_proxy -u NO_PROXY http_proxy=http://127.0.0.1:%1$u "
             "HTTP_PROXY=http://127.0.0.1:%1$u https_proxy=http://127.0.0.1:%1$u "
             "HTTPS_PROXY=http://127.0.0.1:%1$u ALL_PROXY=http://127.0.0.1:%1$u "
             "all_proxy=http://127.0.0.1:%1$u",
             proxy_port);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, quota_memory_config, upstream.port, free_port()), 0);
    CU_ASSERT_EQUAL(send_requests(&gw.port, 1, "/fixed_window/x", "behind-proxy", 2), 2);
    snprintf(command, sizeof command,
             "%s %s quota show -c %s --route fixed_window --key behind-proxy --format json", env,
             sluice_binary(), gw.config_path);
    check_case(run_command(command, out, sizeof out) == 0, "sluice quota", "%s", out);
    CU_ASSERT_EQUAL(limit_number(out, "hourly", "remaining"), QUOTA - 2);
    CU_ASSERT_EQUAL(connections_to(proxy), 0);

    snprintf(command, sizeof command, "%s curl -s -m 1 http://127.0.0.1:%u/healthz", env,
             gw.admin_port);
    run_command(command, out, sizeof out);
    check_case(connections_to(proxy) == 1, "curl, the control",
               "curl did not go through the proxy: the environment does not name it");
    close(proxy);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

void register_quota_cli_tests(void)
{
    CU_pSuite s = add_suite("quota cli");

    add_test(s, "a key of any bytes; the change log names no key", test_odd_key_and_change_log);
    add_test(s, "sluice quota: table, JSON and exit codes", test_cli);
    add_test(s, "sluice quota never goes through a proxy", test_cli_ignores_proxies);
}
