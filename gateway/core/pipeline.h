/*
 * pipeline: the modules a request passes (module.h), and the loop that runs its phases
 * (request.h), after nginx's phase engine. Where a request is in its life is its phase and
 * the module whose step runs in it: a step that waits is run again when the request resumes,
 * and a request answered early skips to its end.
 *
 * The HTTP adapter drives it: gw_pipeline_head() once the head is in (and after each wait in
 * it), gw_pipeline_body() for each piece of body, gw_pipeline_content() at the body's end (and
 * after each wait there), gw_pipeline_finish() when the request is over for its client, and
 * gw_pipeline_answer() for the answer of a request refused (each module's answer hook runs on
 * every answer).
 *
 * Modules are registered once, before the first request, by the composition root
 * (gateway/modules.c); their order is the order of their steps within a phase.
 */
#ifndef SLUICE_GATEWAY_CORE_PIPELINE_H
#define SLUICE_GATEWAY_CORE_PIPELINE_H

#include <stddef.h>

#include "gateway/core/module.h"

/* Registers `modules` (`n`, in order) and gives each its id, and their options with config/
 * (config_block_register()); before any config is loaded. 0, or -1 when there are too many
 * modules or blocks, or a module's key is already another's. */
int gw_pipeline_register(struct gw_module *const *modules, size_t n);

/* The bytes a request takes with its modules' contexts (gw_req_new()). */
size_t gw_pipeline_request_size(void);

/* Runs the head's phases (READ to SEND) from where the request is: NEXT when its body (if
 * any) may come and the request goes on at gw_pipeline_content(); WAIT; or ANSWERED (refused). */
enum gw_step gw_pipeline_head(struct gw_req *rq);

/* A piece of body for the modules that take it (on_body). */
enum gw_step gw_pipeline_body(struct gw_req *rq, const char *data, size_t *size);

/* Runs CONTENT from where the request is: WAIT, or ANSWERED (rq->answer, or rq->refusal). */
enum gw_step gw_pipeline_content(struct gw_req *rq);

/* The gateway's own answer `status`: a problem+json body with `detail`, the route and the
 * request's id, into rq->answer, then every module's answer hook (gw_pipeline_answer()). When
 * it is the request's refusal, it ends the connection as gw_req_refusal_closes() says. 0, or
 * -1 when memory is short. */
int gw_pipeline_problem(struct gw_req *rq, unsigned status, const char *detail);

/* The answer of a request refused (rq->refusal), as gw_pipeline_problem(). */
int gw_pipeline_refusal(struct gw_req *rq);

/* Every module's answer hook on rq->answer (an answer a module made), then X-Request-Id. */
void gw_pipeline_answer(struct gw_req *rq);

/* Whether a module claims the upstream's field `name` as its own (owns_field). */
bool gw_pipeline_owns_field(const struct gw_req *rq, const char *name);

/* The request is over for its client: LOG's hooks, once. */
void gw_pipeline_finish(struct gw_req *rq);

/* Every module's on_free (gw_req_free() calls it). */
void gw_pipeline_free(struct gw_req *rq);

/* Every module's state for route `route` of `rt` (route_open), for gw_runtime_build(). 0, or
 * -1 with `err` filled (what was opened is closed with the runtime). */
int gw_pipeline_route_open(struct gw_runtime *rt, size_t route, const struct gw_runtime *previous,
                           char *err, size_t err_len);
void gw_pipeline_route_close(struct gw_runtime *rt, size_t route);

/* Every module's gauges. */
void gw_pipeline_gauges(const struct gw_runtime *rt, FILE *out);

#endif
