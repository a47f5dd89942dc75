/*
 * request_fixture: requests built in memory and run through the gateway's policy modules, for
 * the suites that test routing, identification, limits and the forwarded header set with no
 * socket, no libmicrohttpd and no running binary.
 *
 * A suite registers the policy pipeline in its set-up: route, access, limit and log, in the
 * order gateway/modules.c runs them, without the HTTP adapter's module (it needs
 * libmicrohttpd) and without forward's (its steps start an upstream exchange; the header set
 * it would send is gw_upstream_lines(), a plain function the suites call themselves). A test
 * then loads a config from YAML text into a runtime (fixture_start()), makes requests as an
 * adapter would (fixture_request()), runs their head with gw_pipeline_head() and reads what
 * the phases wrote into the request.
 *
 * The io hooks a request waits through only count, in the fixture started last: routes in
 * this process's memory never wait, and a test asserts that none did (fixture.waits). One
 * fixture runs at a time.
 */
#ifndef SLUICE_TESTS_GATEWAY_REQUEST_FIXTURE_H
#define SLUICE_TESTS_GATEWAY_REQUEST_FIXTURE_H

#include "gateway/core/pipeline.h"
#include "gateway/core/request.h"
#include "gateway/core/runtime.h"

struct fixture {
    struct gw_metrics *metrics;
    struct gw_backends *backends;
    struct gw_runtime *runtime;
    unsigned waits; /* the times a request asked to be set aside or resumed */
};

/* Registers route, access, limit and log as the pipeline (a suite's CUnit init: 0, or -1). */
int fixture_register_pipeline(void);

/* A runtime for the config in `yaml` (the test fails at once when it is refused), with its
 * own metrics and upstream state, built with the pipeline registered (its modules' per-route
 * state); fixture_stop() frees them all. */
void fixture_start(struct fixture *fx, const char *yaml);
void fixture_stop(struct fixture *fx);

/* A request of `method` for `target` from `peer` (an address as text; NULL: no IP peer, as on
 * a Unix socket) over HTTP/1.1, with the fields that follow as name and value pairs up to a
 * NULL: begun (gw_req_begin()), its head not yet run. The names and values are not copied
 * (string literals outlive the request). The caller frees it with gw_req_free(). */
struct gw_req *fixture_request(struct fixture *fx, const char *peer, const char *method,
                               const char *target, ...) __attribute__((sentinel));

/* Runs the head of `rq` (gw_pipeline_head()), checks that it waited for nothing and was
 * answered exactly when refused, and frees it: its refusal (0 when it may go on), and its
 * outcome so far (gw_req_outcome()) into `*decision` unless NULL. */
unsigned fixture_head(struct gw_req *rq, enum gw_decision *decision);

/* Runs the head of `rq`, which must be refused with `status` and a detail holding `words`,
 * its outcome named by the status (unauthenticated, forbidden, refused or failed), and checks
 * the answer sluice gives: problem+json, the request's id, no RateLimit field,
 * and a closed connection after a 400 (a request read one way only is not followed). The
 * caller frees `rq`. */
void fixture_expect_refused(struct gw_req *rq, unsigned status, const char *words);

/* Whether `text` (which may be NULL: a field that is absent) is `want`; when it is not, says
 * what it is on stderr, as CUnit's own string assertions do not (and cannot take NULL). */
bool fixture_is(const char *text, const char *want);

/* Whether `addr` is the address written `text`. */
bool fixture_addr_is(const struct gw_addr *addr, const char *text);

#endif
