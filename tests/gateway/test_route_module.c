/* The route module (gateway/modules/route/route.c) on requests built in memory: what a
 * request is, which route serves it, and the readings of it an upstream could make otherwise,
 * each refused rather than guessed. */
#include <stdio.h>
#include <string.h>

#include "tests/gateway/request_fixture.h"
#include "tests/unit.h"

#define UPSTREAM "    upstream: \"http://127.0.0.1:9000\"\n"

/* /admin/ for any method and host, /api/ for GET and POST, and the host shop.example.com. */
static const char routes_yaml[] =
    "server: {access_log: \"off\", trusted_proxies: [\"10.0.0.0/8\"]}\n"
    "routes:\n"
    "  - name: admin\n    match: {path_prefix: /admin/}\n" UPSTREAM
    "  - name: api\n    match: {path_prefix: /api/, methods: [GET, POST]}\n" UPSTREAM
    "  - name: shop\n    match: {path_prefix: /, host: shop.example.com}\n" UPSTREAM;

#define ADMIN 0
#define API   1
#define SHOP  2

#define CLIENT  "198.51.100.1"
#define TRUSTED "10.0.0.1" /* a proxy in server.trusted_proxies */

/* A request with the Host field `host`, or none when NULL. */
static struct gw_req *request(struct fixture *fx, const char *peer, const char *method,
                              const char *target, const char *host)
{
    if (host == NULL)
        return fixture_request(fx, peer, method, target, NULL);
    return fixture_request(fx, peer, method, target, "Host", host, NULL);
}

/* The route a request picks when nothing refuses it (-1 when something does). */
static int route_of(struct fixture *fx, const char *peer, const char *method, const char *target,
                    const char *host)
{
    struct gw_req *rq = request(fx, peer, method, target, host);
    int route = gw_pipeline_head(rq) == GW_NEXT && rq->refusal == 0 ? rq->route : -1;

    gw_req_free(rq);
    return route;
}

/* A request refused by its head as fixture_expect_refused() says, before any route was chosen. */
static void refused_and_freed(struct fixture *fx, const char *peer, const char *method,
                              const char *target, const char *host, unsigned status,
                              const char *words)
{
    struct gw_req *rq = request(fx, peer, method, target, host);

    fixture_expect_refused(rq, status, words);
    CU_ASSERT_EQUAL(rq->route, -1);
    gw_req_free(rq);
}

static void test_route_match(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, routes_yaml);
    rq = fixture_request(&fx, CLIENT, "GET", "/%61pi//items?x=1", "Host", "api.example.com", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_EQUAL(rq->route, API);
    CU_ASSERT_TRUE(fixture_is(gw_req_route(rq)->name, "api"));
    CU_ASSERT_TRUE(fixture_is(rq->path, "/api/items")); /* decoded, slashes merged, no query */
    CU_ASSERT_TRUE(fixture_is(rq->target, "/%61pi//items?x=1")); /* forwarded as it came */
    CU_ASSERT_EQUAL(rq->refusal, 0);
    CU_ASSERT_EQUAL(rq->decision, GW_ALLOWED);
    CU_ASSERT_EQUAL(rq->phase, GW_PHASE_BODY); /* the head's phases all ran */
    gw_req_free(rq);
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "HEAD", "/api/items", "api.example.com"), API);
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "POST", "/api/items", NULL), API);
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "PUT", "/admin/users", "api.example.com"), ADMIN);
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "GET", "/cart", "shop.example.com"), SHOP);
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "GET", "/cart", "SHOP.Example.com.:8443"), SHOP);
    /* The longest prefix wins over the host's catch-all. */
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "GET", "/api/items", "shop.example.com"), API);
    CU_ASSERT_EQUAL(fx.waits, 0);
    fixture_stop(&fx);
}

static void test_no_route(void)
{
    struct fixture fx;

    fixture_start(&fx, routes_yaml);
    refused_and_freed(&fx, CLIENT, "GET", "/cart", "api.example.com", 404,
                      "no route matches this request");
    /* /api/ takes GET and POST only, and no other route takes /api/ on this host. */
    refused_and_freed(&fx, CLIENT, "DELETE", "/api/items", "api.example.com", 404,
                      "no route matches");
    /* Without Host, only routes without a host match. */
    refused_and_freed(&fx, CLIENT, "GET", "/cart", NULL, 404, "no route matches");
    fixture_stop(&fx);
}

static void test_method_case(void)
{
    struct fixture fx;

    fixture_start(&fx, routes_yaml);
    refused_and_freed(&fx, CLIENT, "get", "/api/items", "api.example.com", 400, "upper case");
    refused_and_freed(&fx, CLIENT, "Post", "/api/items", "api.example.com", 400, "upper case");
    /* Not a standard method in another case: routed (by a route taking any method). */
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "PURGE", "/admin/cache", "api.example.com"), ADMIN);
    fixture_stop(&fx);
}

static void test_path_case_fold(void)
{
    struct fixture fx;

    fixture_start(&fx, routes_yaml);
    /* ASP.NET would serve /ADMIN/users as /admin/users; sluice's prefixes match case. */
    refused_and_freed(&fx, CLIENT, "GET", "/ADMIN/users", "shop.example.com", 400,
                      "case is folded");
    refused_and_freed(&fx, CLIENT, "GET", "/Api/items", "api.example.com", 400, "case is folded");
    /* Case past the prefix picks no other route. */
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "GET", "/admin/Users", "api.example.com"), ADMIN);
    fixture_stop(&fx);
}

static void test_path_params(void)
{
    struct fixture fx;

    fixture_start(&fx, routes_yaml);
    /* A servlet container serves /admin;v=1/users as /admin/users. */
    refused_and_freed(&fx, CLIENT, "GET", "/admin;v=1/users", "shop.example.com", 400,
                      ";parameters");
    /* Parameters that leave the route as it is are no disagreement. */
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "GET", "/api/items;v=1", "api.example.com"), API);
    CU_ASSERT_EQUAL(route_of(&fx, CLIENT, "GET", "/cart;jsessionid=7", "shop.example.com"), SHOP);
    fixture_stop(&fx);
}

static void test_forwarded_host(void)
{
    struct fixture fx;
    struct gw_req *rq;

    fixture_start(&fx, routes_yaml);
    /* A trusted proxy's X-Forwarded-Host that names another route than Host: refused. */
    rq = fixture_request(&fx, TRUSTED, "GET", "/cart", "Host", "shop.example.com",
                         "X-Forwarded-Host", "api.example.com", NULL);
    fixture_expect_refused(rq, 400, "X-Forwarded-Host");
    gw_req_free(rq);
    /* Every entry counts, over several fields. */
    rq = fixture_request(&fx, TRUSTED, "GET", "/cart", "Host", "shop.example.com",
                         "X-Forwarded-Host", "shop.example.com", "X-Forwarded-Host", "evil.example",
                         NULL);
    fixture_expect_refused(rq, 400, "X-Forwarded-Host");
    gw_req_free(rq);
    rq = fixture_request(&fx, TRUSTED, "GET", "/cart", "Host", "shop.example.com",
                         "X-Forwarded-Host", "shop.example.com@evil.example", NULL);
    fixture_expect_refused(rq, 400, "X-Forwarded-Host");
    gw_req_free(rq);
    /* One that agrees. */
    rq = fixture_request(&fx, TRUSTED, "GET", "/cart", "Host", "shop.example.com",
                         "X-Forwarded-Host", "SHOP.example.com:443", NULL);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_EQUAL(rq->route, SHOP);
    gw_req_free(rq);
    /* An untrusted peer's is not read (and not forwarded: test_upstream_headers.c). */
    rq = fixture_request(&fx, CLIENT, "GET", "/cart", "Host", "shop.example.com",
                         "X-Forwarded-Host", "api.example.com", NULL);
    CU_ASSERT_FALSE(rq->trusted_peer);
    CU_ASSERT_EQUAL(gw_pipeline_head(rq), GW_NEXT);
    CU_ASSERT_EQUAL(rq->refusal, 0);
    CU_ASSERT_EQUAL(rq->route, SHOP);
    gw_req_free(rq);
    fixture_stop(&fx);
}

static void test_request_line_and_host(void)
{
    struct fixture fx;

    fixture_start(&fx, routes_yaml);
    refused_and_freed(&fx, CLIENT, "GET", "http://api.example.com/api/items", "api.example.com",
                      400, "origin-form");
    refused_and_freed(&fx, CLIENT, "OPTIONS", "*", "api.example.com", 400, "origin-form");
    refused_and_freed(&fx, CLIENT, "GET", "/api/../admin/users", "api.example.com", 400,
                      ". or .. segment");
    refused_and_freed(&fx, CLIENT, "GET", "/admin%2Fusers", "api.example.com", 400,
                      "encoded slash");
    refused_and_freed(&fx, CLIENT, "GET", "/api/items", "api.example.com@evil.example", 400,
                      "Host field");
    fixture_stop(&fx);
}

void register_route_module_tests(void)
{
    CU_pSuite s = add_suite_with("gateway_route_module", fixture_register_pipeline, NULL);

    add_test(s, "a request's route: decoded path, methods, host", test_route_match);
    add_test(s, "no route: 404 with a problem body", test_no_route);
    add_test(s, "a standard method in another case: 400", test_method_case);
    add_test(s, "a path naming another route when its case is folded: 400", test_path_case_fold);
    add_test(s, "a path naming another route without its ;parameters: 400", test_path_params);
    add_test(s, "X-Forwarded-Host: read from a trusted peer only, and must agree",
             test_forwarded_host);
    add_test(s, "the target must be a path, Host a host", test_request_line_and_host);
}
