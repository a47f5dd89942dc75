/* One request as every phase sees it; design in request.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/pipeline.h"
#include "gateway/core/request.h"
#include "limiter/limiter.h"

struct gw_req *gw_req_new(const struct gw_req_spec *spec)
{
    struct gw_req *rq = calloc(1, gw_pipeline_request_size());

    if (rq == NULL || (rq->target = strdup(spec->target)) == NULL) {
        free(rq);
        gw_runtime_release(spec->runtime);
        return NULL;
    }
    rq->runtime = spec->runtime;
    rq->config = spec->runtime->config;
    rq->io = spec->io;
    rq->upstream_loop = spec->upstream_loop;
    rq->tunnels = spec->tunnels;
    rq->memo = spec->memo;
    rq->method = spec->method;
    rq->http11 = spec->http11;
    rq->tls = spec->tls;
    rq->has_peer = spec->has_peer;
    rq->peer = spec->peer;
    rq->content_length = -1;
    rq->route = -1;
    rq->decision = GW_ALLOWED;
    rq->start_ns = limiter_now_ns();
    gw_fields_init(&rq->fields);
    gw_fields_init(&rq->answer.fields);
    gw_metrics_in_flight(rq->runtime->metrics, 1);
    return rq;
}

/* The request's id and trace context (trace.h): a client's X-Request-Id is believed only
 * from a trusted peer, sent once and sane. */
static void name_request(struct gw_req *rq)
{
    const char *id, *parent;
    unsigned n_ids = gw_fields_count(&rq->fields, "X-Request-Id", &id);
    unsigned n_parents = gw_fields_count(&rq->fields, "traceparent", &parent);

    if (rq->trusted_peer && n_ids == 1 && id != NULL && gw_request_id_is_sane(id))
        snprintf(rq->request_id, sizeof rq->request_id, "%s", id);
    else
        gw_request_id_new(rq->request_id);
    gw_trace_begin(&rq->trace, n_parents == 1 ? parent : NULL, rq->config->tracing.sample);
}

void gw_req_begin(struct gw_req *rq)
{
    const struct config_cidrs *trusted = &rq->config->server.trusted_proxies;
    const char *length = gw_fields_get(&rq->fields, "Content-Length");
    bool chunked = gw_fields_get(&rq->fields, "Transfer-Encoding") != NULL;

    rq->begun = true;
    /* The adapter's reader let through no Content-Length beside Transfer-Encoding. */
    rq->has_body = length != NULL || chunked;
    rq->empty_body = length != NULL && strcmp(length, "0") == 0 && !chunked;
    rq->content_length = length != NULL ? (int64_t)strtoull(length, NULL, 10) : -1;
    rq->trusted_peer = rq->has_peer && gw_cidrs_contain(trusted, &rq->peer);
    rq->host = gw_fields_get(&rq->fields, "Host");
    rq->user_agent = gw_fields_get(&rq->fields, "User-Agent");
    rq->connection = gw_fields_join(&rq->fields, "Connection");
    rq->forwarded_for = gw_fields_join(&rq->fields, "X-Forwarded-For");
    if (rq->has_peer)
        rq->client = gw_client_addr(&rq->peer, rq->forwarded_for, trusted);
    name_request(rq);
}

int gw_req_hold(struct gw_req *rq, void (*release)(void *arg), void *arg)
{
    struct gw_hold *h = malloc(sizeof *h);

    if (h == NULL)
        return -1;
    *h = (struct gw_hold){release, arg, rq->holds};
    rq->holds = h;
    return 0;
}

struct gw_hold *gw_req_take_holds(struct gw_req *rq)
{
    struct gw_hold *holds = rq->holds;

    rq->holds = NULL;
    return holds;
}

void gw_holds_release(struct gw_hold *holds)
{
    for (struct gw_hold *h = holds, *next; h != NULL; h = next) {
        next = h->next;
        h->release(h->arg);
        free(h);
    }
}

void gw_req_answer_whole(struct gw_req *rq)
{
    gw_holds_release(gw_req_take_holds(rq));
}

void gw_req_free(struct gw_req *rq)
{
    /* The modules let go first (an upstream attempt ends before the request is out of flight),
     * keeping what their log hooks read; then the request is counted and logged, if it was
     * not yet. */
    gw_pipeline_free(rq);
    gw_pipeline_finish(rq);
    gw_holds_release(rq->holds);
    gw_runtime_release(rq->runtime);
    gw_answer_free(&rq->answer);
    gw_fields_free(&rq->fields);
    free(rq->connection);
    free(rq->forwarded_for);
    free(rq->path);
    free(rq->target);
    free(rq);
}

const struct config_route *gw_req_route(const struct gw_req *rq)
{
    return rq->route >= 0 ? &rq->config->routes[rq->route] : NULL;
}

struct gw_route_runtime *gw_req_route_runtime(const struct gw_req *rq)
{
    return &rq->runtime->routes[rq->route];
}

void gw_req_refuse(struct gw_req *rq, unsigned status, const char *detail)
{
    if (rq->refusal == 0) {
        rq->refusal = status;
        rq->refusal_detail = detail;
    }
}

bool gw_req_refusal_closes(const struct gw_req *rq)
{
    if (rq->decision == GW_DENIED) /* on_limit's status, 429 or 503 */
        return false;
    switch (rq->refusal) {
    case 0:
    case 401:
    case 403:
    case 404:
    case 429:
        return false;
    default:
        return true;
    }
}

enum gw_decision gw_req_outcome(const struct gw_req *rq)
{
    if (rq->decision == GW_DENIED || rq->refusal == 0)
        return rq->decision;
    if (rq->refusal == 401)
        return GW_UNAUTHENTICATED;
    if (rq->refusal == 403)
        return GW_FORBIDDEN;
    return rq->refusal >= 500 ? GW_FAILED : GW_REFUSED;
}

void gw_req_entry(const struct gw_req *rq, struct gw_access_entry *entry)
{
    const struct config_route *route = gw_req_route(rq);

    *entry = (struct gw_access_entry){
        .route = route ? route->name : NULL,
        .method = rq->method && !rq->stand_in ? rq->method : "-",
        .target = rq->stand_in ? "-" : rq->target,
        .status = rq->status,
        .decision = gw_decision_name(rq->decision),
        .duration_ns = limiter_now_ns() - rq->start_ns,
        .bytes = rq->bytes,
        .user_agent = rq->user_agent,
        .consumer = rq->consumer,
        .plan = rq->plan,
        .upstream_error = "",
        .upstream_server = "",
        .request_id = rq->request_id,
        .trace_id = rq->trace.trace_id,
        .host = rq->stand_in ? NULL : rq->host,
        .memo = rq->memo,
        .protocol = rq->stand_in ? ""
                    : rq->http11 ? "HTTP/1.1"
                                 : "HTTP/1.0",
    };
}

void gw_req_out_of_flight(struct gw_req *rq)
{
    if (rq->runtime != NULL && !rq->out_of_flight) {
        rq->out_of_flight = true;
        gw_metrics_in_flight(rq->runtime->metrics, -1);
    }
}

void gw_req_will_wait(struct gw_req *rq)
{
    rq->io->suspend(rq);
}

void gw_req_resume(struct gw_req *rq)
{
    rq->io->resume(rq, false);
}

void gw_req_hand_back(struct gw_req *rq)
{
    rq->io->resume(rq, true);
}

int gw_req_sleep(struct gw_req *rq, int64_t until_ns, enum gw_woken *why)
{
    return rq->io->sleep != NULL ? rq->io->sleep(rq, until_ns, why) : -1;
}

void gw_req_aside(struct gw_req *rq, void (*job)(struct gw_req *rq))
{
    rq->io->aside(rq, job);
}
