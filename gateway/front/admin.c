/* The admin daemon: GET /metrics, /healthz and /readyz on server.admin_listen, from one
 * polling thread, never proxied. Design in server.h. */
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/runtime.h"
#include "gateway/front/listener.h"
#include "gateway/front/server_private.h"
#include "gateway/modules/forward/upstream_route.h"
#include "gateway/ops/metrics.h"
#include "gateway/ops/process_metrics.h"
#include "gateway/store/store.h"
#include "limiter/limiter.h"

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status, const char *type,
                                    char *body)
{
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result ret;

    if (response == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(response, "Content-Type", type);
    ret = MHD_queue_response(c, status, response);
    MHD_destroy_response(response);
    return ret;
}

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
        return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", strdup("draining\n"));
    rt = gw_server_runtime(s);
    upstreams = !rt->config->server.ready_needs_upstreams ||
                gw_forward_upstreams_ready(rt, limiter_now_ns());
    gw_runtime_release(rt);
    if (!upstreams)
        return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                            strdup("a route has no upstream server believed healthy\n"));
    return respond_text(c, MHD_HTTP_OK, "text/plain", strdup("ready\n"));
}

static enum MHD_Result on_admin(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **req_cls)
{
    struct gw_server *s = cls;
    char *body;

    (void)version, (void)upload_data, (void)req_cls;
    if (*upload_data_size > 0 || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0))
        return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", strdup("GET only\n"));
    if (strcmp(url, "/metrics") == 0) {
        body = render_metrics(s);
        return body ? respond_text(c, MHD_HTTP_OK, "text/plain; version=0.0.4", body) : MHD_NO;
    }
    if (strcmp(url, "/healthz") == 0)
        return respond_text(c, MHD_HTTP_OK, "text/plain", strdup("ok\n"));
    if (strcmp(url, "/readyz") == 0)
        return ready(s, c);
    return respond_text(c, MHD_HTTP_NOT_FOUND, "text/plain",
                        strdup("not found: try /metrics, /healthz or /readyz\n"));
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
