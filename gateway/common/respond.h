/*
 * What sluice itself says to a client: the RateLimit fields of
 * draft-ietf-httpapi-ratelimit-headers-11, Retry-After, and RFC 9457 problem+json bodies.
 *
 *   RateLimit-Policy: "api";q=100;w=60      quota 100 per 60 s window
 *   RateLimit: "api";r=0;t=17               0 left, full quota back in 17 s
 *   Retry-After: 3                          whole seconds, rounded up, never 0
 */
#ifndef SLUICE_GATEWAY_RESPOND_H
#define SLUICE_GATEWAY_RESPOND_H

#include <stddef.h>
#include <stdint.h>

#include "limiter.h"

#define GW_FIELD_LEN 160
#define GW_DENIED_DETAIL "rate limit exceeded; retry after the time in Retry-After"

void gw_format_policy(char out[GW_FIELD_LEN], const char *route,
                      const struct limiter_params *params);

void gw_format_ratelimit(char out[GW_FIELD_LEN], const char *route,
                         const struct limiter_decision *decision);

/* Seconds to send as Retry-After: enough to wait, at least 1. */
int64_t gw_retry_after_seconds(int64_t retry_after_ms);

/* A problem+json body for `status`, with `detail` and, when not NULL, the route. Returns a
 * string the caller frees, or NULL when memory is short. */
char *gw_problem_json(unsigned status, const char *detail, const char *route);

/* Writes the first `len` bytes of `text` (or up to its NUL), escaped for the inside of a
 * JSON string, into `out` (cut short rather than overflow); returns the length written. */
size_t gw_json_escape(char *out, size_t cap, const char *text, size_t len);

/* The reason phrase of an HTTP status sluice sends itself. */
const char *gw_status_title(unsigned status);

#endif
