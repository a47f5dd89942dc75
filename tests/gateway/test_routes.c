#include <stdlib.h>

#include "gateway/routing/routes.h"
#include "tests/unit.h"

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

static void test_host_forms(void)
{
    /* The same name as an upstream reads it: one trailing dot, case, port, OWS. */
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "admin.example.com."), 3);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "admin.example.com.:8443"), 3);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "ADMIN.EXAMPLE.COM"), 3);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "admin.example.com:80"), 3);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "admin.example.com \t"), 3);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", " \tadmin.example.com"), 3);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", " admin.example.com.:1 "), 3);
    /* Not the same name. */
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "admin.example.com.."), 4);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", ".admin.example.com"), 4);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", "admin.example.co"), 4);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", ""), 4);
    CU_ASSERT_EQUAL(gw_route_match(&config, "DELETE", "/api/x", NULL), 4);
}

static void test_host_ipv6(void)
{
    struct config_route v6[] = {
        {.name = "loopback", .path_prefix = "/", .host = "::1"},
        {.name = "dotted", .path_prefix = "/", .host = "api.example.com."},
        {.name = "rest", .path_prefix = "/"},
    };
    struct config c = {.routes = v6, .n_routes = 3};

    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", "[::1]"), 0);
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", "[::1]:8080"), 0);
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", " [::1]:8080\t"), 0);
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", "[::2]:8080"), 2);
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", "[::1"), 2); /* unclosed */
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", "::1"), 2);  /* ":" starts a port */
    /* A route host written with its trailing dot matches either form. */
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", "api.example.com"), 1);
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", "Api.Example.com.:443"), 1);
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/", "api.example.com.."), 2);
}

static void test_head_is_get(void)
{
    static char *get[] = {"GET", NULL};
    static char *post[] = {"POST", NULL};
    struct config_route r[] = {
        {.name = "read", .path_prefix = "/api/", .methods = get},
        {.name = "write", .path_prefix = "/api/", .methods = post},
        {.name = "rest", .path_prefix = "/"},
    };
    struct config c = {.routes = r, .n_routes = 3};
    struct config post_only = {.routes = r + 1, .n_routes = 2};

    CU_ASSERT_EQUAL(gw_route_match(&c, "HEAD", "/api/x", NULL), 0);
    CU_ASSERT_EQUAL(gw_route_match(&c, "GET", "/api/x", NULL), 0);
    CU_ASSERT_EQUAL(gw_route_match(&c, "POST", "/api/x", NULL), 1);
    CU_ASSERT_EQUAL(gw_route_match(&config, "HEAD", "/api/x", NULL), 1); /* GET and POST */
    /* Only GET brings HEAD along; methods stay case-sensitive. */
    CU_ASSERT_EQUAL(gw_route_match(&post_only, "HEAD", "/api/x", NULL), 1); /* the catch-all */
    CU_ASSERT_EQUAL(gw_route_match(&c, "head", "/api/x", NULL), 2);
    CU_ASSERT_EQUAL(gw_route_match(&c, "get", "/api/x", NULL), 2);
    CU_ASSERT_EQUAL(gw_route_match(&c, "OPTIONS", "/api/x", NULL), 2);
}

static void test_host_validity(void)
{
    char long_host[301];

    /* Absent, empty, names, addresses, ports. */
    CU_ASSERT_TRUE(gw_host_is_valid(NULL));
    CU_ASSERT_TRUE(gw_host_is_valid(""));
    CU_ASSERT_TRUE(gw_host_is_valid(" \t"));
    CU_ASSERT_TRUE(gw_host_is_valid("localhost"));
    CU_ASSERT_TRUE(gw_host_is_valid("api.example.com"));
    CU_ASSERT_TRUE(gw_host_is_valid("API.Example.COM"));
    CU_ASSERT_TRUE(gw_host_is_valid("api.example.com."));
    CU_ASSERT_TRUE(gw_host_is_valid("api.example.com.:8080"));
    CU_ASSERT_TRUE(gw_host_is_valid("a-b_c~d.example"));
    CU_ASSERT_TRUE(gw_host_is_valid("xn--caf-dma.example"));
    CU_ASSERT_TRUE(gw_host_is_valid("caf%C3%A9.example")); /* UTF-8, percent-encoded */
    CU_ASSERT_TRUE(gw_host_is_valid("example.com:0"));
    CU_ASSERT_TRUE(gw_host_is_valid("example.com:65535"));
    CU_ASSERT_TRUE(gw_host_is_valid("example.com:00080"));
    CU_ASSERT_TRUE(gw_host_is_valid("203.0.113.7"));
    CU_ASSERT_TRUE(gw_host_is_valid("203.0.113.7:80"));
    CU_ASSERT_TRUE(gw_host_is_valid("[::1]"));
    CU_ASSERT_TRUE(gw_host_is_valid("[::1]:8080"));
    CU_ASSERT_TRUE(gw_host_is_valid("[2001:DB8::1]:443"));
    CU_ASSERT_TRUE(gw_host_is_valid("[::ffff:192.0.2.1]"));
    CU_ASSERT_TRUE(gw_host_is_valid(" \tapi.example.com:443 \t"));
    memset(long_host, 'a', sizeof long_host - 1);
    long_host[sizeof long_host - 1] = '\0';
    long_host[100] = '.';
    CU_ASSERT_TRUE(gw_host_is_valid(long_host));

    /* Userinfo, sub-delims and other separators some upstream would split on. */
    CU_ASSERT_FALSE(gw_host_is_valid("a@b"));
    CU_ASSERT_FALSE(gw_host_is_valid("user:pass@example.com"));
    CU_ASSERT_FALSE(gw_host_is_valid("a,b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a;b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a!b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a/b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a\\b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a?b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a#b"));
    /* Whitespace inside, control characters, raw non-ASCII. */
    CU_ASSERT_FALSE(gw_host_is_valid("a b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a\tb"));
    CU_ASSERT_FALSE(gw_host_is_valid("a :80"));
    CU_ASSERT_FALSE(gw_host_is_valid("a: 80"));
    CU_ASSERT_FALSE(gw_host_is_valid("a\x01b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a\x7f"));
    CU_ASSERT_FALSE(gw_host_is_valid("a\rb"));
    CU_ASSERT_FALSE(gw_host_is_valid("caf\xc3\xa9.example"));
    /* Ports. */
    CU_ASSERT_FALSE(gw_host_is_valid("a:b:c"));
    CU_ASSERT_FALSE(gw_host_is_valid("a:1:2"));
    CU_ASSERT_FALSE(gw_host_is_valid("a:99999"));
    CU_ASSERT_FALSE(gw_host_is_valid("a:65536"));
    CU_ASSERT_FALSE(gw_host_is_valid("a:000080"));
    CU_ASSERT_FALSE(gw_host_is_valid("a:"));
    CU_ASSERT_FALSE(gw_host_is_valid("a:-1"));
    CU_ASSERT_FALSE(gw_host_is_valid("a:+80"));
    CU_ASSERT_FALSE(gw_host_is_valid(":80"));
    CU_ASSERT_FALSE(gw_host_is_valid("[::1]:"));
    CU_ASSERT_FALSE(gw_host_is_valid("[::1]:99999"));
    CU_ASSERT_FALSE(gw_host_is_valid("[::1]80"));
    CU_ASSERT_FALSE(gw_host_is_valid("[::1]x"));
    /* IPv6 literals. */
    CU_ASSERT_FALSE(gw_host_is_valid("[::1"));
    CU_ASSERT_FALSE(gw_host_is_valid("::1"));
    CU_ASSERT_FALSE(gw_host_is_valid("2001:db8::1"));
    CU_ASSERT_FALSE(gw_host_is_valid("[]"));
    CU_ASSERT_FALSE(gw_host_is_valid("[example.com]"));
    CU_ASSERT_FALSE(gw_host_is_valid("[203.0.113.7]"));
    CU_ASSERT_FALSE(gw_host_is_valid("[fe80::1%25eth0]"));
    CU_ASSERT_FALSE(gw_host_is_valid("[v1.fe]"));
    CU_ASSERT_FALSE(gw_host_is_valid("]::1["));
    /* Empty labels, but for one trailing dot. */
    CU_ASSERT_FALSE(gw_host_is_valid("a..b"));
    CU_ASSERT_FALSE(gw_host_is_valid(".a"));
    CU_ASSERT_FALSE(gw_host_is_valid("a.."));
    CU_ASSERT_FALSE(gw_host_is_valid("a..:80"));
    CU_ASSERT_FALSE(gw_host_is_valid("."));
    CU_ASSERT_FALSE(gw_host_is_valid(".:80"));
    /* Percent-encoding: only for non-ASCII octets, and whole. */
    CU_ASSERT_FALSE(gw_host_is_valid("api%2Eexample.com"));
    CU_ASSERT_FALSE(gw_host_is_valid("evil%40api.example.com"));
    CU_ASSERT_FALSE(gw_host_is_valid("a%00b"));
    CU_ASSERT_FALSE(gw_host_is_valid("a%7F"));
    CU_ASSERT_FALSE(gw_host_is_valid("a%"));
    CU_ASSERT_FALSE(gw_host_is_valid("a%C"));
    CU_ASSERT_FALSE(gw_host_is_valid("a%GG"));
    CU_ASSERT_FALSE(gw_host_is_valid("a%C3%"));
}

static void test_any_case(void)
{
    CU_ASSERT_EQUAL(gw_route_match(&config, "GET", "/API/x", NULL), 0);
    CU_ASSERT_EQUAL(gw_route_match_any_case(&config, "GET", "/API/x", NULL), 1);
    CU_ASSERT_EQUAL(gw_route_match_any_case(&config, "GET", "/Api/V2/x", NULL), 2);
    CU_ASSERT_EQUAL(gw_route_match_any_case(&config, "GET", "/api/x", NULL), 1);
    CU_ASSERT_EQUAL(gw_route_match_any_case(&config, "GET", "/other", NULL), 0);
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
    add_test(s, "host matches without one trailing dot or spaces", test_host_forms);
    add_test(s, "IPv6 literal hosts, and a dotted route host", test_host_ipv6);
    add_test(s, "HEAD goes where GET goes", test_head_is_get);
    add_test(s, "Host syntax: what is refused", test_host_validity);
    add_test(s, "path prefixes without case, for a second reading", test_any_case);
    add_test(s, "no route", test_no_match);
}
