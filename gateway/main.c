/* sluice: command line, signals, and the gateway's start and graceful stop. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "proxy.h"
#include "server.h"

#define SLUICE_VERSION "0.1.0"

static const char usage[] =
    "usage: sluice -c FILE           run the gateway with the configuration in FILE\n"
    "       sluice --check -c FILE   validate FILE: exit 0, or print FILE:LINE:COL: problem\n"
    "                                lines and exit 1\n"
    "       sluice --version | --help\n"
    "\n"
    "Signals: SIGTERM or SIGINT stop accepting connections, let requests in flight finish\n"
    "(up to server.drain_timeout) and exit 0.\n";

/* Logs what an operator should know before traffic flows. */
static void warn_about(const struct config *config)
{
    for (size_t i = 0; i < config->n_routes; i++) {
        const struct config_route *r = &config->routes[i];

        if (!r->tls_verify && strncmp(r->upstream, "https:", 6) == 0)
            gw_warn("route %s: tls_verify is false: the upstream's certificate is not checked",
                    r->name);
        if (!r->has_limit)
            gw_info("route %s: no limit: requests are proxied unlimited", r->name);
    }
    if (config->server.admin_listen.host != NULL)
        gw_warn("server.admin_listen is accepted but metrics and health endpoints are not "
                "served yet");
}

/* Serves until SIGTERM or SIGINT, then drains. Signals are taken synchronously with sigwait()
 * by this thread alone, so no handler runs inside a request thread. */
static int serve(const struct config *config, const sigset_t *signals)
{
    char err[GW_ERR_LEN];
    struct gw_server *server;
    const struct config_endpoint *listen = &config->server.listen;
    bool v6 = strchr(listen->host, ':') != NULL;
    unsigned left;
    int sig = 0;

    if (gw_proxy_init() != 0) {
        gw_error("cannot initialise libcurl");
        return 1;
    }
    warn_about(config);
    server = gw_server_start(config, err);
    if (server == NULL) {
        gw_error("%s", err);
        gw_proxy_cleanup();
        return 1;
    }
    gw_info("sluice %s listening on %s%s%s:%u with %zu routes", SLUICE_VERSION, v6 ? "[" : "",
            listen->host, v6 ? "]" : "", gw_server_port(server), config->n_routes);

    while (sig != SIGTERM && sig != SIGINT) {
        if (sigwait(signals, &sig) != 0)
            break;
        if (sig == SIGHUP)
            gw_warn("SIGHUP: reloading the configuration is not supported yet; restart to apply "
                    "changes");
    }
    gw_info("stopping: no new connections; draining requests in flight (up to %lld ms)",
            (long long)(config->server.drain_timeout_ns / 1000000));
    left = gw_server_drain(server, config->server.drain_timeout_ns);
    if (left > 0) {
        gw_warn("%u requests still running after drain_timeout; closing them", left);
        gw_proxy_abort_all();
    }
    gw_server_stop(server);
    gw_proxy_cleanup();
    gw_info("stopped");
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'}, {"check", no_argument, NULL, 'k'},
        {"version", no_argument, NULL, 'v'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL;
    bool check = false;
    struct config *config;
    char *errors = NULL;
    sigset_t signals;
    int opt, rc;

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
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (path == NULL || optind != argc) {
        fputs(usage, stderr);
        return 2;
    }

    config = config_load(path, &errors);
    if (config == NULL) {
        fputs(errors, stderr);
        free(errors);
        return 1;
    }
    if (check) {
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
    signal(SIGPIPE, SIG_IGN);

    rc = serve(config, &signals);
    config_free(config);
    return rc;
}
