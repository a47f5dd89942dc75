/* The command line and the process: --check, --version, --help, a taken port, SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    fputs(text, f);
    fclose(f);
}

static void test_check(void)
{
    char out[4096], bad[64], args[128];

    CU_ASSERT_EQUAL(run_sluice("--check -c config/sluice.yaml", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "OK"));
    scratch_path(bad, sizeof bad, "bad.yaml");
    write_file(bad, "server:\n  listen: nowhere\n  colour: red\n"
                    "routes:\n  - name: a\n    match: {path_prefix: /}\n"
                    "    upstream: \"http://127.0.0.1:1\"\n"
                    "    limit: {algorithm: magic, requests: 1, per: 1s}\n");
    snprintf(args, sizeof args, "--check -c %s", bad);
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-bad.yaml:2:11: listen:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-bad.yaml:3:3: server: unknown key"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-bad.yaml:8:24: algorithm: unknown"));
    /* Running on an invalid file fails the same way, before listening. */
    snprintf(args, sizeof args, "-c %s", bad);
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-bad.yaml:2:11:"));
    unlink(bad);
    CU_ASSERT_EQUAL(run_sluice("--check -c /nonexistent.yaml", out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cannot read"));
}

/* What is legal but surely unintended is printed at its place, and --check still passes;
 * a directory named by -c says so. */
static void test_check_warns(void)
{
    char out[4096], shadow[64], args[128];

    write_file(scratch_path(shadow, sizeof shadow, "shadow.yaml"),
               "routes:\n  - name: all\n    match: {path_prefix: /api/}\n"
               "    upstream: \"http://127.0.0.1:1\"\n"
               "  - name: reads\n    match: {path_prefix: /api/, methods: [GET]}\n"
               "    upstream: \"http://127.0.0.1:1\"\n");
    snprintf(args, sizeof args, "--check -c %s", shadow);
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "OK, 2 routes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-shadow.yaml:6:12: warning: route \"reads\" "
                                       "can never match: route \"all\" (line 3)"));
    unlink(shadow);
    CU_ASSERT_EQUAL(run_sluice("--check -c config/sluice.yaml", out, sizeof out), 0);
    CU_ASSERT_PTR_NULL(strstr(out, "warning:"));
    CU_ASSERT_EQUAL(run_sluice("--check -c config", out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "config: is a directory; name the config file in it"));
}

/* The pid of the only child of `parent`, once it has one (within 5 s); 0 if none came. */
static pid_t only_child(pid_t parent)
{
    char path[64];
    int child = 0;

    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
    for (int i = 0; i < 500 && child == 0; i++) {
        FILE *f = fopen(path, "r");

        if (f == NULL || fscanf(f, "%d", &child) != 1)
            child = 0;
        if (f != NULL)
            fclose(f);
        if (child == 0)
            usleep(10000);
    }
    return (pid_t)child;
}

/* The demo upstream is PID 1 of its container, where a signal left at its default action is
 * ignored: `docker stop` must end it at once, not after the stop timeout. Run here as PID 1 of
 * a PID namespace of its own (unshare), and sent SIGTERM from outside it as the runtime does.
 * Ignored, the signal would leave it running for ever: that it exits at all, within docker's
 * stop timeout of 10 s, is the check (it takes milliseconds). */
static void test_demo_upstream_stops_as_pid_1(void)
{
    int out[2], status = 0;
    pid_t unshare, upstream_pid;
    char line[128] = "";
    bool exited = false;
    double start;
    FILE *f;

    CU_ASSERT_EQUAL_FATAL(pipe(out), 0);
    unshare = fork();
    if (unshare == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        execlp("unshare", "unshare", "--user", "--map-root-user", "--pid", "--fork",
               "build/test_upstream", "127.0.0.1:0", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    f = fdopen(out[0], "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    CU_ASSERT_EQUAL(strncmp(line, "listening on 127.0.0.1:", 23), 0);
    upstream_pid = only_child(unshare);
    CU_ASSERT(upstream_pid > 0);
    start = seconds_now();
    if (upstream_pid > 0)
        kill(upstream_pid, SIGTERM);
    while (!exited && seconds_now() - start < 10) {
        exited = waitpid(unshare, &status, WNOHANG) == unshare;
        if (!exited)
            sleep_ms(10);
    }
    if (!exited) { /* never left running, even when the test fails */
        kill(upstream_pid > 0 ? upstream_pid : unshare, SIGKILL);
        waitpid(unshare, &status, 0);
    }
    check_case(exited, "SIGTERM to PID 1", "still running 10 s after it");
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    fclose(f);
}

static void test_version_help_usage(void)
{
    char out[4096];

    CU_ASSERT_EQUAL(run_sluice("--version", out, sizeof out), 0);
    CU_ASSERT_EQUAL(strncmp(out, "sluice ", 7), 0);
    CU_ASSERT_EQUAL(run_sluice("--help", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--check"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-c, --config FILE"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Exit codes:"));
    CU_ASSERT_EQUAL(run_sluice("", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_sluice("--bogus", out, sizeof out), 2);
}

static void test_healthcheck(void)
{
    struct proc gw;
    char args[128], out[1024];

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw,
                                       "server: {listen: \"127.0.0.1:0\", "
                                       "admin_listen: \"127.0.0.1:0\"}\nroutes:\n"
                                       "  - name: a\n    match: {path_prefix: /}\n"
                                       "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                       upstream.port),
                          0);
    snprintf(args, sizeof args, "--healthcheck http://127.0.0.1:%u/healthz", gw.admin_port);
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "--healthcheck http://127.0.0.1:%u/nothing", gw.admin_port);
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 1);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    CU_ASSERT_EQUAL(run_sluice("--healthcheck http://127.0.0.1:1/healthz", out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "healthcheck"));
}

static void test_port_taken(void)
{
    struct proc first;
    char yaml[512], out[4096], taken[64], args[128];

    CU_ASSERT_EQUAL_FATAL(start_sluice(&first,
                                       "server: {listen: \"127.0.0.1:0\"}\nroutes:\n"
                                       "  - name: a\n    match: {path_prefix: /}\n"
                                       "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                       upstream.port),
                          0);
    snprintf(yaml, sizeof yaml,
             "server: {listen: \"127.0.0.1:%u\"}\nroutes:\n  - name: a\n"
             "    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:1\"\n",
             first.port);
    write_file(scratch_path(taken, sizeof taken, "taken.yaml"), yaml);
    snprintf(args, sizeof args, "-c %s", taken);
    CU_ASSERT_EQUAL(run_sluice(args, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cannot listen on 127.0.0.1:"));
    unlink(taken);
    CU_ASSERT_EQUAL(stop_sluice(&first, 5000), 0);
}

struct slow_call {
    unsigned port;
    long status;
    atomic_bool done;
};

static void *slow_request(void *arg)
{
    struct slow_call *call = arg;
    struct reply r;

    http(call->port, "GET", "/slow?ms=3000", NULL, NULL, &r);
    call->status = r.status;
    reply_free(&r);
    atomic_store(&call->done, true);
    return NULL;
}

/* Whether the listener on `port` refuses connections before `call` has been answered: asked
 * every 10 ms. */
static bool refused_while_in_flight(unsigned port, struct slow_call *call)
{
    while (!atomic_load(&call->done)) {
        int fd = raw_connect(port);

        if (fd < 0)
            return !atomic_load(&call->done);
        close(fd);
        sleep_ms(10);
    }
    return false;
}

/* SIGTERM: the listener closes at once, while a request in flight (3 s at the upstream) goes
 * on and completes; exit 0. Each step waits for the one before it: the request has reached
 * the upstream before the signal, and the listener must refuse before that request ends. */
static void test_sigterm_drains(void)
{
    struct proc gw;
    struct slow_call call = {0};
    unsigned long requests, before, connections;
    pthread_t thread;
    char *log;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw,
                                       "server: {listen: \"127.0.0.1:0\", drain_timeout: 10s}\n"
                                       "routes:\n  - name: a\n    match: {path_prefix: /}\n"
                                       "    upstream: \"http://127.0.0.1:%1$u\"\n",
                                       upstream.port),
                          0);
    upstream_stats(&before, &connections);
    call.port = gw.port;
    pthread_create(&thread, NULL, slow_request, &call);
    do { /* until the upstream has it */
        sleep_ms(10);
        upstream_stats(&requests, &connections);
    } while (requests == before && !atomic_load(&call.done));
    kill(gw.pid, SIGTERM);
    check_case(refused_while_in_flight(gw.port, &call), "after SIGTERM",
               "the listener still accepted once the request in flight had been answered");
    pthread_join(thread, NULL);
    CU_ASSERT_EQUAL(call.status, 200);
    log = read_log(&gw);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "draining"));
    free(log);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 10000), 0);
}

void register_cli_tests(void)
{
    CU_pSuite s = add_suite_with("cli", NULL, NULL);

    add_test(s, "--check names every problem", test_check);
    add_test(s, "--check prints warnings and passes; -c DIR", test_check_warns);
    add_test(s, "the demo upstream stops on SIGTERM as PID 1", test_demo_upstream_stops_as_pid_1);
    add_test(s, "--version, --help and bad usage", test_version_help_usage);
    add_test(s, "a taken port is a clear error", test_port_taken);
    add_test(s, "--healthcheck", test_healthcheck);
    add_test(s, "SIGTERM drains requests in flight", test_sigterm_drains);
}
