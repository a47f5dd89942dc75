/*
 * trace: a request's id and its W3C Trace Context (https://www.w3.org/TR/trace-context/),
 * the pure part: what is a sane id, what is a valid traceparent, and the fields sluice sends
 * on. gateway/core/request.c reads the fields and decides whom to believe.
 *
 * Request ids. Every request gets one id, made when it starts: the client's X-Request-Id when
 * the direct peer is in server.trusted_proxies and the field is sent exactly once with a sane
 * value, 1 to GW_REQUEST_ID_MAX (128) bytes of [A-Za-z0-9._:/+=-] (enough for UUIDs, hex,
 * base64 and "host:pid/seq" styles; nothing that needs escaping in a header, a log line or
 * JSON); otherwise 128 random bits as 32 lower-case hex digits.
 *
 * Trace context. A traceparent is read strictly: exactly one field; version 00 is exactly 55
 * characters, `00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>`, lower-case hex only,
 * neither id all zeros. Version ff is invalid; a higher version is read by its first four
 * fields as the spec says (at least 55 characters, and after the flags either the end or a
 * '-'). A valid one is continued: the same trace-id and flags go upstream with sluice's own
 * span id (8 random bytes) as the parent-id, in version 00:
 *
 *   in:  traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
 *   out: traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-<sluice's span id>-01
 *
 * and tracestate goes on untouched. An invalid traceparent counts as absent (and its
 * tracestate is dropped, as the spec asks); then a new trace is started with probability
 * `sample` (tracing.sample: a new trace-id, flags 01), or none is sent.
 */
#ifndef SLUICE_GATEWAY_TRACE_H
#define SLUICE_GATEWAY_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_REQUEST_ID_MAX  128
#define GW_REQUEST_ID_LEN  (GW_REQUEST_ID_MAX + 1)
#define GW_TRACE_ID_LEN    33 /* 32 hex digits and the NUL */
#define GW_SPAN_ID_LEN     17 /* 16 hex digits and the NUL */
#define GW_TRACEPARENT_LEN 56 /* 55 characters and the NUL */

/* A request's trace: `trace_id` "" when it has none (then nothing is sent upstream). */
struct gw_trace {
    char trace_id[GW_TRACE_ID_LEN];
    char span_id[GW_SPAN_ID_LEN]; /* sluice's own, the parent-id sent upstream */
    char flags[3];
    bool continued; /* from a valid incoming traceparent: its tracestate goes on */
};

/* Whether `value` is a sane request id as above. */
bool gw_request_id_is_sane(const char *value);

/* A new request id: 32 random lower-case hex digits. */
void gw_request_id_new(char out[GW_REQUEST_ID_LEN]);

/* Reads `value` as a traceparent into `t` (trace_id and flags; nothing else is touched).
 * 0, or -1 when it is not valid (then `t` is untouched). */
int gw_traceparent_parse(const char *value, struct gw_trace *t);

/* `t` as a version 00 traceparent; `t` must have a trace. */
void gw_traceparent_format(const struct gw_trace *t, char out[GW_TRACEPARENT_LEN]);

/* Whether a new trace is started, for a sampling probability `sample` (0 to 1) and a uniform
 * random `draw`: sample 0 never, sample 1 always. */
bool gw_trace_sampled(double sample, uint32_t draw);

/* The trace of a request whose traceparent is `traceparent` (NULL when absent or sent more
 * than once): continued when valid, else started with probability `sample`, else none. Draws
 * the span id, and a new trace-id, from libsodium. */
void gw_trace_begin(struct gw_trace *t, const char *traceparent, double sample);

#endif
