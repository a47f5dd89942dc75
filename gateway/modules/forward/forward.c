/* An allowed request forwarded upstream and its answer streamed back; design in forward.h. */
#include <stdlib.h>
#include <string.h>

#include "gateway/common/log.h"
#include "gateway/core/pipeline.h"
#include "gateway/modules/forward/exchange.h"
#include "gateway/modules/forward/upstream_route.h"

#define RESPONSE_BLOCK (32 * 1024)

/* Whether the answer to `method` with `status` has a body whose length is its own: not HEAD's,
 * not 1xx, 204 or 304 (whose Content-Length, if any, describes another answer). */
static bool carries_body(const char *method, long status)
{
    return strcmp(method, "HEAD") != 0 && status >= 200 && status != 204 && status != 304;
}

static enum gw_step check_route(struct gw_req *rq, void *ctx)
{
    struct exchange *x = ctx;

    x->up.fd = -1;
    x->body.length = rq->content_length;
    gw_exchange_read_upgrade(rq, x);
    if (x->upgrade != NULL && rq->has_body && !rq->empty_body)
        gw_req_refuse(rq, 400, "an upgrade request carries no body");
    else if (rq->content_length > 0 && (uint64_t)rq->content_length > rq->config->server.max_body)
        gw_req_refuse(rq, 413, TOO_LARGE);
    return rq->refusal != 0 ? GW_ANSWERED : GW_NEXT;
}

/* A body of known length goes upstream as it arrives: the exchange starts before its first
 * byte. */
static enum gw_step send_early(struct gw_req *rq, void *ctx)
{
    struct exchange *x = ctx;
    enum gw_upstream_error error;

    if (!rq->has_body || rq->content_length <= 0)
        return GW_NEXT;
    error = gw_exchange_send(rq, x);
    return error == GW_UPSTREAM_OK ? GW_NEXT : gw_exchange_answer_failure(rq, x, error);
}

/* An attempt that failed mid-body: tried again from the body's first byte when it may be,
 * else its failure is the answer, at the body's end. */
static void body_failed(struct gw_req *rq, struct exchange *x, enum gw_upstream_error error)
{
    if (rq->refusal != 0)
        return;
    if (gw_exchange_end(rq, x, error, 0)) {
        error = gw_exchange_send(rq, x); /* a retry, from the body's first byte */
        if (error == GW_UPSTREAM_OK || rq->refusal != 0)
            return;
    }
    x->upstream_error = error;
    x->body_dropped = true;
}

/* A piece of the request body: into the body's window and on upstream (body.h). A body of
 * known length is upstream from its first byte (send_early()); one without (chunked) waits in
 * the window until the window is full, and goes with its length if it ends before that. When
 * the upstream cannot take more yet the rest stays in `*size`, and the step waits. A failure
 * is answered at the body's end. */
static enum gw_step take_body(struct gw_req *rq, void *ctx, const char *data, size_t *size)
{
    struct exchange *x = ctx;
    enum gw_upstream_error error;

    if (rq->body_read + *size > rq->config->server.max_body) {
        gw_req_refuse(rq, 413, TOO_LARGE);
        gw_exchange_drop(x);
    }
    while (*size > 0 && rq->refusal == 0 && !x->body_dropped) {
        size_t n = gw_body_put(&x->body, data, *size);

        if (n == 0 && gw_body_room(&x->body) > 0) {
            gw_req_refuse(rq, 503, "out of memory for the request body");
            gw_exchange_drop(x);
            break;
        }
        data += n;
        *size -= n;
        rq->body_read += n;
        if (x->upstream == NULL && *size == 0)
            return GW_NEXT; /* a chunked body, still within the window */
        error = x->upstream == NULL ? gw_exchange_send(rq, x) : GW_UPSTREAM_OK;
        if (error == GW_UPSTREAM_OK)
            error = gw_upstream_feed(x->upstream, *size > 0);
        if (error == GW_UPSTREAM_PENDING) {
            gw_req_will_wait(rq);
            return GW_WAIT;
        }
        if (error == GW_UPSTREAM_ANSWERED)
            x->body_dropped = true; /* the answer goes out at the body's end */
        else if (error != GW_UPSTREAM_OK)
            body_failed(rq, x, error);
    }
    return GW_NEXT;
}

static ssize_t read_body(struct gw_req *rq, uint64_t pos, char *buf, size_t max)
{
    struct exchange *x = gw_req_ctx(rq, &gw_forward_module);
    const struct config_route *route = gw_req_route(rq);
    ssize_t n = gw_upstream_read(x->upstream, buf, max);
    const char *text;

    if (n == GW_UPSTREAM_WOULD_BLOCK) {
        gw_req_will_wait(rq);
        return GW_READ_WAIT;
    }
    if (n > 0) {
        rq->bytes += (uint64_t)n;
        return n;
    }
    if (n == 0)
        return GW_READ_END;
    x->fault = gw_upstream_fault(x->upstream, &text);
    gw_warn("route %s: server %s: %s: the body stopped after %llu bytes (%s); the client's "
            "connection is closed",
            route->name, route->upstream.servers[x->server].url, gw_fault_name(x->fault),
            (unsigned long long)pos, text);
    return GW_READ_ERROR;
}

/* The upstream's answer, its head in: its status and fields, its body whole (one buffer: the
 * adapter sends head and body in a single write) or streamed. */
static enum gw_step answer(struct gw_req *rq, struct exchange *x)
{
    struct gw_answer *a = &rq->answer;
    const char *fields;
    size_t fields_len;

    gw_exchange_head_in(rq, x, gw_upstream_status(x->upstream));
    gw_answer_reset(a);
    a->status = (unsigned)x->status;
    if (carries_body(rq->method, x->status) &&
        gw_upstream_whole_body(x->upstream, &a->body, &a->body_len)) {
        a->kind = GW_ANSWER_COPY;
    } else {
        a->kind = GW_ANSWER_STREAM;
        a->length = gw_upstream_content_length(x->upstream);
        a->read = read_body;
    }
    fields = gw_upstream_fields(x->upstream, &fields_len);
    if (gw_exchange_answer_fields(rq, fields, fields_len) != 0) {
        gw_answer_reset(a);
        return GW_ANSWERED; /* no answer: the adapter closes the connection */
    }
    gw_pipeline_answer(rq);
    return GW_ANSWERED;
}

/* Forwards the request until the upstream's head is in; run again after each wait. */
static enum gw_step forward(struct gw_req *rq, struct exchange *x)
{
    enum gw_upstream_error error;

    do {
        if (x->upstream == NULL && (error = gw_exchange_send(rq, x)) != GW_UPSTREAM_OK)
            return gw_exchange_answer_failure(rq, x, error);
        /* Its body has ended: what is left of it goes, and its last byte (body.h). */
        error = rq->has_body && !x->body_dropped ? gw_upstream_feed(x->upstream, false)
                                                 : GW_UPSTREAM_OK;
        if (error == GW_UPSTREAM_OK || error == GW_UPSTREAM_ANSWERED)
            error = gw_upstream_head(x->upstream);
        if (error == GW_UPSTREAM_PENDING) {
            gw_req_will_wait(rq);
            return GW_WAIT;
        }
    } while (gw_exchange_end(rq, x, error,
                             error == GW_UPSTREAM_OK ? gw_upstream_status(x->upstream) : 0));
    if (error != GW_UPSTREAM_OK)
        return gw_exchange_failed(rq, x, error);
    return answer(rq, x);
}

/* The body's end: the answer to a failure met on the way, the upgrade, or the body's last
 * bytes sent and the upstream's answer awaited. */
static enum gw_step content(struct gw_req *rq, void *ctx)
{
    struct exchange *x = ctx;

    if (rq->refusal != 0) {
        gw_exchange_drop(x);
        return GW_ANSWERED;
    }
    if (x->upstream_error != GW_UPSTREAM_OK)
        return gw_exchange_failed(rq, x, x->upstream_error);
    if (x->upgrade != NULL)
        return gw_exchange_upgrade(rq, x);
    if (rq->has_body && !x->body.ended) {
        x->body.ended = true;
        if (x->upstream == NULL)
            x->body.length = (int64_t)x->body.received; /* it fit: it goes with its length */
    }
    return forward(rq, x);
}

static void on_log(const struct gw_req *rq, void *ctx, struct gw_access_entry *entry)
{
    struct exchange *x = ctx;

    entry->upstream_status = x->status;
    entry->upstream_ns = x->head_ns ? x->head_ns - rq->start_ns : 0;
    entry->dropped_headers = x->dropped_headers;
    entry->upstream_error = gw_fault_name(x->fault);
    if (x->attempts > 0)
        entry->upstream_server = gw_req_route(rq)->upstream.servers[x->server].url;
}

static void on_free(struct gw_req *rq, void *ctx)
{
    struct exchange *x = ctx;

    (void)rq;
    gw_exchange_drop(x);
    free(x->headers);
    free(x->header_text);
    free(x->url);
    gw_body_free(&x->body);
    if (x->upgrade_asked)
        gw_upgrade_free(&x->up); /* unless a tunnel took its connection */
    free(x->upgrade_field);
}

struct gw_module gw_forward_module = {
    .name = "forward",
    .ctx_size = sizeof(struct exchange),
    .on = {[GW_PHASE_ROUTE] = check_route,
           [GW_PHASE_SEND] = send_early,
           [GW_PHASE_CONTENT] = content},
    .on_body = take_body,
    .on_log = on_log,
    .on_free = on_free,
    .route_open = gw_upstream_route_open,
    .route_close = gw_upstream_route_close,
    .gauges = gw_upstream_routes_render,
};
