/*
 * What sluice itself says to a client: the RateLimit fields of
 * draft-ietf-httpapi-ratelimit-headers-11, Retry-After, and RFC 9457 problem+json bodies.
 *
 *   RateLimit-Policy: "api";q=100;w=60      quota 100 per 60 s window
 *   RateLimit: "api";r=0;t=17               0 left, full quota back in 17 s
 *   Retry-After: 3                          whole seconds, rounded up, never 0
 *
 * The draft's q is the quota a client may spend within a window of w seconds, and r what is
 * left of it now, t the seconds until it is whole again. For the windows (fixed, sliding log,
 * sliding counter) q is `requests` and w is `per`. For a bucket (token_bucket, gcra) what a
 * client can send at once is the burst, not `requests`: q is the burst and w the time the
 * bucket takes to refill it (burst * per / requests, rounded up), so `requests: 10, per: 1s,
 * burst: 5` is q=5;w=1, and `requests: 60, per: 1m` (burst 60 by default) is q=60;w=60. t is
 * never more than w: a sliding window counter's estimate can take up to two windows to fall
 * to zero, but the quota is whole again, as the draft means it, within one. A concurrency
 * limit has no window: its policy is q=requests;qu="concurrent-requests" (the draft's unit for
 * requests in flight), its t 1 s at most (when a slot comes back, nothing says: Retry-After
 * is 1).
 *
 * The X-RateLimit-* fields that GitHub-, Kong- and Envoy-fronted clients read carry the same
 * figures for the limit that binds: X-RateLimit-Limit q, X-RateLimit-Remaining r,
 * X-RateLimit-Reset t (seconds from now).
 */
#ifndef SLUICE_GATEWAY_RESPOND_H
#define SLUICE_GATEWAY_RESPOND_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/common/text.h"
#include "limiter/limiter.h"

#define GW_FIELD_LEN 160
#define GW_DENIED_DETAIL "rate limit exceeded; retry after the time in Retry-After"

/* The quota q of `params` as above, and its window w in seconds (at least 1) into `*window`.
 * `params` has its algorithm_id set, as a config's limits and limiter_get_params() have. */
uint64_t gw_quota(const struct limiter_params *params, int64_t *window);

void gw_format_policy(char out[GW_FIELD_LEN], const char *name,
                      const struct limiter_params *params);

void gw_format_ratelimit(char out[GW_FIELD_LEN], const char *name,
                         const struct limiter_params *params,
                         const struct limiter_decision *decision);

/* t as above: seconds until the quota of `params` is whole again, at most its window. */
int64_t gw_reset_seconds(const struct limiter_params *params,
                         const struct limiter_decision *decision);

/* Seconds to send as Retry-After: enough to wait, at least 1. */
int64_t gw_retry_after_seconds(int64_t retry_after_ms);

/* A problem+json body for `status`, with `detail` and, when not NULL, the route and the
 * request's id ("request_id"). Returns a string the caller frees, or NULL when memory is
 * short. */
char *gw_problem_json(unsigned status, const char *detail, const char *route,
                      const char *request_id);

/* Writes the first `len` bytes of `text` (or up to its NUL), escaped for the inside of a
 * JSON string, into `out` (cut short rather than overflow, never inside an escape or a
 * character); returns the length written. `"` and `\` get a backslash, control characters
 * and DEL are written \u00XX, well-formed UTF-8 (RFC 3629) passes as it is, and each byte of
 * anything else (a client's Latin-1, a sequence cut short) becomes \ufffd, so the result is
 * always valid JSON. */
size_t gw_json_escape(char *out, size_t cap, const char *text, size_t len);

/* The reason phrase of an HTTP status sluice sends itself. */
const char *gw_status_title(unsigned status);

/* The first `len` bytes of `text` (or up to its NUL) appended to `t`, escaped as
 * gw_json_escape() does, at most `max` - 1 bytes of it. */
void gw_text_json(struct gw_text *t, const char *text, size_t len, size_t max);

#endif
