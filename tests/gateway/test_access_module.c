/* The access module (gateway/modules/access/access.c) on requests built in memory: server.deny
 * and a route's deny, judged on the client as its keys see it. */
#include <string.h>

#include "tests/gateway/request_fixture.h"
#include "tests/unit.h"

#define UPSTREAM "    upstream: \"http://127.0.0.1:9000\"\n"

static const char deny_yaml[] =
    "server:\n  access_log: \"off\"\n  trusted_proxies: [\"10.0.0.0/8\"]\n"
    "  deny: [\"192.0.2.0/24\"]\n"
    "routes:\n"
    "  - name: admin\n    match: {path_prefix: /admin/}\n" UPSTREAM
    "    deny: [\"198.51.100.0/24\", \"2001:db8::/32\"]\n"
    "  - name: api\n    match: {path_prefix: /api/}\n" UPSTREAM
    "    limit: {algorithm: token_bucket, requests: 10, per: 1m}\n";

/* The refusal of a request from `peer` for `target`, with X-Forwarded-For `forwarded_for`
 * (NULL: none), and its decision into `*decision`. */
static unsigned refusal_of(struct fixture *fx, const char *peer, const char *target,
                           const char *forwarded_for, enum gw_decision *decision)
{
    if (forwarded_for == NULL)
        return fixture_head(fixture_request(fx, peer, "GET", target, NULL), decision);
    return fixture_head(
        fixture_request(fx, peer, "GET", target, "X-Forwarded-For", forwarded_for, NULL), decision);
}

static void test_server_deny(void)
{
    struct fixture fx;
    enum gw_decision decision;
    struct gw_req *rq;

    fixture_start(&fx, deny_yaml);
    rq = fixture_request(&fx, "192.0.2.44", "GET", "/api/items", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_ANSWERED);
    CU_ASSERT_EQUAL(rq->refusal, 403);
    CU_ASSERT_EQUAL(gw_req_outcome(rq), GW_FORBIDDEN);
    CU_ASSERT_EQUAL(rq->route, 1); /* routed first, then judged */
    CU_ASSERT_EQUAL_FATAL(gw_pipeline_refusal(rq), 0);
    CU_ASSERT_EQUAL(rq->answer.status, 403);
    CU_ASSERT_FALSE(rq->answer.close); /* the client may go on with another request */
    CU_ASSERT_TRUE(
        fixture_is(gw_fields_get(&rq->answer.fields, "Content-Type"), "application/problem+json"));
    CU_ASSERT_TRUE(fixture_is(gw_fields_get(&rq->answer.fields, "X-Request-Id"), rq->request_id));
    /* Blocked before its limits: no RateLimit fields, nothing counted. */
    CU_ASSERT_PTR_NULL(gw_fields_get(&rq->answer.fields, "RateLimit"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rq->answer.body, "not allowed"));
    gw_req_free(rq);
    CU_ASSERT_EQUAL(refusal_of(&fx, "192.0.2.44", "/admin/users", NULL, &decision), 403);
    CU_ASSERT_EQUAL(refusal_of(&fx, "192.0.3.1", "/api/items", NULL, &decision), 0);
    CU_ASSERT_EQUAL(decision, GW_ALLOWED);
    fixture_stop(&fx);
}

static void test_route_deny(void)
{
    struct fixture fx;
    enum gw_decision decision;

    fixture_start(&fx, deny_yaml);
    CU_ASSERT_EQUAL(refusal_of(&fx, "198.51.100.7", "/admin/users", NULL, &decision), 403);
    CU_ASSERT_EQUAL(decision, GW_FORBIDDEN);
    CU_ASSERT_EQUAL(refusal_of(&fx, "2001:db8:5::1", "/admin/users", NULL, &decision), 403);
    /* The route's deny is the route's: the same clients may use another. */
    CU_ASSERT_EQUAL(refusal_of(&fx, "198.51.100.7", "/api/items", NULL, &decision), 0);
    CU_ASSERT_EQUAL(decision, GW_ALLOWED);
    CU_ASSERT_EQUAL(refusal_of(&fx, "2001:db9::1", "/admin/users", NULL, &decision), 0);
    /* An IPv4-mapped address is the IPv4 one. */
    CU_ASSERT_EQUAL(refusal_of(&fx, "::ffff:198.51.100.7", "/admin/users", NULL, &decision), 403);
    fixture_stop(&fx);
}

/* The client as its keys see it: a trusted proxy's X-Forwarded-For names it, anyone else's
 * is not read. */
static void test_deny_behind_proxies(void)
{
    struct fixture fx;
    enum gw_decision decision;

    fixture_start(&fx, deny_yaml);
    CU_ASSERT_EQUAL(refusal_of(&fx, "10.0.0.1", "/api/items", "192.0.2.9", &decision), 403);
    CU_ASSERT_EQUAL(
        refusal_of(&fx, "10.0.0.1", "/admin/users", "203.0.113.5, 198.51.100.7", &decision), 403);
    /* The proxy itself is not denied; its client is what is judged. */
    CU_ASSERT_EQUAL(refusal_of(&fx, "10.0.0.1", "/admin/users", "203.0.113.5", &decision), 0);
    /* An untrusted client cannot borrow a denied address, nor hide its own behind one. */
    CU_ASSERT_EQUAL(refusal_of(&fx, "203.0.113.5", "/api/items", "192.0.2.9", &decision), 0);
    CU_ASSERT_EQUAL(refusal_of(&fx, "192.0.2.9", "/api/items", "203.0.113.5", &decision), 403);
    fixture_stop(&fx);
}

/* A connection that is no IP connection has no address to judge. */
static void test_no_peer_passes(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, deny_yaml);
    rq = fixture_request(&fx, NULL, "GET", "/admin/users", "X-Forwarded-For", "192.0.2.9", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_EQUAL(rq->refusal, 0);
    CU_ASSERT_EQUAL(rq->decision, GW_ALLOWED);
    gw_req_free(rq);
    fixture_stop(&fx);
}

void register_access_module_tests(void)
{
    CU_pSuite s = add_suite_with("gateway_access_module", fixture_register_pipeline, NULL);

    add_test(s, "server.deny: 403, blocked, before any limit", test_server_deny);
    add_test(s, "a route's deny, IPv4 and IPv6", test_route_deny);
    add_test(s, "deny judges the client behind trusted proxies only", test_deny_behind_proxies);
    add_test(s, "no IP peer: nothing to deny", test_no_peer_passes);
}
