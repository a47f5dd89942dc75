/*
 * request: one request's life inside the gateway, driven by libmicrohttpd's callbacks in
 * server.c. With the headers in, the route is matched, the client key worked out and the
 * route's limits asked together (limiter_decide_all, or the Redis store); a refused request is
 * answered by sluice itself, without reading a body it does not need or touching the upstream.
 * An allowed one is forwarded with upstream handles taken from the pool for the time of the
 * exchange (proxy.h), its body streamed upstream as it arrives (body.h; up to
 * server.max_body), and its answer streamed back with the RateLimit fields added. When it
 * ends, it is counted and logged.
 *
 * The life is written once, as steps that may each have to wait: for the store's answer (event
 * mode only), for the upstream to take more of the request body, for the response head, for
 * more response body. At a wait the request asks whether it can
 * go on; in thread_per_connection the answer is always yes, since the connection's thread
 * blocks inside the call (proxy.h without a loop), and in event mode a "not yet" suspends the
 * connection (MHD_suspend_connection) and the loop resumes it at the next step, after which
 * libmicrohttpd calls the handler (or the content reader) again and the request picks up where
 * it stopped. Later features (pools, retries, upgrades, streamed bodies) add steps, not modes.
 *
 * A request holds its runtime (runtime.h) from start to end, so it runs on one config whole.
 */
#ifndef SLUICE_GATEWAY_REQUEST_H
#define SLUICE_GATEWAY_REQUEST_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/front/runtime.h"

struct gw_access_memo;
struct gw_head;
struct gw_request;
struct gw_loop;
struct gw_offload;
struct gw_tunnels;

/* A request that has just named its target, the `index`th (from 0) on a connection whose
 * strict reading is `head` (head.h) and whose access log memo is `memo` (access_log.h); both
 * must outlive the request. It takes over the caller's reference to `runtime`. An upgrade it
 * allows is joined to the upstream in `tunnels`. On an event loop (`loop`, loop.h) the request
 * never blocks: it waits for the upstream, and for the Redis store (asked on `offload`'s
 * threads), with its connection suspended. With NULL for both (thread_per_connection) the
 * connection's thread waits. NULL when memory is short. */
struct gw_request *gw_request_new(struct gw_runtime *runtime, const char *raw_uri,
                                  const struct gw_head *head, struct gw_access_memo *memo,
                                  uint32_t index, struct gw_loop *loop, struct gw_offload *offload,
                                  struct gw_tunnels *tunnels);

/* One call of libmicrohttpd's access handler for this request. */
enum MHD_Result gw_request_handle(struct gw_request *rq, struct MHD_Connection *c,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size);

/* Whether the request was answered 101: its connection went to a tunnel (tunnel.h). */
bool gw_request_upgraded(const struct gw_request *rq);

/* Whether the request's body is still to come from the client (not while the request waits
 * for the store or the upstream, nor once it is answered). */
bool gw_request_reading_body(const struct gw_request *rq);

/* The request is over (answered, or the client left): counts it, logs it, frees it. */
void gw_request_done(struct gw_request *rq);

#endif
