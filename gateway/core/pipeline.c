/* The modules a request passes, and the loop of its phases; design in pipeline.h. */
#include <stdlib.h>
#include <string.h>

#include "gateway/core/pipeline.h"

#define CTX_ALIGN _Alignof(max_align_t)

static struct gw_module *modules[GW_MODULES_MAX];
static size_t n_modules;
static size_t offsets[GW_MODULES_MAX]; /* each context's place after the request's fields */
static size_t contexts_size;

int gw_pipeline_register(struct gw_module *const *list, size_t n)
{
    if (n > GW_MODULES_MAX)
        return -1;
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < GW_MODULE_BLOCKS; b++)
            if (list[i]->options[b] != NULL && config_block_register(list[i]->options[b]) != 0)
                return -1;
    contexts_size = 0;
    for (size_t i = 0; i < n; i++) {
        modules[i] = list[i];
        modules[i]->id = (unsigned)i;
        offsets[i] = contexts_size;
        contexts_size += (list[i]->ctx_size + CTX_ALIGN - 1) / CTX_ALIGN * CTX_ALIGN;
    }
    n_modules = n;
    return 0;
}

size_t gw_pipeline_request_size(void)
{
    return sizeof(struct gw_req) + contexts_size;
}

void *gw_req_ctx(const struct gw_req *rq, const struct gw_module *module)
{
    return (void *)(rq->contexts + offsets[module->id]);
}

/* Runs the steps from where the request is up to (not into) phase `end`. */
static enum gw_step run_until(struct gw_req *rq, enum gw_phase end)
{
    while (rq->phase < end) {
        for (; rq->step < n_modules; rq->step++) {
            struct gw_module *m = modules[rq->step];
            enum gw_step step;

            if (m->on[rq->phase] == NULL)
                continue;
            step = m->on[rq->phase](rq, gw_req_ctx(rq, m));
            if (step != GW_NEXT)
                return step;
        }
        rq->phase++;
        rq->step = 0;
    }
    return GW_NEXT;
}

enum gw_step gw_pipeline_head(struct gw_req *rq)
{
    enum gw_step step = rq->refusal != 0 ? GW_ANSWERED : run_until(rq, GW_PHASE_BODY);

    if (step == GW_ANSWERED) { /* refused: no step of the head goes on, its body goes nowhere */
        rq->phase = GW_PHASE_BODY;
        rq->step = 0;
    }
    return step;
}

enum gw_step gw_pipeline_body(struct gw_req *rq, const char *data, size_t *size)
{
    for (size_t i = 0; i < n_modules && rq->refusal == 0 && rq->status == 0 && *size > 0; i++) {
        enum gw_step step;

        if (modules[i]->on_body == NULL)
            continue;
        step = modules[i]->on_body(rq, gw_req_ctx(rq, modules[i]), data, size);
        if (step == GW_WAIT)
            return GW_WAIT;
    }
    /* What is left goes nowhere: a body refused, or one the upstream stopped taking. It is
     * read and let go, but a client that sends more than twice max_body has its connection
     * closed without an answer, rather than read without end. */
    rq->body_read += *size;
    *size = 0;
    return rq->body_read / 2 > rq->config->server.max_body ? GW_ANSWERED : GW_NEXT;
}

enum gw_step gw_pipeline_content(struct gw_req *rq)
{
    enum gw_step step;

    if (rq->phase < GW_PHASE_CONTENT) {
        rq->phase = GW_PHASE_CONTENT;
        rq->step = 0;
    }
    /* A step sees a refusal here too, and lets go of what it started (before the answer, so
     * that an upstream never acts on a request sluice refused midway). */
    step = run_until(rq, GW_PHASE_LOG);
    if (step == GW_NEXT && rq->refusal == 0) /* no module answered: none serves it */
        gw_req_refuse(rq, 500, "no module answered the request");
    return step == GW_WAIT ? GW_WAIT : GW_ANSWERED;
}

int gw_pipeline_problem(struct gw_req *rq, unsigned status, const char *detail)
{
    const struct config_route *route = gw_req_route(rq);
    struct gw_answer *a = &rq->answer;
    char *body = gw_problem_json(status, detail, route ? route->name : NULL, rq->request_id);

    gw_answer_reset(a);
    if (body == NULL)
        return -1;
    a->status = status;
    a->kind = GW_ANSWER_OWNED;
    a->body = body;
    a->body_len = strlen(body);
    a->close = rq->refusal == status && gw_req_refusal_closes(rq);
    if (gw_answer_field(a, "Content-Type", "application/problem+json") != 0 ||
        (a->close && gw_answer_field(a, "Connection", "close") != 0))
        return -1;
    gw_pipeline_answer(rq);
    return 0;
}

int gw_pipeline_refusal(struct gw_req *rq)
{
    return gw_pipeline_problem(rq, rq->refusal, rq->refusal_detail);
}

void gw_pipeline_answer(struct gw_req *rq)
{
    for (size_t i = 0; i < n_modules; i++)
        if (modules[i]->on_answer != NULL)
            modules[i]->on_answer(rq, gw_req_ctx(rq, modules[i]), &rq->answer);
    /* Every answer, the gateway's own or the upstream's, carries the request's id. */
    gw_answer_field(&rq->answer, "X-Request-Id", rq->request_id);
    if (rq->answer.kind != GW_ANSWER_STREAM && rq->answer.kind != GW_ANSWER_SWITCH)
        rq->bytes = rq->answer.body_len;
}

bool gw_pipeline_owns_field(const struct gw_req *rq, const char *name)
{
    for (size_t i = 0; i < n_modules; i++)
        if (modules[i]->owns_field != NULL &&
            modules[i]->owns_field(rq, gw_req_ctx(rq, modules[i]), name))
            return true;
    return false;
}

void gw_pipeline_finish(struct gw_req *rq)
{
    struct gw_access_entry entry;

    if (rq->logged)
        return;
    rq->logged = true;
    rq->decision = gw_req_outcome(rq); /* what the log and the modules' metrics count */
    gw_req_entry(rq, &entry);
    for (size_t i = 0; i < n_modules; i++)
        if (modules[i]->on_log != NULL)
            modules[i]->on_log(rq, gw_req_ctx(rq, modules[i]), &entry);
    gw_req_out_of_flight(rq);
}

void gw_pipeline_free(struct gw_req *rq)
{
    for (size_t i = 0; i < n_modules; i++)
        if (modules[i]->on_free != NULL)
            modules[i]->on_free(rq, gw_req_ctx(rq, modules[i]));
}

void *gw_runtime_state(const struct gw_runtime *rt, size_t route, const struct gw_module *module)
{
    return rt->routes[route].state[module->id];
}

void *gw_req_route_state(const struct gw_req *rq, const struct gw_module *module)
{
    return rq->runtime->routes[rq->route].state[module->id];
}

int gw_pipeline_route_open(struct gw_runtime *rt, size_t route, const struct gw_runtime *previous,
                           char *err, size_t err_len)
{
    for (size_t i = 0; i < n_modules; i++)
        if (modules[i]->route_open != NULL &&
            modules[i]->route_open(rt, route, previous, &rt->routes[route].state[i], err,
                                   err_len) != 0)
            return -1;
    return 0;
}

void gw_pipeline_route_close(struct gw_runtime *rt, size_t route)
{
    for (size_t i = 0; i < n_modules; i++)
        if (modules[i]->route_close != NULL && rt->routes[route].state[i] != NULL)
            modules[i]->route_close(rt, route, rt->routes[route].state[i]);
}

void gw_pipeline_gauges(const struct gw_runtime *rt, FILE *out)
{
    for (size_t i = 0; i < n_modules; i++)
        if (modules[i]->gauges != NULL)
            modules[i]->gauges(rt, out);
}
