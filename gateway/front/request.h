/*
 * request: the HTTP adapter's side of a request, the only code that turns libmicrohttpd's
 * callbacks into the library-neutral request of gateway/core (request.h) and back. front.c
 * calls it from libmicrohttpd's callbacks; the request's life is the phases (pipeline.h) run
 * by the modules (the folders of gateway/modules).
 *
 *   first call      the header fields become the request's field view, the peer and TLS its
 *                   facts; the strict reader's verdict (head.h) is a refusal; the head's phases
 *                   run. A request refused with a body still to come is answered at once (and
 *                   its connection then closed, rather than reading a body that goes nowhere);
 *                   otherwise the answer waits for the final call.
 *   body calls      each piece to the phases (gw_pipeline_body()).
 *   final call      the strict reader must have seen the whole message; the CONTENT phase
 *                   answers, and the answer (answer.h) becomes libmicrohttpd's response: a
 *                   buffer, a stream read as the client takes it, or an upgrade.
 *
 * Waiting is this adapter's: on an event loop (`loop` given) a step that waits has its
 * connection suspended (MHD_suspend_connection) and resumed when it may go on, after which
 * libmicrohttpd calls again and the same step runs again; a step's blocking work (an
 * upgrade's connection) goes to `offload`'s threads. With no loop (thread_per_connection) the
 * connection's thread blocks on the request's semaphore instead, and blocking work runs on it.
 * No module asks which mode it runs in.
 *
 * A request holds its runtime (runtime.h) from start to end, so it runs on one config whole.
 */
#ifndef SLUICE_GATEWAY_REQUEST_H
#define SLUICE_GATEWAY_REQUEST_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/core/runtime.h"

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
 * connection's thread waits. A wait for an instant (a limit's delay:) is kept by `sleeper`
 * (sleeper.h) in both modes. NULL when memory is short. */
struct gw_sleeper;
struct gw_request *gw_request_new(struct gw_runtime *runtime, const char *raw_uri,
                                  const struct gw_head *head, struct gw_access_memo *memo,
                                  uint32_t index, struct gw_loop *loop, struct gw_offload *offload,
                                  struct gw_sleeper *sleeper, struct gw_tunnels *tunnels);

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
