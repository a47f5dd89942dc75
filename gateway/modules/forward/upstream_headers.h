/*
 * upstream_headers: the header fields a request is sent upstream with, a plain function of
 * the request (request.h) and its route, so a unit test builds a request in memory and reads
 * the lines.
 *
 * The client's end-to-end fields go as they came, except: hop-by-hop ones (and those its
 * Connection names); Host, Content-Length, Expect and X-Forwarded-For (the gateway sets or
 * libcurl derives them); an untrusted peer's X-Forwarded-Proto and -Host; X-Request-Id,
 * traceparent, and tracestate beside an invalid traceparent; server.consumer_header (only the
 * gateway sets it); the fields the route's set_headers or remove_headers name; and, unless
 * server.underscores_in_headers, names with '_' (CGI-style upstreams read X_API_Key as
 * X-API-Key: a second spelling of a field sluice may have keyed on; nginx does the same).
 * Then the gateway's: set_headers with ${request.client_addr}, ${request.consumer} and
 * ${request.id} filled in, Host (as route.host says), X-Forwarded-For with the peer appended,
 * X-Forwarded-Proto and -Host unless given, X-Request-Id, traceparent, the consumer header,
 * and for an upgrade "Connection: Upgrade" and its Upgrade; last, empty fields that keep
 * libcurl from adding its own (Expect, and Accept and Content-Type when absent).
 */
#ifndef SLUICE_GATEWAY_MODULES_FORWARD_UPSTREAM_HEADERS_H
#define SLUICE_GATEWAY_MODULES_FORWARD_UPSTREAM_HEADERS_H

#include <stddef.h>

#include "gateway/core/request.h"

/* The fields as lines in one buffer, "line\0line\0...": "Name: value", or "Name;" for an
 * empty value and "Name:" for a field libcurl must leave out (libcurl's spellings). */
struct gw_upstream_lines {
    char *text; /* the caller frees it */
    size_t len, lines;
    unsigned dropped; /* names with '_' left out */
};

/* The lines for `rq` (its route found) to a server whose Host is `host` (NULL: none), with
 * `upgrade_field` the client's Upgrade when the request is an upgrade (else NULL). 0, or -1
 * when memory is short (nothing to free). */
int gw_upstream_lines(const struct gw_req *rq, const char *host, const char *upgrade_field,
                      struct gw_upstream_lines *out);

#endif
