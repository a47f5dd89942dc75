/* The HTTP fronts' life cycle: the server started (its lasting state, TLS, the first runtime,
 * the fronts, the reaper, the admin daemon), drained and stopped. Design in server.h; how the
 * server's files divide the rest in server_private.h. */
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/core/runtime.h"
#include "gateway/front/certs.h"
#include "gateway/front/listener.h"
#include "gateway/front/loop.h"
#include "gateway/front/server.h"
#include "gateway/front/server_private.h"
#include "gateway/front/wire.h"
#include "gateway/ops/metrics.h"
#include "gateway/store/store.h"
#include "gateway/upstream/backends.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/proxy.h"
#include "gateway/upstream/tunnel.h"

static void free_server(struct gw_server *s)
{
    gw_reaper_stop(s);
    gw_fronts_stop(s);
    gw_health_stop(s->health);
    gw_wire_cleanup();
    gw_certs_use(NULL);
    gw_runtime_release(s->current);
    gw_backends_free(s->backends);
    gw_metrics_free(s->metrics);
    gw_store_free(s->store);
    gw_fixed_settings_free(&s->fixed);
    pthread_mutex_destroy(&s->swap);
    free(s);
}

/* The listener's TLS: libmicrohttpd's certificate callback, then the first certificates and
 * the priority string (config/tls.h). 0, or -1 with `err` filled. */
static int start_tls(struct gw_server *s, const struct config_tls *tls, char err[GW_ERR_LEN])
{
    char why[GW_ERR_LEN - 64];
    struct gw_certs *certs;

    if (MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES) {
        snprintf(err, GW_ERR_LEN,
                 "server.tls: this libmicrohttpd cannot pick certificates by "
                 "server name (no MHD_FEATURE_HTTPS_CERT_CALLBACK)");
        return -1;
    }
    certs = gw_certs_load(tls, why, sizeof why);
    s->fixed.tls_priorities = strdup(tls->priorities);
    if (certs == NULL || s->fixed.tls_priorities == NULL) {
        gw_certs_release(certs);
        snprintf(err, GW_ERR_LEN, "server.tls: %s", certs == NULL ? why : "out of memory");
        return -1;
    }
    gw_certs_use(certs);
    return 0;
}

/* What the server keeps across reloads: the strict reader, the metrics, the upstream servers'
 * state and health checks, the store, the settings fixed until a restart, and TLS. 0, or -1
 * with `err` filled (`config` stays the caller's). */
static int start_lasting(struct gw_server *s, const struct config *config, char err[GW_ERR_LEN])
{
    if (gw_wire_init() != 0) {
        snprintf(err, GW_ERR_LEN,
                 "cannot read client connections strictly (recv() is not "
                 "sluice's, or memory is short)");
        return -1;
    }
    gw_proxy_configure(config->server.upstream_idle_timeout_ns, config->server.upstream_max_idle);
    s->metrics = gw_metrics_new();
    s->backends = gw_backends_new();
    s->health = gw_health_start();
    s->store = gw_store_new(config);
    if (s->metrics == NULL || s->backends == NULL || s->health == NULL || s->store == NULL ||
        gw_fixed_settings_init(&s->fixed, config) != 0) {
        snprintf(err, GW_ERR_LEN, "out of memory");
        return -1;
    }
    if (s->fixed.tls && start_tls(s, &config->server.tls, err) != 0)
        return -1;
    return 0;
}

struct gw_server *gw_server_start(struct config *config, char err[GW_ERR_LEN])
{
    struct gw_server *s = calloc(1, sizeof *s);

    if (s == NULL) {
        config_free(config);
        snprintf(err, GW_ERR_LEN, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->swap, NULL);
    s->client_timeout_ns = config->server.client_timeout_ns;
    atomic_init(&s->park_idle_after_ns, config->server.park_idle_after_ns);
    if (start_lasting(s, config, err) != 0) {
        config_free(config);
        goto fail;
    }
    s->current = gw_runtime_build(config, NULL, s->metrics, s->backends, s->store, err, GW_ERR_LEN);
    if (s->current == NULL)
        goto fail;
    if (gw_server_configure_health(s, s->current) != 0) {
        snprintf(err, GW_ERR_LEN, "cannot start the upstreams' health checks: out of memory");
        goto fail;
    }
    if (gw_fronts_start(s, err) != 0)
        goto fail;
    if (s->fixed.mode == CONFIG_MODE_THREAD_PER_CONNECTION && gw_reaper_start(s) != 0) {
        snprintf(err, GW_ERR_LEN, "cannot start the slow-client reaper");
        goto fail;
    }
    if (s->fixed.admin_listen.host != NULL && gw_admin_start(s, err) != 0)
        goto fail;
    return s;

fail:
    free_server(s);
    return NULL;
}

uint16_t gw_server_port(const struct gw_server *s)
{
    return s->port;
}

uint16_t gw_server_admin_port(const struct gw_server *s)
{
    return s->admin_port;
}

const char *gw_server_address(const struct gw_server *s)
{
    return s->address;
}

const char *gw_server_admin_address(const struct gw_server *s)
{
    return s->admin_port != 0 ? s->admin_address : NULL;
}

unsigned gw_server_drain(struct gw_server *s)
{
    struct gw_runtime *rt = gw_server_runtime(s);
    int64_t timeout_ns = rt->config->server.drain_timeout_ns;
    MHD_socket listener;
    struct timespec pause = {0, 10 * 1000000};
    unsigned running;

    gw_runtime_release(rt);
    atomic_store(&s->draining, true);
    gw_acceptor_stop(s->acceptor);
    if (s->fronts[0].loop == NULL) {
        listener = MHD_quiesce_daemon(s->fronts[0].daemon);
        if (listener != MHD_INVALID_SOCKET)
            close(listener);
    }
    for (size_t i = 0; i < s->n_fronts; i++) /* each loop quiesces its own daemon */
        if (s->fronts[i].loop != NULL)
            gw_loop_wake(s->fronts[i].loop);
    /* Requests in flight and open tunnels have until drain_timeout to end by themselves. */
    for (int64_t waited = 0;; waited += pause.tv_nsec) {
        running = gw_metrics_requests_in_flight(s->metrics);
        if ((running == 0 && gw_tunnels_count(s->tunnels) == 0) || waited >= timeout_ns)
            break;
        nanosleep(&pause, NULL);
    }
    gw_tunnels_close_all(s->tunnels);
    return running;
}

void gw_server_stop(struct gw_server *s)
{
    if (s == NULL)
        return;
    if (s->admin != NULL)
        MHD_stop_daemon(s->admin);
    free_server(s);
}
