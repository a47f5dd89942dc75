/* The header fields a request is sent upstream with; design in upstream_headers.h. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/common/headers.h"
#include "gateway/common/text.h"
#include "gateway/modules/forward/upstream_headers.h"

/* The lines are built in one text buffer rather than a malloc or two per field. */
struct walk {
    struct gw_upstream_lines *out;
    size_t cap;
    bool failed, has_accept, has_content_type, has_proto, has_forwarded_host;
};

/* Appends one line made of `n` parts. */
static void append_parts(struct walk *w, const char *const *parts, size_t n)
{
    struct gw_upstream_lines *o = w->out;
    size_t lens[5], need = 1;

    for (size_t i = 0; i < n; i++)
        need += lens[i] = strlen(parts[i]);
    if (o->len + need > w->cap) {
        size_t cap = w->cap ? w->cap : 2048;
        char *grown;

        while (cap < o->len + need)
            cap *= 2;
        grown = realloc(o->text, cap);
        if (grown == NULL) {
            w->failed = true;
            return;
        }
        o->text = grown;
        w->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(o->text + o->len, parts[i], lens[i]);
        o->len += lens[i];
    }
    o->text[o->len++] = '\0';
    o->lines++;
}

static void append_line(struct walk *w, const char *line)
{
    append_parts(w, &line, 1);
}

/* Appends "name: value", noting the fields the gateway adds only when they are absent. */
static void append_field(struct walk *w, const char *name, const char *value)
{
    /* "Name;" is how libcurl sends a field with an empty value ("Name:" removes it). */
    const char *parts[] = {name, value[0] ? ": " : ";", value};

    w->has_proto |= strcasecmp(name, "X-Forwarded-Proto") == 0;
    w->has_forwarded_host |= strcasecmp(name, "X-Forwarded-Host") == 0;
    w->has_accept |= strcasecmp(name, "Accept") == 0;
    w->has_content_type |= strcasecmp(name, "Content-Type") == 0;
    append_parts(w, parts, value[0] ? 3 : 2);
}

/* Fields the gateway itself sets, or that libcurl derives from the body. A trusted proxy's
 * X-Forwarded-Proto and -Host describe the client's side of it, and are kept. */
static bool replaced_by_gateway(const char *name, bool trusted_peer)
{
    static const char *const replaced[] = {"Host", "Content-Length", "Expect", "X-Forwarded-For"};

    for (size_t i = 0; i < sizeof replaced / sizeof replaced[0]; i++)
        if (strcasecmp(name, replaced[i]) == 0)
            return true;
    return !trusted_peer && (strcasecmp(name, "X-Forwarded-Proto") == 0 ||
                             strcasecmp(name, "X-Forwarded-Host") == 0);
}

/* The fields of the request's id and trace, which the gateway sends itself. */
static bool replaced_by_trace(const char *name, bool keep_tracestate)
{
    return strcasecmp(name, "X-Request-Id") == 0 || strcasecmp(name, "traceparent") == 0 ||
           (!keep_tracestate && strcasecmp(name, "tracestate") == 0);
}

/* Whether the route's remove_headers names the field: neither the client's copy nor the
 * gateway's own (X-Forwarded-*) is forwarded. */
static bool removed_by_route(const struct config_route *route, const char *name)
{
    for (size_t i = 0; i < route->forwarding.n_remove_headers; i++)
        if (strcasecmp(name, route->forwarding.remove_headers[i]) == 0)
            return true;
    return false;
}

/* Whether the route's set_headers or remove_headers name the field. */
static bool replaced_by_route(const struct config_route *route, const char *name)
{
    for (size_t i = 0; i < route->forwarding.n_set_headers; i++)
        if (strcasecmp(name, route->forwarding.set_headers[i].name) == 0)
            return true;
    return removed_by_route(route, name);
}

/* The client's fields that go on as they came. */
static void copy_client_fields(struct walk *w, const struct gw_req *rq)
{
    const struct config_route *route = gw_req_route(rq);
    const char *consumer_header = rq->config->server.consumer_header;

    for (size_t i = 0; i < rq->fields.n && !w->failed; i++) {
        const char *name = rq->fields.at[i].name, *value = rq->fields.at[i].value;

        if (value == NULL || gw_header_is_hop_by_hop(name, rq->connection) ||
            replaced_by_gateway(name, rq->trusted_peer) || replaced_by_route(route, name) ||
            replaced_by_trace(name, rq->trace.continued) ||
            (consumer_header != NULL && strcasecmp(name, consumer_header) == 0))
            continue;
        if (!rq->config->server.underscores_in_headers && strchr(name, '_') != NULL) {
            w->out->dropped++;
            continue;
        }
        append_field(w, name, value);
    }
}

/* `addr` as text into the `cap` bytes at `out`. */
static void write_address(char *out, size_t cap, const struct gw_addr *addr)
{
    struct gw_text t = gw_text_on(out, cap - 1);

    gw_text_address(&t, addr->family, addr->bytes);
    gw_text_finish(&t);
}

/* Appends `name: template` with its ${request.*} filled in. */
static void append_set_header(struct walk *w, const struct gw_req *rq, const char *name,
                              const char *template, const char *client_text)
{
    static const char *const variables[] = {"${request.client_addr}", "${request.consumer}",
                                            "${request.id}"};
    char value[4096];
    struct gw_text t = gw_text_on(value, sizeof value - 1);

    for (const char *at = template; *at != '\0' && !gw_text_full(&t);) {
        const char *fill = NULL;
        size_t skip = 0;

        for (size_t v = 0; v < 3 && fill == NULL; v++)
            if (strncmp(at, variables[v], strlen(variables[v])) == 0) {
                skip = strlen(variables[v]);
                fill = v == 0   ? client_text
                       : v == 1 ? (rq->consumer != NULL ? rq->consumer : "")
                                : rq->request_id;
            }
        if (fill == NULL) {
            gw_text_put(&t, at++, 1);
            continue;
        }
        gw_text_str(&t, fill);
        at += skip;
    }
    gw_text_finish(&t);
    append_field(w, name, value);
}

/* The route's set_headers, then Host and the X-Forwarded-* fields. */
static void add_gateway_fields(struct walk *w, const struct gw_req *rq, const char *host)
{
    const struct config_route *route = gw_req_route(rq);
    const char *forwarded_for = rq->forwarded_for;
    char peer_text[64] = "unknown", client_text[64] = "";

    if (rq->has_peer) {
        write_address(peer_text, sizeof peer_text, &rq->peer);
        /* The client as its keys see it: behind trusted proxies, their X-Forwarded-For's. */
        if (route->forwarding.n_set_headers > 0)
            write_address(client_text, sizeof client_text, &rq->client);
    }
    for (size_t i = 0; i < route->forwarding.n_set_headers; i++)
        append_set_header(w, rq, route->forwarding.set_headers[i].name,
                          route->forwarding.set_headers[i].value, client_text);
    if (host != NULL)
        append_field(w, "Host", host);
    if (!removed_by_route(route, "X-Forwarded-For")) {
        const char *xff[] = {"X-Forwarded-For: ", forwarded_for ? forwarded_for : "",
                             forwarded_for ? ", " : "", peer_text};

        append_parts(w, xff, 4);
    }
    if (!w->has_proto && !removed_by_route(route, "X-Forwarded-Proto"))
        append_field(w, "X-Forwarded-Proto", rq->tls ? "https" : "http");
    if (rq->host != NULL && !w->has_forwarded_host && !removed_by_route(route, "X-Forwarded-Host"))
        append_field(w, "X-Forwarded-Host", rq->host);
}

/* The request's id and trace, the consumer, an upgrade's fields, and libcurl's blanks. */
static void add_request_fields(struct walk *w, const struct gw_req *rq, const char *upgrade_field)
{
    const struct config_route *route = gw_req_route(rq);
    const char *consumer_header = rq->config->server.consumer_header;

    if (!replaced_by_route(route, "X-Request-Id"))
        append_field(w, "X-Request-Id", rq->request_id);
    if (rq->trace.trace_id[0] != '\0' && !replaced_by_route(route, "traceparent")) {
        char traceparent[GW_TRACEPARENT_LEN];

        gw_traceparent_format(&rq->trace, traceparent);
        append_field(w, "traceparent", traceparent);
    }
    if (consumer_header != NULL && rq->consumer != NULL &&
        !replaced_by_route(route, consumer_header))
        append_field(w, consumer_header, rq->consumer);
    if (upgrade_field != NULL) { /* hop-by-hop, but what this hop is for */
        append_field(w, "Connection", "Upgrade");
        append_field(w, "Upgrade", upgrade_field);
    }
    /* Empty values: libcurl leaves out the fields it would add of its own. */
    append_line(w, "Expect:");
    if (!w->has_accept)
        append_line(w, "Accept:");
    if (!w->has_content_type)
        append_line(w, "Content-Type:");
}

int gw_upstream_lines(const struct gw_req *rq, const char *host, const char *upgrade_field,
                      struct gw_upstream_lines *out)
{
    struct walk w = {.out = out};

    *out = (struct gw_upstream_lines){0};
    copy_client_fields(&w, rq);
    add_gateway_fields(&w, rq, host);
    add_request_fields(&w, rq, upgrade_field);
    if (!w.failed)
        return 0;
    free(out->text);
    *out = (struct gw_upstream_lines){0};
    return -1;
}
