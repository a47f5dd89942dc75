/* Requests built in memory and run through the policy modules; design in request_fixture.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "gateway/modules/access/access.h"
#include "gateway/modules/limit/limit.h"
#include "gateway/modules/log/log.h"
#include "gateway/modules/route/route.h"
#include "gateway/ops/metrics.h"
#include "gateway/upstream/backends.h"
#include "tests/gateway/request_fixture.h"
#include "tests/unit.h"

int fixture_register_pipeline(void)
{
    static struct gw_module *const policy[] = {&gw_route_module, &gw_access_module,
                                               &gw_limit_module, &gw_log_module};

    return gw_pipeline_register(policy, sizeof policy / sizeof policy[0]);
}

/* The fixture whose requests run now, one at a time: the adapter's hooks count in it. A real
 * adapter keeps its per-request state in its own module's context; these hooks have none. */
static struct fixture *running;

/* The adapter's hooks: nothing here waits, so each only counts that it was asked. */
static void count_suspend(struct gw_req *rq)
{
    (void)rq;
    running->waits++;
}

static void count_resume(struct gw_req *rq, bool other_thread)
{
    (void)rq;
    (void)other_thread;
    running->waits++;
}

static void run_aside(struct gw_req *rq, void (*job)(struct gw_req *rq))
{
    running->waits++;
    job(rq); /* as thread_per_connection runs it: right here */
}

static bool always_quiet(const struct gw_req *rq)
{
    (void)rq;
    return true;
}

static const struct gw_req_io test_io = {
    .suspend = count_suspend,
    .resume = count_resume,
    .aside = run_aside,
    .quiet = always_quiet,
};

void fixture_start(struct fixture *fx, const char *yaml)
{
    char *errors = NULL, err[256] = "";
    struct config *config = config_parse("policy.yaml", yaml, strlen(yaml), &errors);

    *fx = (struct fixture){0};
    running = fx;
    if (config == NULL)
        fprintf(stderr, "\n%s", errors);
    free(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(config);
    fx->metrics = gw_metrics_new();
    fx->backends = gw_backends_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(fx->metrics);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fx->backends);
    /* No shared store: every route of these configs counts in this process. */
    fx->runtime = gw_runtime_build(config, NULL, fx->metrics, fx->backends, NULL, err, sizeof err);
    if (fx->runtime == NULL)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fx->runtime);
}

void fixture_stop(struct fixture *fx)
{
    gw_runtime_release(fx->runtime);
    gw_backends_free(fx->backends);
    gw_metrics_free(fx->metrics);
    *fx = (struct fixture){0};
    running = NULL;
}

struct gw_req *fixture_request(struct fixture *fx, const char *peer, const char *method,
                               const char *target, ...)
{
    struct gw_req_spec spec = {
        .runtime = fx->runtime,
        .io = &test_io,
        .method = method,
        .target = target,
        .http11 = true,
        .has_peer = peer != NULL,
    };
    struct gw_req *rq;
    const char *name;
    va_list fields;

    if (peer != NULL)
        CU_ASSERT_EQUAL_FATAL(gw_addr_parse(peer, strlen(peer), &spec.peer), 0);
    gw_runtime_hold(fx->runtime); /* the request takes this reference over */
    rq = gw_req_new(&spec);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rq);
    va_start(fields, target);
    for (name = va_arg(fields, const char *); name != NULL; name = va_arg(fields, const char *))
        CU_ASSERT_EQUAL(gw_fields_add(&rq->fields, name, va_arg(fields, const char *)), 0);
    va_end(fields);
    gw_req_begin(rq);
    return rq;
}

unsigned fixture_head(struct gw_req *rq, enum gw_decision *decision)
{
    unsigned waits = running->waits;
    enum gw_step step = gw_pipeline_head(rq);
    unsigned refusal = rq->refusal;

    CU_ASSERT_EQUAL(step, refusal != 0 ? GW_ANSWERED : GW_NEXT);
    CU_ASSERT_EQUAL(running->waits, waits);
    if (decision != NULL)
        *decision = gw_req_outcome(rq);
    gw_req_free(rq);
    return refusal;
}

bool fixture_is(const char *text, const char *want)
{
    if (text != NULL && strcmp(text, want) == 0)
        return true;
    fprintf(stderr, "\nexpected \"%s\", got %s%s%s\n", want, text ? "\"" : "", text ? text : "none",
            text ? "\"" : "");
    return false;
}

bool fixture_addr_is(const struct gw_addr *addr, const char *text)
{
    struct gw_addr want;

    return gw_addr_parse(text, strlen(text), &want) == 0 && addr->family == want.family &&
           memcmp(addr->bytes, want.bytes, sizeof want.bytes) == 0;
}

/* Runs the head of `rq`, which must be refused with `status` and a detail holding `words`,
 * and checks the answer sluice gives: problem+json, the request's id, and a closed
 * connection after a 400 (a request read one way only is not followed). */
void fixture_expect_refused(struct gw_req *rq, unsigned status, const char *words)
{
    const struct gw_answer *a = &rq->answer;

    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_ANSWERED);
    CU_ASSERT_EQUAL(rq->refusal, status);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rq->refusal_detail);
    if (strstr(rq->refusal_detail, words) == NULL)
        fprintf(stderr, "\nexpected \"%s\" in \"%s\"\n", words, rq->refusal_detail);
    CU_ASSERT_PTR_NOT_NULL(strstr(rq->refusal_detail, words));
    CU_ASSERT_EQUAL(gw_req_outcome(rq), status == 401   ? GW_UNAUTHENTICATED
                                        : status == 403 ? GW_FORBIDDEN
                                        : status >= 500 ? GW_FAILED
                                                        : GW_REFUSED);
    CU_ASSERT_EQUAL_FATAL(gw_pipeline_refusal(rq), 0);
    CU_ASSERT_EQUAL(a->status, status);
    CU_ASSERT_TRUE(
        fixture_is(gw_fields_get(&a->fields, "Content-Type"), "application/problem+json"));
    CU_ASSERT_TRUE(fixture_is(gw_fields_get(&a->fields, "X-Request-Id"), rq->request_id));
    CU_ASSERT_PTR_NULL(gw_fields_get(&a->fields, "RateLimit")); /* no limit asked */
    CU_ASSERT_EQUAL(a->kind, GW_ANSWER_OWNED);
    CU_ASSERT_PTR_NOT_NULL(strstr(a->body, words));
    CU_ASSERT_EQUAL(a->close, status == 400);
    if (status == 400)
        CU_ASSERT_TRUE(fixture_is(gw_fields_get(&a->fields, "Connection"), "close"));
}
