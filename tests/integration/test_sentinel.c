/* Redis Sentinel (limiter.redis.sentinels and master; gateway/store/store_sentinel.h) against
 * real servers started here on free loopback ports: a master, a replica of it (--replicaof) and
 * three sentinels watching it (quorum 2, down-after-milliseconds 1000, failover-timeout 5000).
 * A sentinel that is down is passed over for the next, a master name the sentinels do not know
 * fails the store saying so, a replica a stale sentinel names as the master is never written
 * to (ROLE), and a failover under load is followed: with on_store_error: deny
 * the fleet of two replicas admits its quota and not one request more, and shares the count
 * again, through the promoted replica, within 15 s of the master's end.
 *
 * The suite starts the servers once; the failover test changes who is master, so it runs last. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define MASTER_NAME "sluice-it"
#define N_SENTINELS 3
#define QUOTA       100 /* the config's requests: */
#define STR(x)      #x
#define TEXT(x)     STR(x)

static struct {
    struct redis master, replica;
    struct redis sentinels[N_SENTINELS]; /* pid and port; started with --sentinel */
    char dir[64];                        /* their configs and logs */
} cluster;

/* Forks `argv` (redis-server ...) with its output in `log` (NULL: /dev/null); the pid, or -1. */
static pid_t spawn(const char *const *argv, const char *log)
{
    pid_t pid = fork();

    if (pid == 0) {
        int out = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);

        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* What redis-cli answers on `port` to `args`, into `out`; its exit code. */
static int ask(unsigned port, const char *args, char *out, size_t cap)
{
    char command[256];

    snprintf(command, sizeof command, "redis-cli -p %u %s", port, args);
    return run_command(command, out, cap);
}

/* Waits up to `ms` for redis-cli's answer on `port` to `args` to hold `want`. */
static bool answer_holds(unsigned port, const char *args, const char *want, int ms)
{
    char out[4096];

    for (int waited = 0; waited <= ms; waited += 50) {
        if (ask(port, args, out, sizeof out) == 0 && strstr(out, want) != NULL)
            return true;
        sleep_ms(50);
    }
    return false;
}

/* The replica of the master, once its link to it is up. */
static int start_replica(void)
{
    char port[16], master_port[16], log[96];
    const char *argv[] = {"redis-server",
                          "--port",
                          port,
                          "--bind",
                          "127.0.0.1",
                          "--save",
                          "",
                          "--appendonly",
                          "no",
                          "--replicaof",
                          "127.0.0.1",
                          master_port,
                          "--enable-debug-command",
                          "local",
                          "--dir", /* where it keeps the master's RDB it loads */
                          cluster.dir,
                          NULL};

    cluster.replica.port = free_port();
    snprintf(port, sizeof port, "%u", cluster.replica.port);
    snprintf(master_port, sizeof master_port, "%u", cluster.master.port);
    snprintf(log, sizeof log, "%s/replica.log", cluster.dir);
    cluster.replica.pid = spawn(argv, log);
    if (!answer_holds(cluster.replica.port, "INFO replication", "master_link_status:up", 5000)) {
        fprintf(stderr, "the replica did not link to its master (see %s)\n", log);
        return -1;
    }
    return 0;
}

/* Sentinel `i`, on a config file of its own (a sentinel rewrites it). */
static int start_sentinel(int i)
{
    char path[96], log[96];
    const char *argv[] = {"redis-server", path, "--sentinel", NULL};
    struct redis *s = &cluster.sentinels[i];
    FILE *f;

    s->port = free_port();
    snprintf(path, sizeof path, "%s/sentinel-%d.conf", cluster.dir, i);
    snprintf(log, sizeof log, "%s/sentinel-%d.log", cluster.dir, i);
    f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f,
            "port %u\nbind 127.0.0.1\ndir %s\n"
            "sentinel monitor " MASTER_NAME " 127.0.0.1 %u 2\n"
            "sentinel down-after-milliseconds " MASTER_NAME " 1000\n"
            "sentinel failover-timeout " MASTER_NAME " 5000\n",
            s->port, cluster.dir, cluster.master.port);
    fclose(f);
    s->pid = spawn(argv, log);
    return answer_holds(s->port, "PING", "PONG", 2000) ? 0 : -1;
}

/* Waits until every sentinel knows the master, its replica and the two other sentinels: only
 * then can they agree that it is down and elect one of them to promote the replica. */
static bool sentinels_ready(int ms)
{
    char want[160];

    snprintf(want, sizeof want,
             "name=" MASTER_NAME ",status=ok,address=127.0.0.1:%u,slaves=1,"
             "sentinels=3",
             cluster.master.port);
    for (int i = 0; i < N_SENTINELS; i++)
        if (!answer_holds(cluster.sentinels[i].port, "INFO sentinel", want, ms)) {
            fprintf(stderr, "sentinel %d does not see %s\n", i, want);
            return false;
        }
    return true;
}

static int clean(void);

/* CUnit does not clean up after a setup that failed: what was started is stopped here. */
static int init(void)
{
    scratch_path(cluster.dir, sizeof cluster.dir, "sentinel");
    if (mkdir(cluster.dir, 0700) != 0 || start_redis(&cluster.master) != 0 || start_replica() != 0)
        goto fail;
    for (int i = 0; i < N_SENTINELS; i++)
        if (start_sentinel(i) != 0)
            goto fail;
    if (sentinels_ready(15000))
        return 0;
fail:
    clean();
    return -1;
}

static int clean(void)
{
    char command[128], out[64];
    const char *keep = getenv("SLUICE_IT_KEEP");

    for (int i = 0; i < N_SENTINELS; i++)
        stop_redis(&cluster.sentinels[i]);
    stop_redis(&cluster.replica);
    stop_redis(&cluster.master);
    if (keep == NULL || keep[0] == '\0') {
        snprintf(command, sizeof command, "rm -rf '%s'", cluster.dir);
        run_command(command, out, sizeof out);
    }
    return 0;
}

/* on_store_error: deny, so that an answer from the shared store is a 200 and a failure is a
 * 429: fixed_window QUOTA an hour per API key. Arguments: the upstream's port, the sentinels'
 * list (its items), the master's name and the prefix of the keys in Redis (one a test). */
static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
    "limiter:\n  store: redis\n  on_store_error: deny\n"
    "  redis: {sentinels: [%2$s], master: \"%3$s\", timeout: 200ms, prefix: \"%4$s:\"}\n"
    "routes:\n"
    "  - name: api\n    match: {path_prefix: /}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    key: \"header:X-API-Key\"\n"
    "    limit: {name: hourly, algorithm: fixed_window, requests: " TEXT(QUOTA) ", per: 1h}\n";

/* The sentinels' list for the config: `closed` first when it is not 0 (a port where nothing
 * listens), then the running sentinels. */
static const char *sentinel_list(unsigned closed)
{
    static char list[160];
    size_t len = 0;

    list[0] = '\0';
    if (closed != 0)
        len += (size_t)snprintf(list, sizeof list, "\"127.0.0.1:%u\", ", closed);
    for (int i = 0; i < N_SENTINELS; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s\"127.0.0.1:%u\"",
                                i > 0 ? ", " : "", cluster.sentinels[i].port);
    return list;
}

/* GET /x on `gw` with API key `key`; its status, and in `*remaining` the RateLimit field's
 * r= (-1 without one). */
static long get(const struct proc *gw, const char *key, long *remaining)
{
    char key_header[96];
    const char *headers[] = {key_header, NULL};
    struct reply r;
    const char *field, *at;
    long status;

    snprintf(key_header, sizeof key_header, "X-API-Key: %s", key);
    http(gw->port, "GET", "/x", headers, NULL, &r);
    status = r.status;
    field = header(&r, "RateLimit");
    at = field != NULL ? strstr(field, ";r=") : NULL;
    *remaining = at != NULL ? strtol(at + 3, NULL, 10) : -1;
    reply_free(&r);
    return status;
}

/* The keys on `port` (one a line) under `prefix`, into `out`. */
static void keys_under(unsigned port, const char *prefix, char *out, size_t cap)
{
    char args[128];

    snprintf(args, sizeof args, "--scan --pattern '%s:*'", prefix);
    ask(port, args, out, cap);
}

/* A first sentinel that is down (nothing listens on its port) is passed over: the next is
 * asked, and the limit is kept in the master without one failure. */
static void test_first_sentinel_down(void)
{
    struct proc gw;
    char keys[512];
    long remaining;
    int passed = 0;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, config, upstream.port, sentinel_list(free_port()),
                                       MASTER_NAME, "first-down"),
                          0);
    for (int i = 0; i < 5; i++) {
        long status = get(&gw, "first-down", &remaining);

        passed += status == 200;
        check_case(status != 200 || remaining == QUOTA - 1 - i, "first sentinel down",
                   "request %d: RateLimit r=%ld, expected %d", i + 1, remaining, QUOTA - 1 - i);
    }
    check_case(passed == 5, "first sentinel down", "%d of 5 passed (deny on a store failure)",
               passed);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 0);
    CU_ASSERT_EQUAL(log_count(&gw, "failed"), 0);
    keys_under(cluster.master.port, "first-down", keys, sizeof keys);
    check_case(strstr(keys, "first-down:") != NULL, "first sentinel down",
               "no key of the client in the master: %s", keys);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A master name the sentinels do not know: the store fails, and the log names it. */
static void test_unknown_master_name(void)
{
    struct proc gw;
    long remaining;

    CU_ASSERT_EQUAL_FATAL(
        start_sluice(&gw, config, upstream.port, sentinel_list(0), "no-such", "unknown-master"), 0);
    CU_ASSERT_EQUAL(get(&gw, "unknown-master", &remaining), 429);
    check_case(wait_for_log(&gw, "knows no master called no-such", 1, 2000), "unknown master",
               "the log does not say the sentinels know no master called no-such");
    CU_ASSERT_TRUE(metric(&gw, "sluice_store_errors_total") >= 1);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 1);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A sentinel whose word is stale: it answers every command with the replica's address, as
 * get-master-addr-by-name would. Python, one connection at a time (sluice asks and closes). */
static const char stale_sentinel[] =
    "import socket, sys\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen(16)\n"
    "reply = b'*2\\r\\n$9\\r\\n127.0.0.1\\r\\n$%d\\r\\n%s\\r\\n' % (len(sys.argv[2]), "
    "sys.argv[2].encode())\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    c.settimeout(2)\n"
    "    try:\n"
    "        while c.recv(4096):\n"
    "            c.sendall(reply)\n"
    "    except OSError:\n"
    "        pass\n"
    "    c.close()\n";

/* The master the sentinels name is checked with ROLE before anything is written: named the
 * replica, the store fails saying so, and the replica is never written to. */
static void test_replica_named_not_written(void)
{
    struct redis fake = {.port = free_port()};
    char port[16], replica_port[16], list[48], keys[512];
    const char *argv[] = {"python3", "-c", stale_sentinel, port, replica_port, NULL};
    struct proc gw;
    long remaining;

    snprintf(port, sizeof port, "%u", fake.port);
    snprintf(replica_port, sizeof replica_port, "%u", cluster.replica.port);
    snprintf(list, sizeof list, "\"127.0.0.1:%u\"", fake.port);
    fake.pid = spawn(argv, NULL);
    for (int i = 0, fd = -1; i < 200 && fd < 0; i++) {
        fd = raw_connect(fake.port);
        if (fd >= 0)
            close(fd);
        else
            sleep_ms(10);
    }
    if (start_sluice(&gw, config, upstream.port, list, MASTER_NAME, "stale") != 0) {
        stop_redis(&fake);
        CU_FAIL_FATAL("sluice did not start");
    }
    CU_ASSERT_EQUAL(get(&gw, "stale", &remaining), 429);
    check_case(wait_for_log(&gw, "ROLE: not the master", 1, 2000), "replica named",
               "the log does not say ROLE found no master");
    CU_ASSERT_EQUAL(log_count(&gw, "READONLY"), 0);
    CU_ASSERT_EQUAL(metric(&gw, "sluice_store_degraded"), 1);
    keys_under(cluster.replica.port, "stale", keys, sizeof keys);
    check_case(keys[0] == '\0', "replica named", "keys written to the replica: %s", keys);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    stop_redis(&fake);
}

/* Two replicas under a steady load of one client, alternating between them. */
struct load {
    struct proc gws[2];
    int sent, admitted, other;
    int wrong_remaining;   /* answers whose RateLimit r= was not the fleet's count */
    char first_wrong[128]; /* the first of them */
    double kill_at;        /* seconds_now() when the master was shut down; 0 before */
    double back_after[2];  /* each replica's first 200 after the kill, seconds after it; -1 */
    int sent_since_back;   /* requests sent since the first 200 after the kill */
    double named_after;    /* when sentinel 0 first named the replica, seconds after the kill */
};

/* The next request, to the replica whose turn it is, at 20 a second from `*next_at` on. An
 * admitted request's RateLimit field says what is left of the fleet's quota: shared, that is
 * QUOTA less every request admitted so far, on either replica. */
static void send_next(struct load *l, double *next_at)
{
    int i = l->sent % 2;
    long remaining, status;
    double now = seconds_now();

    if (*next_at > now)
        sleep_ms((int)((*next_at - now) * 1000));
    *next_at += 0.05;
    status = get(&l->gws[i], "failover", &remaining);
    now = seconds_now();
    if (l->kill_at > 0 && (l->back_after[0] >= 0 || l->back_after[1] >= 0))
        l->sent_since_back++;
    l->sent++;
    if (status == 200) {
        l->admitted++;
        if (remaining != QUOTA - l->admitted && l->wrong_remaining++ == 0)
            snprintf(l->first_wrong, sizeof l->first_wrong,
                     "request %d (replica %d, %.1f s after the kill): r=%ld, %d admitted", l->sent,
                     i, l->kill_at > 0 ? now - l->kill_at : 0.0, remaining, l->admitted);
        if (l->kill_at > 0 && l->back_after[i] < 0)
            l->back_after[i] = now - l->kill_at;
    } else if (status != 429) {
        l->other++;
    }
}

/* Whether sentinel 0 names the replica as the master now. */
static bool replica_named(void)
{
    char want[32];

    snprintf(want, sizeof want, "%u", cluster.replica.port);
    return answer_holds(cluster.sentinels[0].port, "SENTINEL get-master-addr-by-name " MASTER_NAME,
                        want, 0);
}

/* DEBUG DIGEST of the data set on `port` into `out`. */
static void digest(unsigned port, char *out, size_t cap)
{
    if (ask(port, "DEBUG DIGEST", out, cap) != 0)
        snprintf(out, cap, "(no answer on %u)", port);
}

/* Waits up to `ms` for the replica to hold exactly the master's data. */
static bool replica_in_step(int ms)
{
    char on_master[128], on_replica[128];

    for (int waited = 0; waited <= ms; waited += 50) {
        digest(cluster.master.port, on_master, sizeof on_master);
        digest(cluster.replica.port, on_replica, sizeof on_replica);
        if (strcmp(on_master, on_replica) == 0)
            return true;
        sleep_ms(50);
    }
    return false;
}

/* Before the kill: every call went to the master, none failed (a write that reached the
 * replica would have been refused with READONLY and counted), and the replica holds what the
 * master holds, by replication alone. */
static void check_before_kill(const struct load *l)
{
    check_case(l->admitted == 30 && l->other == 0, "before the kill",
               "%d of %d admitted, %d neither 200 nor 429", l->admitted, l->sent, l->other);
    for (int i = 0; i < 2; i++) {
        check_case(metric(&l->gws[i], "sluice_store_errors_total") == 0, "before the kill",
                   "replica %d counted store errors", i);
        check_case(log_count(&l->gws[i], "failed") == 0, "before the kill",
                   "replica %d logged a failure", i);
    }
    check_case(replica_in_step(2000), "before the kill",
               "the Redis replica's data is not the master's (DEBUG DIGEST)");
}

/* `gw` logged the store's failure, then that it answers again, and never READONLY. */
static void check_log(const struct proc *gw, int i)
{
    char *log;
    const char *failed, *back;

    wait_for_log(gw, "answers again", 1, 2000);
    log = read_log(gw);
    failed = log ? strstr(log, "failed") : NULL;
    back = failed ? strstr(failed, "answers again") : NULL;
    check_case(failed != NULL && back != NULL, "log",
               "replica %d: no \"failed\" then \"answers again\" in:\n%s", i, log ? log : "(none)");
    check_case(occurrences(log, "READONLY") == 0, "log", "replica %d wrote to a replica:\n%s", i,
               log ? log : "(none)");
    free(log);
}

/* After the failover: the replica is the master, the sentinels name it, and the client's
 * count is there. */
static void check_promoted(void)
{
    char keys[512];

    check_case(answer_holds(cluster.replica.port, "ROLE", "master", 0), "promoted",
               "the replica on %u is not the master", cluster.replica.port);
    check_case(replica_named(), "promoted", "sentinel 0 does not name the replica on %u",
               cluster.replica.port);
    keys_under(cluster.replica.port, "failover", keys, sizeof keys);
    check_case(strstr(keys, "failover:") != NULL, "promoted",
               "no key of the client in the promoted replica: %s", keys);
}

/* Under load (20 requests a second, one client, alternating between two replicas), the master
 * is shut down after 30 are admitted. Until a probe finds the promoted replica, deny answers
 * 429: the fleet admits the quota and not one more over the whole test, every admitted answer
 * shows the fleet's count (RateLimit r=), and both replicas admit again within 15 s of the
 * kill. Sending goes on until 130 more have been sent after the first is admitted again. */
static void test_failover_under_load(void)
{
    struct load l = {.back_after = {-1, -1}, .named_after = -1};
    const char *list = sentinel_list(0);
    double next_at, gap;

    for (int i = 0; i < 2; i++)
        if (start_sluice(&l.gws[i], config, upstream.port, list, MASTER_NAME, "failover") != 0) {
            if (i == 1)
                stop_sluice(&l.gws[0], 5000);
            CU_FAIL_FATAL("sluice did not start");
        }
    next_at = seconds_now();
    while (l.admitted < 30 && l.sent < 60)
        send_next(&l, &next_at);
    check_before_kill(&l);
    l.kill_at = seconds_now();
    redis_cli_wait(&cluster.master, "SHUTDOWN NOSAVE");
    next_at = seconds_now();
    while (seconds_now() - l.kill_at < 25 &&
           (l.back_after[0] < 0 || l.back_after[1] < 0 || l.sent_since_back < 130)) {
        send_next(&l, &next_at);
        if (l.named_after < 0 && replica_named())
            l.named_after = seconds_now() - l.kill_at;
    }
    gap = l.back_after[0] < 0                 ? l.back_after[1]
          : l.back_after[1] < 0               ? l.back_after[0]
          : l.back_after[0] < l.back_after[1] ? l.back_after[0]
                                              : l.back_after[1];
    fprintf(stderr,
            "\nsentinel failover gap (%s mode): %.1f s (replica 0 admits again %.1f s "
            "after the kill, replica 1 %.1f s; sentinel 0 named the replica after %.1f s); %d "
            "sent, %d admitted\n",
            serving_mode() ? serving_mode() : "thread_per_connection", gap, l.back_after[0],
            l.back_after[1], l.named_after, l.sent, l.admitted);
    check_case(l.admitted == QUOTA, "fleet", "%d admitted of a quota of %d (%d sent)", l.admitted,
               QUOTA, l.sent);
    check_case(l.other == 0, "fleet", "%d answers neither 200 nor 429", l.other);
    check_case(l.wrong_remaining == 0, "shared", "%d answers off the fleet's count; the first: %s",
               l.wrong_remaining, l.first_wrong);
    for (int i = 0; i < 2; i++)
        check_case(l.back_after[i] >= 0 && l.back_after[i] <= 15, "shared again",
                   "replica %d admits again %.1f s after the kill (-1: never)", i, l.back_after[i]);
    check_promoted();
    for (int i = 0; i < 2; i++) {
        check_log(&l.gws[i], i);
        CU_ASSERT_EQUAL(stop_sluice(&l.gws[i], 5000), 0);
    }
}

void register_sentinel_tests(void)
{
    CU_pSuite s = add_suite_with("sentinel", init, clean);

    add_test(s, "a first sentinel that is down is passed over", test_first_sentinel_down);
    add_test(s, "a master the sentinels do not know fails the store, named",
             test_unknown_master_name);
    add_test(s, "a replica named as the master is not written to", test_replica_named_not_written);
    /* Last: it shuts the master down. */
    add_test(s, "a failover under load: deny admits no more than the quota, shared again soon",
             test_failover_under_load);
}
