/* An attempt at the upstream: its server, its request, its outcome and whether to try again;
 * the forward module's (forward.h), shared through exchange.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/methods.h"
#include "gateway/common/headers.h"
#include "gateway/common/log.h"
#include "gateway/common/target.h"
#include "gateway/common/text.h"
#include "gateway/core/pipeline.h"
#include "gateway/modules/forward/exchange.h"
#include "gateway/modules/forward/upstream_headers.h"
#include "gateway/modules/forward/upstream_route.h"

/* The Host field the upstream sees (route.host). */
static const char *upstream_host(const struct gw_req *rq, size_t server)
{
    const struct config_route *route = gw_req_route(rq);

    if (route->forwarding.host_mode == CONFIG_HOST_UPSTREAM)
        return route->upstream.servers[server].authority;
    if (route->forwarding.host_mode == CONFIG_HOST_NAME)
        return route->forwarding.host_name;
    return rq->host;
}

/* The upstream URL for server `k`: its origin and base path, then the target as the client
 * sent it, without the matched path_prefix under strip_prefix. NULL when memory is short. */
static char *upstream_url(const struct gw_req *rq, size_t k)
{
    const struct config_route *route = gw_req_route(rq);
    const struct config_server *server = &route->upstream.servers[k];
    const char *rest = rq->target, *slash = "";
    size_t len;
    char *url;

    if (route->forwarding.strip_prefix) {
        rest = gw_target_after(rq->target, strlen(route->path_prefix));
        /* "/v1" stripped from "/v1?q" leaves the base path (or "/") alone; "/v1/" stripped
         * from "/v1/x" took the '/' that the rest needs. */
        if (rest[0] == '\0' || rest[0] == '?')
            slash = server->base_path[0] == '\0' ? "/" : "";
        else if (rest[0] != '/')
            slash = "/";
    }
    len = strlen(server->origin) + strlen(server->base_path) + strlen(slash) + strlen(rest);
    url = malloc(len + 1);
    if (url != NULL) {
        struct gw_text t = gw_text_on(url, len);

        gw_text_str(&t, server->origin);
        gw_text_str(&t, server->base_path);
        gw_text_str(&t, slash);
        gw_text_str(&t, rest);
        gw_text_finish(&t);
    }
    return url;
}

/* The request for server x->server: its URL and header list. 0, or -1 when memory is short. */
static int make_request(struct gw_req *rq, struct exchange *x)
{
    struct gw_upstream_lines lines;

    free(x->url);
    free(x->headers);
    free(x->header_text);
    x->headers = NULL;
    x->header_text = NULL;
    x->url = upstream_url(rq, x->server);
    if (x->url == NULL ||
        gw_upstream_lines(rq, upstream_host(rq, x->server),
                          x->upgrade != NULL ? x->upgrade_field : NULL, &lines) != 0)
        return -1;
    x->dropped_headers = lines.dropped;
    x->headers = gw_upstream_header_list(lines.text, lines.lines);
    if (x->headers == NULL) {
        free(lines.text);
        return -1;
    }
    x->header_text = lines.text;
    return 0;
}

int gw_exchange_begin(struct gw_req *rq, struct exchange *x, struct gw_forward *fw)
{
    const struct config_route *route = gw_req_route(rq);
    struct gw_upstream_route *r = gw_req_route_state(rq, &gw_forward_module);

    x->server = gw_backend_pick(&r->backends, x->tried, limiter_now_ns(), &x->probe);
    x->tried |= UINT64_C(1) << x->server;
    x->backend = r->backends.servers[x->server];
    x->reported = false;
    x->fault = GW_FAULT_NONE;
    if (x->attempts++ == 0 && route->retries.attempts > 1)
        gw_retry_budget_count(r->budget, limiter_now_ns());
    gw_backend_begin(x->backend);
    if (make_request(rq, x) != 0) {
        gw_req_refuse(rq, 503, "out of memory");
        return -1;
    }
    *fw = (struct gw_forward){
        .method = rq->method,
        .url = x->url,
        .proxy = route->proxy,
        .max_head = rq->config->server.max_response_header_size,
        .headers = x->headers,
        .body = rq->has_body ? &x->body : NULL,
        .timeout_ns = route->timeout_ns,
        .connect_timeout_ns = route->connect_timeout_ns,
        .tls_verify = route->tls_verify,
    };
    return 0;
}

/* The upstream took a step (on a loop): the request picks up where it waited. */
static void on_upstream_step(void *cls)
{
    gw_req_resume(cls);
}

enum gw_upstream_error gw_exchange_send(struct gw_req *rq, struct exchange *x)
{
    struct gw_forward fw;

    if (gw_exchange_begin(rq, x, &fw) != 0)
        return GW_UPSTREAM_OTHER;
    /* Handles are held only while forwarding, so idle keep-alive clients hold none. */
    x->upstream = gw_upstream_acquire(
        rq->upstream_loop,
        ((struct gw_upstream_route *)gw_req_route_state(rq, &gw_forward_module))->pools[x->server]);
    if (x->upstream == NULL) {
        gw_req_refuse(rq, 503, "out of memory");
        return GW_UPSTREAM_OTHER;
    }
    gw_body_rewind(&x->body); /* gw_exchange_end() retries only a body it can send again */
    return gw_upstream_start(x->upstream, &fw, on_upstream_step, rq);
}

void gw_exchange_close(struct exchange *x)
{
    if (x->backend != NULL)
        gw_backend_finish(x->backend, x->reported, x->probe);
    x->backend = NULL;
}

void gw_exchange_drop(struct exchange *x)
{
    gw_exchange_close(x);
    gw_upstream_release(x->upstream);
    x->upstream = NULL;
}

enum gw_step gw_exchange_failed(struct gw_req *rq, struct exchange *x, enum gw_upstream_error error)
{
    struct gw_route_metrics *metrics = gw_req_route_runtime(rq)->metrics;
    unsigned status = error == GW_UPSTREAM_TIMEOUT ? 504 : 502;
    const char *detail = gw_fault_detail(x->fault);

    if (gw_proxy_aborting()) { /* the gateway stopping cut the attempt: no upstream error */
        status = 503;
        detail = "the gateway is stopping";
    } else {
        gw_metrics_count_error(metrics, error == GW_UPSTREAM_TIMEOUT   ? GW_ERR_TIMEOUT
                                        : error == GW_UPSTREAM_CONNECT ? GW_ERR_CONNECT
                                                                       : GW_ERR_OTHER);
    }
    rq->decision = GW_FAILED; /* the gateway's answer, for an upstream that gave none */
    if (gw_pipeline_problem(rq, status, detail) != 0)
        gw_req_refuse(rq, 503, "out of memory");
    return GW_ANSWERED;
}

enum gw_step gw_exchange_answer_failure(struct gw_req *rq, struct exchange *x,
                                        enum gw_upstream_error error)
{
    if (rq->refusal != 0)
        return GW_ANSWERED;
    return gw_exchange_failed(rq, x, error);
}

/* Who owns a server's state, for a log line: "route api", or "upstream backend (route api)"
 * for a shared upstream. */
static const char *owner_text(const struct gw_backend *b, const char *route, char *out, size_t cap)
{
    if (b->shared)
        snprintf(out, cap, "upstream %s (route %s)", b->owner, route);
    else
        snprintf(out, cap, "route %s", route);
    return out;
}

/* Reports the attempt's outcome to its server's state, and logs a failure (at most once a
 * second per server and kind). */
static void report(const struct gw_req *rq, struct exchange *x, long status, const char *text,
                   int64_t now)
{
    const struct config_route *route = gw_req_route(rq);
    char who[160];

    x->reported = true;
    if (gw_backend_report(x->backend, route, x->fault, status, now, x->probe)) {
        char pause[32], outcome[32];

        snprintf(outcome, sizeof outcome, "status %ld", status);
        gw_warn(
            "%s: server %s is skipped for fail_timeout (%s) after %s failed, the last "
            "with %s",
            owner_text(x->backend, route->name, who, sizeof who), x->backend->url,
            config_format_duration(route->upstream.passive.fail_timeout_ns, pause, sizeof pause),
            x->probe ? "its probe" : "max_fails attempts",
            x->fault != GW_FAULT_NONE ? gw_fault_name(x->fault) : outcome);
    }
    if (x->fault != GW_FAULT_NONE && gw_backend_should_log(x->backend, x->fault, now))
        gw_warn("%s: server %s: %s: %s", owner_text(x->backend, route->name, who, sizeof who),
                x->backend->url, gw_fault_name(x->fault), text);
}

/* Reports the attempt's outcome (the head came with `status`, or `error`) and says whether
 * to try again: on another server when there is one, for an outcome in retries.on, an
 * idempotent method, attempts left, a body still whole in its window (body.h; and not cut
 * short after an early answer), and room in the retry budget. */
bool gw_exchange_end(struct gw_req *rq, struct exchange *x, enum gw_upstream_error error,
                     long status)
{
    const struct config_route *route = gw_req_route(rq);
    struct gw_upstream_route *r = gw_req_route_state(rq, &gw_forward_module);
    struct gw_route_metrics *metrics = gw_req_route_runtime(rq)->metrics;
    int64_t now = limiter_now_ns();
    const char *text = "";

    if (error != GW_UPSTREAM_OK && gw_proxy_aborting()) {
        /* Stopping: the gateway cut the attempt, which says nothing of the server (no
         * upstream_error either), and no attempt follows. */
        x->fault = GW_FAULT_NONE;
        return false;
    }
    if (error != GW_UPSTREAM_OK && x->upstream != NULL)
        x->fault = gw_upstream_fault(x->upstream, &text);
    else if (error != GW_UPSTREAM_OK) /* an upgrade's (its fault is set already) */
        text = x->up.error_text;
    report(rq, x, status, text, now);
    if (!(gw_fault_class(x->fault, status) & route->retries.on) ||
        x->attempts >= route->retries.attempts || !config_method_may_retry(rq->method) ||
        !gw_body_replayable(&x->body) || x->body_dropped)
        return false;
    if (!gw_retry_budget_take(r->budget, route->retries.budget_percent, now)) {
        gw_metrics_count_retry(metrics, false);
        return false;
    }
    gw_metrics_count_retry(metrics, true);
    gw_exchange_drop(x);
    return true;
}

int gw_exchange_answer_fields(struct gw_req *rq, const char *fields, size_t len)
{
    struct gw_answer *a = &rq->answer;
    char *connection = NULL;
    const char *name, *value;
    size_t cursor = 0;

    while (gw_field_next(fields, len, &cursor, &name, &value))
        if (strcasecmp(name, "Connection") == 0 && gw_list_append(&connection, value) != 0) {
            free(connection);
            return -1;
        }
    cursor = 0;
    while (gw_field_next(fields, len, &cursor, &name, &value))
        if (!gw_header_is_hop_by_hop(name, connection) && strcasecmp(name, "Content-Length") != 0 &&
            strcasecmp(name, "X-Request-Id") != 0 && !gw_pipeline_owns_field(rq, name) &&
            gw_answer_field(a, name, value) != 0) {
            free(connection);
            return -1;
        }
    free(connection);
    return 0;
}

void gw_exchange_head_in(struct gw_req *rq, struct exchange *x, long status)
{
    x->head_ns = limiter_now_ns();
    x->status = status;
    gw_metrics_count_response(gw_req_route_runtime(rq)->metrics, (unsigned)status);
}
