/* sluice: command line, signals, and the gateway's start and graceful stop. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "config/config.h"
#include "gateway/common/log.h"
#include "gateway/front/server.h"
#include "gateway/modules.h"
#include "gateway/ops/process_metrics.h"
#include "gateway/ops/quota_cli.h"
#include "gateway/ops/simulate.h"
#include "gateway/ops/watch.h"
#include "gateway/store/store.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/proxy.h"

#define SLUICE_VERSION "0.1.0"

/* How long an exit waits for the logs' queues to be written: a reader that stopped reading
 * must not hold up a stop. */
#define LOG_STOP_TIMEOUT_NS 1000000000LL

/* File descriptors per client connection, measured with libcurl 7.88 while requests are in
 * flight: the client's socket, the upstream's, and the socket pair that libcurl's multi handle
 * keeps for curl_multi_wakeup(). */
#define FDS_PER_CONNECTION 4
/* And besides the connections': listeners, the admin port's 64 connections, log files, Redis,
 * the config watch. */
#define FDS_RESERVED 64

/* Kept in step with docs/man/sluice.1 (tests/packaging-test.sh compares their options and exit
 * codes). */
static const char usage[] =
    "usage: sluice -c FILE                 run the gateway with the configuration in FILE\n"
    "       sluice --check -c FILE         validate FILE and exit\n"
    "       sluice --healthcheck URL       ask URL whether the gateway is healthy\n"
    "       sluice --healthcheck -c FILE   ask /healthz on FILE's server.admin_listen\n"
    "       sluice --version | --help\n"
    "       sluice simulate -c FILE [--compare CURRENT] [--format text|json]\n"
    "                       [--max-denied PERCENT%] [--decisions] ACCESS_LOG...\n"
    "                                      replay access logs against FILE's limits\n"
    "       sluice quota show|reset|grant -c FILE --route R (--key K | --consumer C)\n"
    "                    [--ip A] [--limit-key SOURCE=VALUE]... [--limit L] [--n N]\n"
    "                    [--method M] [--format table|json]\n"
    "                                      look at or change a client's quota on the\n"
    "                                      running gateway, through FILE's admin listener\n"
    "\n"
    "Options:\n"
    "  -c, --config FILE  the configuration file (YAML; see sluice.yaml(5))\n"
    "      --check        load and validate FILE without serving: print FILE: OK, or one\n"
    "                     FILE:LINE:COL: problem line for each problem\n"
    "      --healthcheck  GET the URL, or /healthz on FILE's admin address: healthy if it\n"
    "                     answers 2xx within 2 s (a container's HEALTHCHECK needs no curl)\n"
    "      --version      print the version\n"
    "  -h, --help         print this text\n"
    "simulate (README, \"Before you change a limit\"):\n"
    "      --compare      CURRENT's figures beside FILE's, and the clients only FILE denies\n"
    "      --format       text (default) or json\n"
    "      --max-denied   exit 1 when more than PERCENT of the replayed requests are denied\n"
    "      --decisions    one line per replayed request instead of the report\n"
    "quota (README, \"When a client is at 429\"):\n"
    "      --ip, --limit-key  the keys of limits that count under a key of their own\n"
    "      --limit        one limit (reset: else all; grant needs it)\n"
    "      --n            the units grant gives back\n"
    "      --method       the method whose cost a request would pay (default GET)\n"
    "      --format       table (default) or json\n"
    "\n"
    "Signals: SIGHUP reloads FILE (so does saving it, unless server.watch_config is false);\n"
    "SIGTERM or SIGINT stop accepting connections, let requests in flight finish (up to\n"
    "server.drain_timeout) and exit 0.\n"
    "\n"
    "Exit codes:\n"
    "  0  stopped by SIGTERM or SIGINT; --check: FILE is valid; --healthcheck: healthy\n"
    "  1  FILE is invalid or unreadable, or sluice cannot listen or start; --healthcheck:\n"
    "     not healthy; simulate: more denied than --max-denied\n"
    "  2  wrong usage (an unknown option, no -c FILE, an extra argument); simulate: a\n"
    "     config that does not load, a log not read to its end\n"
    "  quota: 0 done; 1 FILE unusable or without admin_listen and token; 2 wrong usage;\n"
    "     3 the gateway refused the call (400, 404, 409); 4 the token was refused (401);\n"
    "     5 the gateway unreachable or failing (5xx)\n";

/* Warns when the host of `origin` (scheme://host:port) is a name that does not resolve now:
 * requests to it would fail with upstream_error "dns". A warning only: the name may resolve
 * later, and the config is valid. */
static void check_resolves(const char *route, const char *origin)
{
    char host[300];
    const char *start = strstr(origin, "://") + 3, *end = strrchr(origin, ':');
    unsigned char address[16];
    struct addrinfo *found = NULL;
    int rc;

    if (*start == '[') /* an IPv6 literal */
        return;
    snprintf(host, sizeof host, "%.*s", (int)(end - start), start);
    if (inet_pton(AF_INET, host, address) == 1)
        return;
    rc = getaddrinfo(host, NULL, &(struct addrinfo){.ai_socktype = SOCK_STREAM}, &found);
    if (rc != 0)
        gw_warn("route %s: the upstream host %s does not resolve now (%s): its requests will "
                "fail with upstream_error dns until it does",
                route, host, gai_strerror(rc));
    freeaddrinfo(found);
}

/* Logs what an operator should know before traffic flows (at start, on --check and on each
 * reload). */
static void warn_about(const struct config *config)
{
    /* The loader's own, each at its FILE:LINE:COL. */
    for (const char *line = config->warnings, *end; line != NULL && *line != '\0'; line = end + 1) {
        end = strchr(line, '\n');
        gw_warn("%.*s", (int)(end - line), line);
    }
    for (size_t i = 0; i < config->n_routes; i++) {
        const struct config_route *r = &config->routes[i];

        for (size_t k = 0; k < r->upstream.n_servers; k++) {
            if (!r->tls_verify && strncmp(r->upstream.servers[k].origin, "https:", 6) == 0)
                gw_warn("route %s: tls_verify is false: the certificate of %s is not checked",
                        r->name, r->upstream.servers[k].url);
            if (r->proxy == NULL) /* through a proxy, the proxy resolves it */
                check_resolves(r->name, r->upstream.servers[k].origin);
        }
        if (r->n_limits == 0)
            gw_info("route %s: no limit: requests are proxied unlimited", r->name);
    }
}

/* Raises the soft limit on open files to the hard one (many systems start services at 1024)
 * and says when max_connections can need more. Past the limit accept() fails and accepting
 * pauses (gateway/front/mhd_log.c), so clients wait in the listen backlog rather than fail, but
 * wait they do; and an upstream connection that cannot be opened is a 502. */
/* sluice_build_info's labels: sluice's version and each library's, asked of the folder that
 * uses it. */
static void set_build_info(void)
{
    char labels[512];

    snprintf(labels, sizeof labels,
             "version=\"%s\",libmicrohttpd=\"%s\",libcurl=\"%s\",hiredis=\"%s\",libyaml=\"%s\","
             "gnutls=\"%s\",libsodium=\"%s\"",
             SLUICE_VERSION, gw_server_library_version(), gw_proxy_library_version(),
             gw_store_library_version(), config_yaml_version(), config_tls_library_version(),
             sodium_version_string());
    gw_process_set_build_info(labels);
}

static void raise_fd_limit(uint32_t max_connections)
{
    rlim_t need = FDS_PER_CONNECTION * (rlim_t)max_connections + FDS_RESERVED;
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return;
    if (limit.rlim_cur < limit.rlim_max) {
        rlim_t soft = limit.rlim_cur;

        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
            limit.rlim_cur = soft; /* a hard limit above the kernel's nr_open, say */
    }
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < need)
        gw_warn("open files: the limit is %llu, and server.max_connections %u can need about "
                "%llu (%d per connection: client, upstream, libcurl's wakeup pair; and %d more): "
                "past the limit new connections wait (sluice_accept_errors_total counts it). "
                "Raise the hard limit (ulimit -Hn, systemd LimitNOFILE=, docker --ulimit "
                "nofile=) or lower max_connections",
                (unsigned long long)limit.rlim_cur, max_connections, (unsigned long long)need,
                FDS_PER_CONNECTION, FDS_RESERVED);
}

/* The watchers of the files the running config reads besides itself (its consumers_file, and
 * the TLS certificates and keys), when server.watch_config: moved along when a reload names
 * other files. A change to any of them reloads the whole config, as a change to the config
 * does; so a renewed certificate is served from its next handshake on. */
struct file_watches {
    struct gw_watch **watches;
    char **paths;
    size_t n;
};

static void unwatch_files(struct file_watches *fw)
{
    for (size_t i = 0; i < fw->n; i++) {
        gw_watch_stop(fw->watches[i]);
        free(fw->paths[i]);
    }
    free(fw->watches);
    free(fw->paths);
    *fw = (struct file_watches){NULL, NULL, 0};
}

static void free_paths(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

/* The files `config` reads besides itself, when it watches them; NULL (with *n 0) for none
 * or when memory is short (they go unwatched: SIGHUP still reloads). */
static char **files_of(const struct config *config, size_t *n)
{
    size_t cap = 2 + 2 * config->server.tls.n_certs;
    char **paths = config->server.watch_config ? calloc(cap, sizeof *paths) : NULL;

    *n = 0;
    if (paths == NULL)
        return NULL;
    if (config->consumers_file != NULL)
        paths[(*n)++] = strdup(config->consumers_file);
    if (config->server.admin.token_file != NULL)
        paths[(*n)++] = strdup(config->server.admin.token_file);
    for (size_t i = 0; i < config->server.tls.n_certs; i++) {
        paths[(*n)++] = strdup(config->server.tls.certs[i].cert);
        paths[(*n)++] = strdup(config->server.tls.certs[i].key);
    }
    for (size_t i = 0; i < *n; i++)
        if (paths[i] == NULL) {
            free_paths(paths, *n);
            *n = 0;
            return NULL;
        }
    return paths;
}

/* Watches the `n` files of `paths` (from files_of(), taken over) instead of those watched so
 * far. */
static void watch_paths(struct file_watches *fw, char **paths, size_t n)
{
    bool same = n == fw->n;

    for (size_t i = 0; same && i < n; i++)
        same = strcmp(paths[i], fw->paths[i]) == 0;
    if (same) {
        free_paths(paths, n);
        return;
    }
    unwatch_files(fw);
    fw->watches = calloc(n ? n : 1, sizeof *fw->watches);
    if (fw->watches == NULL) {
        free_paths(paths, n);
        return;
    }
    fw->paths = paths;
    fw->n = n;
    for (size_t i = 0; i < n; i++) {
        fw->watches[i] = gw_watch_start(paths[i]);
        if (fw->watches[i] == NULL)
            gw_warn("cannot watch %s for changes (%s); reload with SIGHUP", paths[i],
                    strerror(errno));
    }
}

/* Loads `path` again and runs it. An invalid file changes nothing: every problem is logged
 * and the gateway goes on with the config it has. */
static void reload(struct gw_server *server, const char *path, struct file_watches *fw)
{
    char *errors = NULL, err[GW_ERR_LEN], **paths;
    size_t n_paths;
    struct config *config = config_load(path, &errors);
    enum config_log_format log_format;
    enum config_log_level log_level;

    if (config == NULL) {
        for (char *line = errors, *end; line != NULL && *line != '\0'; line = end + 1) {
            end = strchr(line, '\n');
            if (end == NULL)
                end = line + strlen(line) - 1;
            gw_error("reload rejected: %.*s", (int)(end - line), line);
        }
        free(errors);
        gw_server_reload_failed(server);
        return;
    }
    log_format = config->log.format;
    log_level = config->log.level;
    warn_about(config);
    /* The config goes to the server: the list of its files is taken first, and kept only if
     * the reload takes. */
    paths = files_of(config, &n_paths);
    if (gw_server_reload(server, config, err) != 0) { /* takes the config */
        gw_error("reload rejected: %s", err);
        free_paths(paths, n_paths);
        return;
    }
    watch_paths(fw, paths, n_paths);
    gw_log_configure(log_format, log_level);
    gw_info("reloaded %s", path);
}

/* A signal taken by a thread that had it unblocked, for the main loop to act on as if
 * sigtimedwait() had taken it: every thread of ours blocks them, but a library's own threads
 * may not, and the handler below would then swallow a SIGTERM that sigtimedwait() never
 * sees. */
static volatile sig_atomic_t taken;

/* Until SIGTERM or SIGINT, reloading on each SIGHUP; a signal a thread's handler took is
 * seen within a second. */
static void wait_for_stop(struct gw_server *server, const char *path, struct file_watches *fw,
                          const sigset_t *signals)
{
    int sig = 0;

    while (sig != SIGTERM && sig != SIGINT) {
        struct timespec second = {1, 0};
        int got = sigtimedwait(signals, NULL, &second);

        if (got < 0 && errno != EAGAIN && errno != EINTR)
            break;
        sig = got > 0 ? got : taken;
        taken = 0;
        if (sig == SIGHUP)
            reload(server, path, fw);
    }
}

/* Serves until SIGTERM or SIGINT, then drains. Signals are taken synchronously with
 * sigtimedwait() by this thread alone, so no handler's work runs inside a request thread; the
 * file watcher raises SIGHUP too, so every reload runs here, one at a time. */
static int serve(struct config *config, const char *path, const sigset_t *signals)
{
    char err[GW_ERR_LEN];
    struct gw_server *server;
    struct gw_watch *watch = NULL;
    static const char *const proxy_protocol_names[] = {"", "v1", "v2", "v1 or v2"};
    struct file_watches files = {NULL, NULL, 0};
    char serving[64], proxy_protocol[16];
    bool tls, quota;
    char **paths;
    size_t n_paths;
    bool watching = config->server.watch_config;
    unsigned left;
    int rc = 1;

    /* First, so that no line of the gateway's waits on stderr or stdout. */
    if (gw_log_start() != 0)
        gw_warn("cannot start the log writer threads: writing the logs directly");
    raise_fd_limit(config->server.max_connections);
    set_build_info();
    if (gw_proxy_init() != 0) {
        gw_error("cannot initialise libcurl");
        config_free(config);
        goto out;
    }
    warn_about(config);
    /* For the line that says it started: the config goes to the server. */
    tls = config->server.tls.on;
    quota = config->server.admin.quota;
    snprintf(proxy_protocol, sizeof proxy_protocol, "%s",
             proxy_protocol_names[config->server.proxy_protocol]);
    if (config->server.mode == CONFIG_MODE_EVENT)
        snprintf(serving, sizeof serving, "event mode, %u workers", config->server.workers);
    else
        snprintf(serving, sizeof serving, "thread_per_connection mode");
    /* Watched from before the start, so that a change made while it starts is seen. */
    paths = files_of(config, &n_paths);
    watch_paths(&files, paths, n_paths);
    server = gw_server_start(config, err); /* takes the config */
    if (server == NULL) {
        gw_error("%s", err);
        unwatch_files(&files);
        gw_proxy_cleanup();
        goto out;
    }
    if (watching && (watch = gw_watch_start(path)) == NULL)
        gw_warn("cannot watch %s for changes (%s); reload with SIGHUP", path, strerror(errno));
    if (gw_server_admin_address(server) != NULL)
        gw_info("admin endpoints (/metrics, /healthz, /readyz%s) on http://%s",
                quota ? ", /quota behind the admin token" : "",
                gw_server_admin_address(server));
    gw_info("sluice %s (%s%s%s) listening on %s://%s", SLUICE_VERSION, serving,
            proxy_protocol[0] != '\0' ? ", PROXY protocol " : "", proxy_protocol,
            tls ? "https" : "http", gw_server_address(server));

    wait_for_stop(server, path, &files, signals);
    gw_watch_stop(watch);
    unwatch_files(&files);
    gw_info("stopping: no new connections; draining requests in flight");
    left = gw_server_drain(server);
    if (left > 0)
        gw_warn("%u requests still running after drain_timeout; closing them", left);
    /* Whatever a keep-alive client started after the count above gives up now too, so the
     * stop does not wait out an upstream timeout. */
    gw_proxy_abort_all();
    gw_server_stop(server);
    gw_proxy_cleanup();
    gw_info("stopped");
    rc = 0;
out:
    gw_log_stop(LOG_STOP_TIMEOUT_NS);
    return rc;
}

/* GET `url`: 0 when it answers 2xx within 2 s. */
static int healthcheck(const char *url)
{
    const char *why;

    if (gw_health_probe(url, 2000, &why) == 0)
        return 0;
    if (why != NULL)
        fprintf(stderr, "sluice: healthcheck %s: %s\n", url, why);
    return 1;
}

/* GET /healthz on the server.admin_listen of the config in `path`: a wildcard address (0.0.0.0,
 * ::) is asked on loopback. 0 when it answers 2xx within 2 s. */
static int healthcheck_config(const char *path)
{
    char *errors = NULL, url[300];
    struct config *config = config_load(path, &errors);
    int rc = 1;

    if (config == NULL) {
        fprintf(stderr, "sluice: healthcheck: cannot use %s:\n%s", path, errors);
        free(errors);
        return 1;
    }
    if (gw_admin_url(config, "/healthz", url, sizeof url) != 0) {
        fprintf(stderr,
                "sluice: healthcheck: %s sets no server.admin_listen, so there is no /healthz "
                "to ask; set it, or give the URL to ask\n",
                path);
        goto out;
    }
    rc = healthcheck(url);
out:
    config_free(config);
    return rc;
}

/* Installed so that the signals sigtimedwait() takes are delivered even to PID 1, which the kernel
 * spares every signal left at its default action; it runs only in a thread that had the
 * signal unblocked, and hands it to the main loop (wait_for_stop()). */
static void take_signal(int sig)
{
    taken = sig;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'}, {"check", no_argument, NULL, 'k'},
        {"version", no_argument, NULL, 'v'},      {"help", no_argument, NULL, 'h'},
        {"healthcheck", no_argument, NULL, 'H'},  {NULL, 0, NULL, 0},
    };
    const char *path = NULL;
    bool check = false, health = false;
    struct config *config;
    char *errors = NULL;
    sigset_t signals;
    int opt;

    /* Before any config is read: the modules bring YAML keys of their own. */
    if (gw_modules_register() != 0) {
        fputs("sluice: the gateway's modules do not fit together\n", stderr);
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "simulate") == 0)
        return gw_simulate_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "quota") == 0)
        return gw_quota_main(argc - 1, argv + 1);

    while ((opt = getopt_long(argc, argv, "c:h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'k':
            check = true;
            break;
        case 'v':
            printf("sluice %s\n", SLUICE_VERSION);
            return 0;
        case 'H':
            health = true;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    /* --healthcheck URL, or --healthcheck -c FILE (getopt moves the URL to the end). */
    if (health && optind + 1 == argc && path == NULL)
        return healthcheck(argv[optind]);
    if (path == NULL || optind != argc) {
        fputs(usage, stderr);
        return 2;
    }
    if (health)
        return healthcheck_config(path);

    config = config_load(path, &errors);
    if (config == NULL) {
        fputs(errors, stderr);
        free(errors);
        return 1;
    }
    gw_log_configure(config->log.format, config->log.level);
    if (check) {
        warn_about(config);
        printf("%s: OK, %zu routes\n", path, config->n_routes);
        config_free(config);
        return 0;
    }

    /* Blocked before any thread starts, so every thread inherits the mask. */
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGTERM, take_signal);
    signal(SIGINT, take_signal);
    signal(SIGHUP, take_signal);
    signal(SIGPIPE, SIG_IGN);

    return serve(config, path, &signals);
}
