/* The admin daemon: GET /metrics, /healthz and /readyz on server.admin_listen, from one
 * polling thread, never proxied. Design in server.h. */
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/respond.h"
#include "gateway/core/runtime.h"
#include "gateway/front/listener.h"
#include "gateway/front/server_private.h"
#include "gateway/modules/forward/upstream_route.h"
#include "gateway/ops/metrics.h"
#include "gateway/ops/process_metrics.h"
#include "gateway/store/store.h"
#include "limiter/limiter.h"

static char *render_metrics(struct gw_server *s)
{
    struct gw_runtime *rt = gw_server_runtime(s);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    if (out != NULL) {
        gw_metrics_render(s->metrics, out, gw_runtime_gauges, rt);
        gw_store_render_metrics(s->store, out);
        gw_process_metrics_render(out);
        fprintf(out,
                "# HELP sluice_quota_changes_total Clients' quotas reset or granted on the admin "
                "listener.\n"
                "# TYPE sluice_quota_changes_total counter\n"
                "sluice_quota_changes_total{action=\"reset\"} %llu\n"
                "sluice_quota_changes_total{action=\"grant\"} %llu\n"
                "# HELP sluice_admin_unauthorized_total Calls to the admin listener refused for "
                "want of the admin token.\n"
                "# TYPE sluice_admin_unauthorized_total counter\n"
                "sluice_admin_unauthorized_total %llu\n",
                (unsigned long long)atomic_load(&s->admin_counts.resets),
                (unsigned long long)atomic_load(&s->admin_counts.grants),
                (unsigned long long)atomic_load(&s->admin_counts.refused));
        fclose(out);
    }
    gw_runtime_release(rt);
    return text;
}

/* /readyz: 503 while draining, or (unless server.ready_needs_upstreams is false) while some
 * route has no server believed healthy. */
static enum MHD_Result ready(struct gw_server *s, struct MHD_Connection *c)
{
    struct gw_runtime *rt;
    bool upstreams;

    if (atomic_load(&s->draining))
        return gw_admin_respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", strdup("draining\n"),
                                NULL);
    rt = gw_server_runtime(s);
    upstreams = !rt->config->server.ready_needs_upstreams ||
                gw_forward_upstreams_ready(rt, limiter_now_ns());
    gw_runtime_release(rt);
    if (!upstreams)
        return gw_admin_respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                                strdup("a route has no upstream server believed healthy\n"), NULL);
    return gw_admin_respond(c, MHD_HTTP_OK, "text/plain", strdup("ready\n"), NULL);
}

/* GET /metrics, /healthz, /readyz; the quota endpoints (admin_quota.c); /metrics and the
 * quota endpoints behind the admin token as server.admin_token and its kin say. */
static enum MHD_Result route_call(struct gw_server *s, struct MHD_Connection *c, const char *url,
                                  const char *method, struct gw_runtime *rt)
{
    const struct config_admin *admin = &rt->config->server.admin;
    bool read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    enum gw_admin_auth auth;
    char *body;

    if (admin->quota && (strcmp(url, "/quota") == 0 || strcmp(url, "/quota/grant") == 0)) {
        auth = gw_admin_check(s, c, admin);
        return auth == GW_ADMIN_AUTHORIZED ? gw_admin_quota(s, c, url, method, rt)
                                           : gw_admin_refuse(c, auth);
    }
    if (strcmp(url, "/metrics") != 0 && strcmp(url, "/healthz") != 0 && strcmp(url, "/readyz") != 0)
        return gw_admin_respond(c, MHD_HTTP_NOT_FOUND, "text/plain",
                                strdup("not found: try /metrics, /healthz or /readyz\n"), NULL);
    if (!read)
        return gw_admin_respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", strdup("GET only\n"),
                                NULL);
    if (strcmp(url, "/metrics") == 0) {
        if (admin->metrics_need_token &&
            (auth = gw_admin_check(s, c, admin)) != GW_ADMIN_AUTHORIZED)
            return gw_admin_refuse(c, auth);
        body = render_metrics(s);
        return gw_admin_respond(c, MHD_HTTP_OK, "text/plain; version=0.0.4", body, NULL);
    }
    if (strcmp(url, "/healthz") == 0)
        return gw_admin_respond(c, MHD_HTTP_OK, "text/plain", strdup("ok\n"), NULL);
    return ready(s, c);
}

/* libmicrohttpd calls once for the head, once per piece of body, and once at its end; a call
 * is answered at its end. The admin endpoints take no body: one is refused (413), read and
 * dropped so the connection stays in step. */
static enum MHD_Result on_admin(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **req_cls)
{
    static int head_seen, body_seen;
    struct gw_server *s = cls;
    struct gw_runtime *rt;
    enum MHD_Result ret;

    (void)version, (void)upload_data;
    if (*req_cls == NULL) {
        *req_cls = &head_seen;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        *upload_data_size = 0;
        *req_cls = &body_seen;
        return MHD_YES;
    }
    if (*req_cls == &body_seen)
        return gw_admin_respond(c, MHD_HTTP_CONTENT_TOO_LARGE, "application/problem+json",
                                gw_problem_json(MHD_HTTP_CONTENT_TOO_LARGE,
                                                "the admin endpoints take no body", NULL, NULL),
                                NULL);
    rt = gw_server_runtime(s);
    ret = route_call(s, c, url, method, rt);
    gw_runtime_release(rt);
    return ret;
}

int gw_admin_start(struct gw_server *s, char err[GW_ERR_LEN])
{
    const struct MHD_OptionItem options[] = {
        {MHD_OPTION_CONNECTION_LIMIT, 64, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, 10, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    int fd = gw_listen_socket(&s->fixed.admin_listen, s->fixed.admin_listen.port, 0, err);

    if (fd < 0)
        return -1;
    gw_socket_address(fd, s->admin_address, &s->admin_port);
    s->admin =
        gw_mhd_start_daemon(fd, MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG,
                            on_admin, s, s, options, err);
    return s->admin != NULL ? 0 : -1;
}
