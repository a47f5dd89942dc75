/*
 * fetch: one HTTP exchange made by a command (`sluice --healthcheck`, `sluice quota`) on the
 * calling thread, with libcurl: never on the request path, and never through a proxy (the
 * environment's http_proxy is not for a call that carries a token).
 */
#ifndef SLUICE_GATEWAY_UPSTREAM_FETCH_H
#define SLUICE_GATEWAY_UPSTREAM_FETCH_H

#include <stddef.h>

/* What to ask: `method` `url`, with `headers` ("Name: value" each, NULL-terminated; NULL:
 * none), within `timeout_ms` for the whole exchange. */
struct gw_fetch_ask {
    const char *method;
    const char *url;
    const char *const *headers;
    long timeout_ms;
};

/* What came back: the status, and the body (NUL-terminated, the caller frees it; NULL when
 * not kept), at most `max_body` bytes of it (0: none kept). */
struct gw_fetch_answer {
    long status;
    char *body;
    size_t max_body;
};

/* Makes the exchange. 0 when an answer came (any status); otherwise -1, and *why says why in
 * libcurl's words (a static string), or is NULL when no request could be made (no memory). */
int gw_fetch(const struct gw_fetch_ask *ask, struct gw_fetch_answer *answer, const char **why);

/* A component of a URL's query, %-escaped (every byte but letters, digits and -._~), into a
 * string the caller frees; NULL when memory is short. */
char *gw_fetch_escape(const char *text);

#endif
