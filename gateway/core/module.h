/*
 * module: one concern of a request's life (routing, access, limits, forwarding, upgrades,
 * logging), as the pipeline (pipeline.h) runs it. A module is a table of hooks, each optional:
 *
 *   on[PHASE]      its step in that phase (request.h's enum gw_phase): NEXT, WAIT or
 *                  ANSWERED. In a phase the modules' steps run in the order they were
 *                  registered; a phase ends when every step has said NEXT.
 *   on_body        a piece of the request body, `*size` bytes at `data`, left in `*size`
 *                  when the module cannot take it yet (WAIT). ANSWERED refuses the rest.
 *   on_answer      every answer passes here before it goes (the module's fields on it, or,
 *                  for a denial, the module's status and body); it may also say that an
 *                  upstream's field is its own (owns_field), so the client gets one copy.
 *   on_log         its fields of the access log line, and its metrics, once as the request
 *                  ends for its client.
 *   on_free        lets go of what its context holds.
 *   route_open     its state for route `route` of a runtime being built (runtime.h), which
 *                  it may carry over from `previous` (NULL, or the runtime it replaces);
 *                  route_close frees it with the runtime. Its steps read it with
 *                  gw_req_route_state().
 *   gauges         its lines for /metrics that read the runtime's state.
 *
 * Its per-request context is `ctx_size` bytes, zeroed, that the request carries
 * (gw_req_ctx()); nothing else of the request knows its layout.
 *
 * Its YAML keys are its `options`: blocks of its own layout (config/blocks.h), one for server:
 * and one for each route at most, that the pipeline registers with config/ along with the
 * module, so that every config loaded after reads them; its steps read them with
 * config_route_block() and config_server_block(), or keep them in their per-route state.
 * What every module reads (a route's match, upstream, limits) config/ reads itself.
 */
#ifndef SLUICE_GATEWAY_CORE_MODULE_H
#define SLUICE_GATEWAY_CORE_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config/blocks.h"
#include "gateway/core/request.h"
#include "gateway/ops/access_log.h"

typedef enum gw_step gw_step_fn(struct gw_req *rq, void *ctx);

#define GW_MODULE_BLOCKS 2 /* of YAML keys: one for server:, one for each route */

struct gw_module {
    const char *name;
    size_t ctx_size;
    struct config_block *options[GW_MODULE_BLOCKS]; /* each, or NULL */
    gw_step_fn *on[GW_PHASE_COUNT];
    enum gw_step (*on_body)(struct gw_req *rq, void *ctx, const char *data, size_t *size);
    void (*on_answer)(struct gw_req *rq, void *ctx, struct gw_answer *answer);
    bool (*owns_field)(const struct gw_req *rq, const void *ctx, const char *name);
    void (*on_log)(const struct gw_req *rq, void *ctx, struct gw_access_entry *entry);
    void (*on_free)(struct gw_req *rq, void *ctx);
    int (*route_open)(struct gw_runtime *rt, size_t route, const struct gw_runtime *previous,
                      void **state, char *err, size_t err_len);
    void (*route_close)(struct gw_runtime *rt, size_t route, void *state);
    void (*gauges)(const struct gw_runtime *rt, FILE *out);
    unsigned id; /* its place, set by gw_pipeline_register() */
};

/* The context of `module` in `rq`. */
void *gw_req_ctx(const struct gw_req *rq, const struct gw_module *module);

/* The state of `module` for route `route` of `rt` (route_open's), or NULL. */
void *gw_runtime_state(const struct gw_runtime *rt, size_t route, const struct gw_module *module);

/* Its state for the request's route (found). */
void *gw_req_route_state(const struct gw_req *rq, const struct gw_module *module);

#endif
