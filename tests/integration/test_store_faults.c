/* The Redis store under faults, against a real redis-server made slow (CLIENT PAUSE, DEBUG
 * SLEEP, a proxy that delays its answers), stopped and restarted under load: a request's
 * whole wait for the store is bounded by limiter.redis.timeout, and past it on_store_error
 * decides and an error is counted; no retry doubles the wait; upgrades to a slow upstream do
 * not delay the store; the gateway keeps a few connections to Redis however many clients ask;
 * and a client gets what the README's outage arithmetic says. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/harness.h"

/* %1$u the upstream, %2$u Redis (or a proxy before it), %3$s limiter.redis.timeout. Route
 * limited is in Redis; upgrades go to route slow, whose upstream answers after 3 s. */
static const char config[] =
    "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", access_log: \"off\"}\n"
    "limiter:\n  redis: {address: \"127.0.0.1:%2$u\", timeout: %3$s}\n  replicas: 2\n"
    "routes:\n"
    "  - name: limited\n    match: {path_prefix: /limited/}\n"
    "    upstream: \"http://127.0.0.1:%1$u\"\n    store: redis\n"
    "    limit: {algorithm: fixed_window, requests: 100000000, per: 1h}\n"
    "  - name: quota\n    match: {path_prefix: /quota/}\n    upstream: \"http://127.0.0.1:%1$u\"\n"
    "    key: \"header:X-API-Key\"\n    store: redis\n"
    "    limit: {algorithm: fixed_window, requests: 40, per: 1h}\n"
    "  - name: slow\n    match: {path_prefix: /slow}\n    upstream: \"http://127.0.0.1:%1$u\"\n";

/* --- load ----------------------------------------------------------------------------------- */

/* Requests for `target` from `clients` connections at once, each request on a fresh one,
 * spread over `ports`, until `stop` is set or `seconds` have passed; what they got. */
struct load {
    const unsigned *ports;
    int n_ports;
    int clients;
    const char *target;
    const char *api_key; /* X-API-Key, or NULL */
    double seconds;
    atomic_bool stop;
    atomic_int passed, refused, other;
    double slowest; /* the longest a request took, in seconds */
};

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

static void add_request(struct load *l, CURLM *multi, CURL *easy, struct curl_slist *headers, int i)
{
    char url[512];

    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", l->ports[i % l->n_ports], l->target);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, (void *)(intptr_t)i);
    curl_multi_add_handle(multi, easy);
}

/* Counts one finished request. */
static void count(struct load *l, CURL *easy)
{
    long status = 0;
    double took = 0;

    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME, &took);
    if (status == 200)
        atomic_fetch_add(&l->passed, 1);
    else if (status == 429)
        atomic_fetch_add(&l->refused, 1);
    else
        atomic_fetch_add(&l->other, 1);
    if (took > l->slowest)
        l->slowest = took;
}

static void *run_load(void *arg)
{
    struct load *l = arg;
    CURLM *multi = curl_multi_init();
    CURL *easy[256];
    struct curl_slist *headers = NULL;
    char field[256];
    double end = seconds_now() + l->seconds;
    int running = 0, clients = l->clients < 256 ? l->clients : 256;

    if (l->api_key != NULL) {
        snprintf(field, sizeof field, "X-API-Key: %s", l->api_key);
        headers = curl_slist_append(NULL, field);
    }
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)clients);
    for (int i = 0; i < clients; i++) {
        easy[i] = curl_easy_init();
        add_request(l, multi, easy[i], headers, i);
    }
    do {
        CURLMsg *m;
        int left;
        bool more = !atomic_load(&l->stop) && seconds_now() < end;

        curl_multi_perform(multi, &running);
        while ((m = curl_multi_info_read(multi, &left)) != NULL) {
            void *i;

            if (m->msg != CURLMSG_DONE)
                continue;
            count(l, m->easy_handle);
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &i);
            curl_multi_remove_handle(multi, m->easy_handle);
            if (more)
                add_request(l, multi, m->easy_handle, headers, (int)(intptr_t)i);
        }
        curl_multi_poll(multi, NULL, 0, 50, NULL);
    } while (running > 0 || (!atomic_load(&l->stop) && seconds_now() < end));
    for (int i = 0; i < clients; i++)
        curl_easy_cleanup(easy[i]);
    curl_slist_free_all(headers);
    curl_multi_cleanup(multi);
    return NULL;
}

/* --- a Redis whose every answer comes late -------------------------------------------------- */

/* A TCP proxy before Redis that passes each chunk of Redis's answers on `delay_ms` after it
 * came (what the client sends goes on at once): a Redis that answers late, but answers, and
 * answers calls sent together together, as over a slow network. Each connection gets three
 * threads, detached: one each way, and one that sends the answers when they are due. */
struct delay_proxy {
    int listener;
    unsigned port, target_port;
    int delay_ms;
    pthread_t acceptor;
    atomic_bool stopping;
};

/* A chunk of Redis's answer, due at `due` (seconds_now()). */
struct chunk {
    struct chunk *next;
    double due;
    size_t len;
    char data[];
};

/* One proxied connection: its two sockets, the answers held back, and how many of its threads
 * still run (the last closes the sockets and frees it). */
struct proxied {
    int client, server;
    double delay;
    pthread_mutex_t lock;
    pthread_cond_t held;
    struct chunk *head, *tail;
    bool server_done; /* Redis closed: no more chunks */
    atomic_int threads;
};

static void leave(struct proxied *c)
{
    if (atomic_fetch_sub(&c->threads, 1) != 1)
        return;
    close(c->client);
    close(c->server);
    while (c->head != NULL) {
        struct chunk *next = c->head->next;

        free(c->head);
        c->head = next;
    }
    pthread_cond_destroy(&c->held);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* What the client sends, to Redis at once. */
static void *from_client(void *arg)
{
    struct proxied *c = arg;
    char buf[65536];
    ssize_t n;

    while ((n = recv(c->client, buf, sizeof buf, 0)) > 0)
        if (send(c->server, buf, (size_t)n, MSG_NOSIGNAL) != n)
            break;
    shutdown(c->server, SHUT_WR);
    leave(c);
    return NULL;
}

/* Redis's answers, each chunk held with the time it is due. */
static void *from_server(void *arg)
{
    struct proxied *c = arg;
    char buf[65536];
    ssize_t n;

    while ((n = recv(c->server, buf, sizeof buf, 0)) > 0) {
        struct chunk *k = malloc(sizeof *k + (size_t)n);

        if (k == NULL)
            break;
        k->next = NULL;
        k->due = seconds_now() + c->delay;
        k->len = (size_t)n;
        memcpy(k->data, buf, (size_t)n);
        pthread_mutex_lock(&c->lock);
        if (c->tail != NULL)
            c->tail->next = k;
        else
            c->head = k;
        c->tail = k;
        pthread_cond_signal(&c->held);
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_lock(&c->lock);
    c->server_done = true;
    pthread_cond_signal(&c->held);
    pthread_mutex_unlock(&c->lock);
    leave(c);
    return NULL;
}

/* Sends each held chunk to the client when it is due. */
static void *deliver(void *arg)
{
    struct proxied *c = arg;

    pthread_mutex_lock(&c->lock);
    for (;;) {
        struct chunk *k = c->head;
        double wait;

        if (k == NULL && c->server_done)
            break;
        if (k == NULL) {
            pthread_cond_wait(&c->held, &c->lock);
            continue;
        }
        wait = k->due - seconds_now();
        if (wait > 0) {
            pthread_mutex_unlock(&c->lock);
            sleep_ms((int)(wait * 1000) + 1);
            pthread_mutex_lock(&c->lock);
            continue;
        }
        c->head = k->next;
        if (c->head == NULL)
            c->tail = NULL;
        pthread_mutex_unlock(&c->lock);
        send(c->client, k->data, k->len, MSG_NOSIGNAL);
        free(k);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    shutdown(c->client, SHUT_WR);
    leave(c);
    return NULL;
}

/* The three threads of `c`, detached; it is freed when the last ends. -1 when they cannot
 * all start (the connection is then closed). */
static int start_proxied(struct proxied *c)
{
    void *(*const run[])(void *) = {from_client, from_server, deliver};
    pthread_t thread;

    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->held, NULL);
    atomic_init(&c->threads, 3);
    for (int i = 0; i < 3; i++) {
        if (pthread_create(&thread, NULL, run[i], c) != 0) {
            /* Those started end once both sockets are shut; the rest are counted out. */
            shutdown(c->client, SHUT_RDWR);
            shutdown(c->server, SHUT_RDWR);
            pthread_mutex_lock(&c->lock);
            c->server_done = true;
            pthread_cond_signal(&c->held);
            pthread_mutex_unlock(&c->lock);
            for (int j = i; j < 3; j++)
                leave(c);
            return -1;
        }
        pthread_detach(thread);
    }
    return 0;
}

static void *accept_loop(void *arg)
{
    struct delay_proxy *d = arg;
    const int one = 1;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(d->target_port)};

    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (!atomic_load(&d->stopping)) {
        int client = accept(d->listener, NULL, NULL), server;
        struct proxied *c;

        if (client < 0)
            break;
        server = socket(AF_INET, SOCK_STREAM, 0);
        c = calloc(1, sizeof *c);
        if (server < 0 || c == NULL || connect(server, (struct sockaddr *)&to, sizeof to) != 0) {
            close(client);
            if (server >= 0)
                close(server);
            free(c);
            continue;
        }
        /* Each chunk goes when due, not held back for an acknowledgement (Nagle). */
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->client = client;
        c->server = server;
        c->delay = d->delay_ms / 1000.0;
        start_proxied(c);
    }
    return NULL;
}

static int start_delay_proxy(struct delay_proxy *d, unsigned target_port, int delay_ms)
{
    struct sockaddr_in at = {.sin_family = AF_INET};
    socklen_t len = sizeof at;

    memset(d, 0, sizeof *d);
    d->target_port = target_port;
    d->delay_ms = delay_ms;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    d->listener = socket(AF_INET, SOCK_STREAM, 0);
    if (d->listener < 0 || bind(d->listener, (struct sockaddr *)&at, sizeof at) != 0 ||
        listen(d->listener, 64) != 0 || getsockname(d->listener, (struct sockaddr *)&at, &len) != 0)
        return -1;
    d->port = ntohs(at.sin_port);
    return pthread_create(&d->acceptor, NULL, accept_loop, d) == 0 ? 0 : -1;
}

/* Stops taking connections; those open end as their peers close (the gateway stops first). */
static void stop_delay_proxy(struct delay_proxy *d)
{
    atomic_store(&d->stopping, true);
    shutdown(d->listener, SHUT_RDWR);
    pthread_join(d->acceptor, NULL);
    close(d->listener);
}

/* --- the tests -------------------------------------------------------------------------------- */

/* Event mode gives upgrades threads of their own: four upgrade requests held by an upstream
 * that answers after 3 s (as many as there are upgrade threads: they hold them all) leave
 * every decision in Redis on another route as quick as ever, and decided in Redis. */
static void test_upgrades_leave_the_store_alone(void)
{
    static const char upgrade[] = "GET /slow?ms=3000 HTTP/1.1\r\nHost: t\r\n"
                                  "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    unsigned long before, seen, connections;
    double slowest = 0;
    struct proc gw;
    int fds[4];

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, config, upstream.port, suite_redis.port, "1s"), 0);
    CU_ASSERT_EQUAL(get_status(gw.port, "/limited/", NULL), 200); /* connected, script loaded */
    upstream_stats(&before, &connections);
    for (int i = 0; i < 4; i++) {
        fds[i] = raw_connect(gw.port);
        if (fds[i] >= 0 && send(fds[i], upgrade, sizeof upgrade - 1, MSG_NOSIGNAL) < 0)
            CU_FAIL("an upgrade request could not be sent");
    }
    seen = before;
    for (int i = 0; i < 200 && seen < before + 4; i++) {
        sleep_ms(10);
        upstream_stats(&seen, &connections);
    }
    check_case(seen >= before + 4, "the upgrades reach the slow upstream",
               "the upstream saw %lu of them", seen - before);
    for (int i = 0; i < 5; i++) {
        double start = seconds_now(), took;

        CU_ASSERT_EQUAL(get_status(gw.port, "/limited/", NULL), 200);
        took = seconds_now() - start;
        slowest = took > slowest ? took : slowest;
    }
    /* ~2 ms each when nothing is in the way; the upgrades hold their threads for 3 s. */
    check_case(slowest < 1.0, "a decision in Redis beside held upgrades",
               "the slowest of 5 took %.3f s", slowest);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_store_errors_total"), 0);
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 10000), 0); /* the upgrades end with the upstream's 3 s */
}

/* Waits (up to 10 s, asking /limited/ so that the probe is made) until `gw` is back on Redis. */
static bool wait_recovered(const struct proc *gw)
{
    for (int i = 0; i < 100; i++) {
        if (metric_now(gw, "sluice_store_degraded") == 0)
            return true;
        get_status(gw->port, "/limited/", NULL);
        sleep_ms(100);
    }
    return false;
}

/* Redis paused (CLIENT PAUSE, 3 s) with 32 requests asking at once: every one is answered
 * within about the timeout (200 ms), by on_store_error (local: 200), and the store counts the
 * errors and degrades; unpaused, it comes back. */
static void test_paused_redis_costs_the_timeout(void)
{
    unsigned ports[1];
    struct proc gw;
    double start, took;
    int other, passed;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, config, upstream.port, suite_redis.port, "200ms"), 0);
    ports[0] = gw.port;
    CU_ASSERT_EQUAL(race_requests(ports, 1, 8, "/limited/", NULL, &other), 8); /* connected */
    CU_ASSERT_EQUAL_FATAL(redis_cli_wait(&suite_redis, "CLIENT PAUSE 3000 ALL"), 0);
    start = seconds_now();
    passed = race_requests(ports, 1, 32, "/limited/", NULL, &other);
    took = seconds_now() - start;
    CU_ASSERT_EQUAL(passed, 32);
    CU_ASSERT_EQUAL(other, 0);
    check_case(took < 1.5, "32 requests while Redis is paused for 3 s",
               "they took %.3f s in all (timeout 200 ms)", took);
    CU_ASSERT_TRUE(metric_now(&gw, "sluice_store_errors_total") >= 1);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_store_degraded"), 1);
    redis_cli_wait(&suite_redis, "CLIENT UNPAUSE");
    CU_ASSERT_TRUE(wait_recovered(&gw));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A silent resolver: a UDP socket on 127.0.0.86:53 that reads nothing and answers nothing,
 * and a resolv.conf naming it. -1 (the socket closed) when port 53 cannot be bound here. */
static int silent_resolver(char *resolv_conf, size_t cap)
{
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(53)};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    FILE *f;

    inet_pton(AF_INET, "127.0.0.86", &at.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&at, sizeof at) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    scratch_path(resolv_conf, cap, "resolv.conf");
    f = fopen(resolv_conf, "w");
    if (f != NULL) {
        fputs("nameserver 127.0.0.86\noptions timeout:3 attempts:2\n", f);
        fclose(f);
    }
    return fd;
}

/* Redis named by a host name that the resolver never answers (it would hold getaddrinfo() 6 s):
 * each request is still answered within about limiter.redis.timeout (200 ms), by
 * on_store_error (local: 200, forwarded), and the store counts its errors, naming the lookup.
 * The first request asks the store; later ones find it degraded or probe it, the probe
 * waiting on the same lookup, never beyond its own timeout. */
static void test_unanswered_lookup_costs_the_timeout(void)
{
    char resolv_conf[128], out[64];
    unsigned long before, after, connections;
    struct proc gw;
    int fd = silent_resolver(resolv_conf, sizeof resolv_conf);

    if (fd < 0 || run_command("unshare --mount true", out, sizeof out) != 0) {
        if (fd >= 0)
            close(fd);
        skip_test("needs root: port 53 on 127.0.0.86, and unshare --mount");
        return;
    }
    CU_ASSERT_EQUAL_FATAL(
        start_sluice_resolving(&gw, resolv_conf,
                               "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", "
                               "access_log: \"off\"}\n"
                               "limiter:\n  redis: {address: \"redis.sluice-test:6379\", "
                               "timeout: 200ms}\n"
                               "routes:\n  - name: limited\n    match: {path_prefix: /}\n"
                               "    upstream: \"http://127.0.0.1:%1$u\"\n    store: redis\n"
                               "    limit: {algorithm: fixed_window, requests: 100, per: 1h}\n",
                               upstream.port),
        0);
    upstream_stats(&before, &connections);
    for (int i = 0; i < 4; i++) {
        double start = seconds_now(), took;
        long status = get_status(gw.port, "/lookup", NULL);

        took = seconds_now() - start;
        CU_ASSERT_EQUAL(status, 200);
        check_case(took < 1.0, "a request while the resolver is silent",
                   "request %d took %.3f s (timeout 200 ms, the resolver's 6 s)", i + 1, took);
        sleep_ms(150); /* past the first backoff: the next one may probe */
    }
    upstream_stats(&after, &connections);
    CU_ASSERT_EQUAL(after - before, 4); /* every one forwarded, by on_store_error: local */
    CU_ASSERT_TRUE(metric_now(&gw, "sluice_store_errors_total") >= 1);
    CU_ASSERT_TRUE(wait_for_log(&gw, "resolve", 1, 2000));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    close(fd);
}

/* Asks until every one of the store's threads holds a connection (Redis counts four clients,
 * and redis-cli), each with the script loaded by its first call. */
static bool connect_every_thread(const struct proc *gw)
{
    unsigned ports[1] = {gw->port};
    int other;

    for (int i = 0; i < 50; i++) {
        if (redis_number(&suite_redis, "INFO clients", "connected_clients") >= 4 + 1)
            return true;
        race_requests(ports, 1, 64, "/limited/", NULL, &other);
    }
    return false;
}

/* No retry doubles the wait: with kept connections and Redis asleep (DEBUG SLEEP), one
 * request takes about the timeout (200 ms), not twice it (a second try on a fresh connection
 * with a fresh timeout took 409-413 ms). */
static void test_timeout_is_not_doubled(void)
{
    struct proc gw;
    struct reply r;
    double start, took;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, config, upstream.port, suite_redis.port, "200ms"), 0);
    CU_ASSERT_TRUE_FATAL(connect_every_thread(&gw));
    redis_cli(&suite_redis, "DEBUG SLEEP 3");
    sleep_ms(300);
    start = seconds_now();
    http(gw.port, "GET", "/limited/", NULL, NULL, &r);
    took = seconds_now() - start;
    CU_ASSERT_EQUAL(r.status, 200);
    reply_free(&r);
    check_case(took >= 0.15 && took < 0.35, "one request while Redis sleeps",
               "it took %.3f s (timeout 200 ms)", took);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_store_errors_total"), 1);
    sleep_ms(3000);
    CU_ASSERT_TRUE(wait_recovered(&gw));
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Connections that Redis closed while they were idle (CLIENT KILL; a Redis `timeout`, or a
 * firewall forgetting them, does the same) say nothing of Redis: the calls that find them
 * closed go again on fresh ones, within their time, and nothing fails. */
static void test_closed_idle_connections_are_replaced(void)
{
    struct proc gw;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, config, upstream.port, suite_redis.port, "1s"), 0);
    CU_ASSERT_TRUE_FATAL(connect_every_thread(&gw));
    CU_ASSERT_EQUAL(redis_cli_wait(&suite_redis, "CLIENT KILL TYPE normal"), 0);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(get_status(gw.port, "/limited/", NULL), 200);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_store_degraded"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* A Redis that answers every call late (60 ms, behind a proxy), though within the timeout
 * (150 ms), with 128 clients asking at once for 3 s: no request waits for the store much past
 * the timeout, queue included (one call at a time per thread let them queue: 128 / 4 * 60 ms
 * is 1.9 s). */
static void test_slow_answers_do_not_queue(void)
{
    struct delay_proxy proxy;
    struct proc gw;
    unsigned ports[1];
    struct load load = {.n_ports = 1, .clients = 128, .target = "/limited/", .seconds = 3};

    CU_ASSERT_EQUAL_FATAL(start_delay_proxy(&proxy, suite_redis.port, 60), 0);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, config, upstream.port, proxy.port, "150ms"), 0);
    ports[0] = gw.port;
    load.ports = ports;
    run_load(&load);
    fprintf(stderr, "\n  %d passed, %d refused, %d other; slowest %.3f s; %g store errors\n",
            load.passed, load.refused, load.other, load.slowest,
            metric_now(&gw, "sluice_store_errors_total"));
    CU_ASSERT_TRUE(load.passed > 0);
    CU_ASSERT_EQUAL(load.other, 0);
    check_case(load.slowest < 1.0, "128 clients, Redis answering in 60 ms",
               "the slowest request took %.3f s (timeout 150 ms)", load.slowest);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
    stop_delay_proxy(&proxy);
}

/* 200 clients at once for 3 s: the gateway opens no more connections to Redis than the
 * store's threads, in both modes (with a pool of 64 for 200 threads, thread_per_connection
 * opened thousands, and timed out as the TIME_WAITs piled up), and no call fails. */
static void test_connections_stay_few(void)
{
    struct proc gw;
    unsigned ports[1];
    struct load load = {.n_ports = 1, .clients = 200, .target = "/limited/", .seconds = 3};
    long before, after;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&gw, config, upstream.port, suite_redis.port, "1s"), 0);
    ports[0] = gw.port;
    load.ports = ports;
    before = redis_number(&suite_redis, "INFO stats", "total_connections_received");
    run_load(&load);
    after = redis_number(&suite_redis, "INFO stats", "total_connections_received");
    CU_ASSERT_TRUE(before > 0);
    /* Four threads' connections, and redis-cli's own for the second INFO. */
    check_case(after - before <= 4 + 1 + 2, "connections to Redis for 200 clients",
               "%ld opened while %d requests were served", after - before,
               load.passed + load.refused + load.other);
    CU_ASSERT_TRUE(load.passed > 200);
    CU_ASSERT_EQUAL(load.other, 0);
    CU_ASSERT_EQUAL(metric_now(&gw, "sluice_store_errors_total"), 0);
    CU_ASSERT_EQUAL(stop_sluice(&gw, 5000), 0);
}

/* Waits up to `ms` until `gw`'s sluice_store_degraded is `degraded`. */
static bool wait_degraded(const struct proc *gw, int degraded, int ms)
{
    for (int waited = 0; waited < ms; waited += 20) {
        if (metric_now(gw, "sluice_store_degraded") == degraded)
            return true;
        sleep_ms(20);
    }
    return false;
}

/* One client of quota 40 per hour, limited on two replicas (on_store_error: local, so 20
 * each while Redis fails), asking without pause from 8 connections while Redis goes away and
 * comes back: `restart` stops Redis and starts a fresh one without persistence (as the
 * Kubernetes overlay runs it); otherwise Redis is paused (CLIENT PAUSE) and keeps its counts.
 * The README: three times the quota in one window when Redis comes back without its counts,
 * twice when it keeps them. */
static void check_outage(bool restart, const char *api_key, int expected)
{
    struct proc a, b;
    unsigned ports[2];
    struct load load = {.n_ports = 2, .clients = 8, .target = "/quota/", .seconds = 60};
    pthread_t loader;
    const int quota = 40;

    CU_ASSERT_EQUAL_FATAL(start_sluice(&a, config, upstream.port, suite_redis.port, "200ms"), 0);
    CU_ASSERT_EQUAL_FATAL(start_sluice(&b, config, upstream.port, suite_redis.port, "200ms"), 0);
    ports[0] = a.port;
    ports[1] = b.port;
    load.ports = ports;
    load.api_key = api_key;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&loader, NULL, run_load, &load), 0);

    /* In Redis: the quota, then refusals. */
    /* A pass may still be on its way back from the upstream when later refusals are in. */
    for (int i = 0; i < 500 && (atomic_load(&load.refused) < 20 || load.passed < quota); i++)
        sleep_ms(10);
    check_case(atomic_load(&load.passed) == quota, "before the outage",
               "%d passed of a quota of %d (%g store errors)", atomic_load(&load.passed), quota,
               metric_now(&a, "sluice_store_errors_total") +
                   metric_now(&b, "sluice_store_errors_total"));
    if (restart)
        stop_redis(&suite_redis);
    else
        redis_cli_wait(&suite_redis, "CLIENT PAUSE 4000 ALL");
    CU_ASSERT_TRUE(wait_degraded(&a, 1, 3000));
    CU_ASSERT_TRUE(wait_degraded(&b, 1, 3000));
    sleep_ms(1000); /* each replica spends its half locally */
    if (restart) {
        CU_ASSERT_EQUAL_FATAL(start_redis(&suite_redis), 0); /* the same port, no counts */
    } else {
        redis_cli_wait(&suite_redis, "CLIENT UNPAUSE");
    }
    CU_ASSERT_TRUE(wait_degraded(&a, 0, 8000));
    CU_ASSERT_TRUE(wait_degraded(&b, 0, 8000));
    sleep_ms(1000); /* back on Redis: whatever it still allows */
    atomic_store(&load.stop, true);
    pthread_join(loader, NULL);

    check_case(load.passed == expected,
               restart ? "Redis restarted without its counts" : "Redis paused, keeping its counts",
               "%d passed in all (%d refused, %d other), expected %d", load.passed, load.refused,
               load.other, expected);
    CU_ASSERT_EQUAL(load.other, 0);
    CU_ASSERT_EQUAL(stop_sluice(&a, 5000), 0);
    CU_ASSERT_EQUAL(stop_sluice(&b, 5000), 0);
}

static void test_outage_with_restart_gives_three_quotas(void)
{
    check_outage(true, "outage-restart", 3 * 40);
}

static void test_outage_keeping_counts_gives_two_quotas(void)
{
    check_outage(false, "outage-pause", 2 * 40);
}

void register_store_faults_tests(void)
{
    CU_pSuite s = add_suite_with("store_faults", redis_suite_init, redis_suite_clean);

    add_test(s, "upgrades to a slow upstream leave the store alone",
             test_upgrades_leave_the_store_alone);
    add_test(s, "a paused Redis costs each request about the timeout",
             test_paused_redis_costs_the_timeout);
    add_test(s, "the timeout is not doubled", test_timeout_is_not_doubled);
    add_test(s, "a Redis name the resolver never answers costs each request the timeout",
             test_unanswered_lookup_costs_the_timeout);
    add_test(s, "connections Redis closed while idle are replaced, nothing fails",
             test_closed_idle_connections_are_replaced);
    add_test(s, "a Redis slow to answer does not queue requests past the timeout",
             test_slow_answers_do_not_queue);
    add_test(s, "200 clients, a few connections to Redis", test_connections_stay_few);
    add_test(s, "an outage that loses Redis's counts gives three quotas",
             test_outage_with_restart_gives_three_quotas);
    add_test(s, "an outage that keeps them gives two", test_outage_keeping_counts_gives_two_quotas);
}
