#include <stdlib.h>

#include "../unit.h"
#include "routes.h"

static char *get_post[] = {"GET", "POST", NULL};

static struct config_route routes[] = {
    {.name = "root", .path_prefix = "/"},
    {.name = "api", .path_prefix = "/api/", .methods = get_post},
    {.name = "api-v2", .path_prefix = "/api/v2/"},
    {.name = "api-admin-host", .path_prefix = "/api/", .host = "admin.example.com"},
    {.name = "api-again", .path_prefix = "/api/"},
};

static struct config config = {.routes = routes, .n_routes = 5};

static void test_longest_prefix_wins(void)
{
    CU_ASSERT_EQUAL(gw_route_match(&config, "GET", "/", NULL), 0);
    CU_ASSERT_EQUAL(gw_route_match(&config, "GET", "/other", NULL), 0);
    CU_ASSERT_EQUAL(gw_route_match(&config, "GET", "/api/x", NULL), 1);
    CU_ASSERT_EQUAL(gw_route_match(&config, "GET", "/api/v2/x", NULL), 2);
    CU_ASSERT_EQUAL(gw_route_match(&config, "GET", "/api", NULL), 0); /* no trailing slash */
}

static void test_methods_and_ties(void)
{
    /* DELETE is not api's: the next /api/ route listed that accepts it wins the tie. */
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", NULL), 4);
    CU_ASSERT_EQUAL(gw_route_match(&config, "POST", "/api/x", NULL), 1);
}

static void test_host(void)
{
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "admin.example.com"), 3);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "Admin.Example.COM:8443"), 3);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "other.example.com"), 4);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "admin.example.com.evil"), 4);
}

static void test_no_match(void)
{
    struct config only_api = {.routes = routes + 1, .n_routes = 1};

    CU_ASSERT_EQUAL(gw_route_match(&only_api, "GET", "/", NULL), -1);
    CU_ASSERT_EQUAL(gw_route_match(&only_api, "PUT", "/api/x", NULL), -1);
}

void register_routes_tests(void)
{
    CU_pSuite s = add_suite("gateway_routes");

    add_test(s, "the longest prefix wins", test_longest_prefix_wins);
    add_test(s, "methods filter, ties go to the first", test_methods_and_ties);
    add_test(s, "host matches without port or case", test_host);
    add_test(s, "no route", test_no_match);
}
