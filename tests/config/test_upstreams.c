/* config/upstreams.c: the top level's upstreams:, named by routes with `upstream: NAME`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tests/config/problems.h"
#include "tests/unit.h"

#define SHARED                                                                                     \
    "upstreams:\n"                                                                                 \
    "  backend:\n"                                                                                 \
    "    servers: [\"http://10.0.0.1:8080\", {url: \"http://10.0.0.2:8080/v1\", weight: 3}]\n"     \
    "    balance: least_request\n"                                                                 \
    "    max_fails: 5\n"                                                                           \
    "    health_check: {path: /healthz, interval: 10s, expect_status: [200, 204]}\n"               \
    "  single: \"http://10.0.0.9:9000\"\n"

#define TWO_ROUTES                                                                                 \
    "routes:\n"                                                                                    \
    "  - name: api\n    match: {path_prefix: /api/}\n    upstream: backend\n"                      \
    "  - name: writes\n    match: {path_prefix: /w/}\n    upstream: backend\n"                     \
    "  - name: own\n    match: {path_prefix: /}\n    upstream: \"http://10.0.0.1:8080\"\n"

static struct config *parse(const char *yaml, char **errors)
{
    return config_parse("t.yaml", yaml, strlen(yaml), errors);
}

static void test_routes_share_a_named_upstream(void)
{
    char *errors = NULL;
    struct config *c = parse(SHARED TWO_ROUTES "  - name: one\n    match: {path_prefix: /one/}\n"
                                               "    upstream: single\n",
                             &errors);
    const struct config_upstream *api, *writes, *own, *one;

    if (errors != NULL)
        fprintf(stderr, "\n%s", errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(c->n_upstreams, 2);
    CU_ASSERT_STRING_EQUAL(c->upstreams[0].name, "backend");
    CU_ASSERT_STRING_EQUAL(c->upstreams[1].name, "single");
    api = &c->routes[0].upstream;
    writes = &c->routes[1].upstream;
    own = &c->routes[2].upstream;
    one = &c->routes[3].upstream;
    /* Each route holds its own copy, with the upstream's name and every setting. */
    CU_ASSERT_STRING_EQUAL(api->name, "backend");
    CU_ASSERT_STRING_EQUAL(writes->name, "backend");
    CU_ASSERT_PTR_NOT_EQUAL(api->servers, writes->servers);
    CU_ASSERT_EQUAL_FATAL(api->n_servers, 2);
    CU_ASSERT_STRING_EQUAL(api->servers[1].url, "http://10.0.0.2:8080/v1");
    CU_ASSERT_STRING_EQUAL(writes->servers[1].base_path, "/v1");
    CU_ASSERT_STRING_EQUAL(writes->servers[1].authority, "10.0.0.2:8080");
    CU_ASSERT_EQUAL(writes->servers[1].weight, 3);
    CU_ASSERT_EQUAL(writes->balance, CONFIG_BALANCE_LEAST_REQUEST);
    CU_ASSERT_EQUAL(writes->passive.max_fails, 5);
    CU_ASSERT_EQUAL(writes->passive.fail_timeout_ns, 10 * 1000000000LL); /* a default */
    CU_ASSERT_TRUE(writes->health_check.enabled);
    CU_ASSERT_STRING_EQUAL(writes->health_check.path, "/healthz");
    CU_ASSERT_EQUAL_FATAL(writes->health_check.n_expect_status, 2);
    CU_ASSERT_EQUAL(writes->health_check.expect_status[1], 204);
    /* The first route naming it shows it; a route's own upstream is its own. */
    CU_ASSERT_EQUAL(api->first_route, 0);
    CU_ASSERT_EQUAL(writes->first_route, 0);
    CU_ASSERT_TRUE(config_route_owns_upstream(c, 0));
    CU_ASSERT_FALSE(config_route_owns_upstream(c, 1));
    CU_ASSERT_TRUE(config_route_owns_upstream(c, 2));
    CU_ASSERT_TRUE(config_route_owns_upstream(c, 3));
    CU_ASSERT_PTR_NULL(own->name);
    CU_ASSERT_FALSE(own->health_check.enabled);
    /* A URL as the whole upstream: one server of weight 1, the defaults. */
    CU_ASSERT_STRING_EQUAL(one->name, "single");
    CU_ASSERT_EQUAL_FATAL(one->n_servers, 1);
    CU_ASSERT_STRING_EQUAL(one->servers[0].origin, "http://10.0.0.9:9000");
    CU_ASSERT_EQUAL(one->passive.max_fails, 3);
    CU_ASSERT_PTR_NULL(c->warnings);
    config_free(c);
}

/* upstreams: may come after routes:. */
static void test_upstreams_after_routes(void)
{
    char *errors = NULL;
    struct config *c = parse(TWO_ROUTES SHARED, &errors);

    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->routes[1].upstream.n_servers, 2);
    config_free(c);
}

static void test_named_upstream_problems(void)
{
    expect_config_problem(
        SHARED "routes:\n  - name: api\n    match: {path_prefix: /}\n"
               "    upstream: backnd\n",
        "t.yaml:11:15: upstream: \"backnd\" is not one of upstreams: (backend, single)");
    expect_config_problem(
        "routes:\n  - name: api\n    match: {path_prefix: /}\n    upstream: backend\n",
        "t.yaml:4:15: upstream: \"backend\" is not one of upstreams: (there are none)");
    expect_config_problem(
        "routes:\n  - name: api\n    match: {path_prefix: /}\n    upstream: \"a b\"\n",
        "upstream: \"a b\" is neither a URL (http://host:port) nor the name of one of "
        "upstreams:");
    expect_config_problem("upstreams:\n  \"x/y\": \"http://10.0.0.1:1\"\n" TWO_ROUTES,
                          "t.yaml:2:3: upstreams: an upstream's name may hold only letters");
    expect_config_problem(
        "upstreams: [\"http://10.0.0.1:1\"]\n" TWO_ROUTES,
        "t.yaml:1:12: upstreams: expected a mapping of names to upstreams, found a list");
    expect_config_problem("upstreams:\n  backend: {balance: round_robin}\n" TWO_ROUTES,
                          "t.yaml:2:12: upstreams.backend: servers is required");
    expect_config_problem(
        "upstreams:\n  backend: {servers: [\"http://10.0.0.1:1\"], max_fail: 2}\n" TWO_ROUTES,
        "t.yaml:2:45: upstreams.backend: unknown key \"max_fail\"; did you mean max_fails?");
    expect_config_problem("upstreams:\n  backend: \"http://10.0.0.1:1\"\n  backend: "
                          "\"http://10.0.0.2:1\"\n" TWO_ROUTES,
                          "t.yaml:3:3: upstreams: \"backend\" appears twice (first at line 2)");
    /* The routes naming an upstream share its servers' health: they must reach them alike,
     * with checks or without. */
    expect_config_problem(
        SHARED TWO_ROUTES "    tls_verify: false\n  - name: other\n"
                          "    match: {path_prefix: /o/}\n    upstream: backend\n"
                          "    tls_verify: false\n",
        "upstream: routes api and other share upstream backend, and so its servers' "
        "health, but their tls_verify differs");
    expect_config_problem(
        SHARED "routes:\n  - name: api\n    match: {path_prefix: /api/}\n"
               "    upstream: backend\n  - name: writes\n"
               "    match: {path_prefix: /w/}\n    upstream: backend\n"
               "    proxy: \"http://127.0.0.1:3128\"\n",
        "t.yaml:14:15: upstream: routes api and writes share upstream backend, and so "
        "its servers' health, but their proxy differs");
    expect_config_problem(
        "upstreams:\n  a: \"http://10.0.0.1:1\"\n"
        "routes:\n  - name: api\n    match: {path_prefix: /api/}\n    upstream: a\n"
        "  - name: writes\n    match: {path_prefix: /w/}\n    upstream: a\n"
        "    tls_verify: false\n",
        "t.yaml:9:15: upstream: routes api and writes share upstream a, and so its "
        "servers' health, but their tls_verify differs");
}

/* Routes that agree on proxy and tls_verify share; an unused upstream is a warning, at its
 * name. */
static void test_named_upstream_warnings(void)
{
    char *errors = NULL;
    struct config *c =
        parse("upstreams:\n  a: \"http://10.0.0.1:1\"\n  spare: \"http://10.0.0.2:1\"\n"
              "routes:\n  - name: api\n    match: {path_prefix: /api/}\n    upstream: a\n"
              "    proxy: \"http://127.0.0.1:3128\"\n    tls_verify: false\n"
              "  - name: writes\n    match: {path_prefix: /w/}\n    upstream: a\n"
              "    proxy: \"http://127.0.0.1:3128\"\n    tls_verify: false\n",
              &errors);

    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->warnings);
    CU_ASSERT_STRING_EQUAL(c->warnings, "t.yaml:3:3: warning: upstreams: spare is named by no "
                                        "route\n");
    config_free(c);
}

void register_upstreams_tests(void)
{
    CU_pSuite s = add_suite("config_upstreams");

    add_test(s, "routes share a named upstream, each with its copy",
             test_routes_share_a_named_upstream);
    add_test(s, "upstreams: may come after routes:", test_upstreams_after_routes);
    add_test(s, "named upstreams: each problem at its place", test_named_upstream_problems);
    add_test(s, "named upstreams: an unused one is a warning", test_named_upstream_warnings);
}
