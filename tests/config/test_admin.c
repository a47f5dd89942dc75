/* config/admin.c: the admin listener's token (server.admin_token, admin_token_file), whether
 * the quota endpoints answer (admin_quota), and /metrics behind the token
 * (metrics_need_token); each problem refused at its place, the token never in a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tests/config/problems.h"
#include "tests/unit.h"

#define ROUTE                                                                                      \
    "routes:\n  - name: api\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:9\"\n"
#define TOKEN "abcdefghijklmnop-0123._~+/=="

static struct config *parse_server(const char *server, char **errors)
{
    char yaml[1024];

    snprintf(yaml, sizeof yaml, "server: {%s}\n" ROUTE, server);
    *errors = NULL;
    return config_parse("t.yaml", yaml, strlen(yaml), errors);
}

static void expect_server_problem(const char *server, const char *want)
{
    char yaml[1024];

    snprintf(yaml, sizeof yaml, "server: {%s}\n" ROUTE, server);
    expect_config_problem(yaml, want);
}

static void test_token_turns_quota_on(void)
{
    char *errors;
    struct config *c = parse_server("admin_token: \"" TOKEN "\"", &errors);

    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->server.admin.token, TOKEN);
    CU_ASSERT_TRUE(c->server.admin.quota);
    CU_ASSERT_FALSE(c->server.admin.metrics_need_token);
    config_free(c);

    c = parse_server("admin_listen: \"0.0.0.0:9901\"", &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NULL(c->server.admin.token);
    CU_ASSERT_FALSE(c->server.admin.quota); /* no token: off, and no refusal */
    config_free(c);

    c = parse_server("admin_token: \"" TOKEN "\", admin_quota: false, metrics_need_token: true",
                     &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_FALSE(c->server.admin.quota);
    CU_ASSERT_TRUE(c->server.admin.metrics_need_token);
    config_free(c);

    /* Written on without a token, on loopback: allowed, and the endpoints stay off (404). */
    c = parse_server("admin_listen: \"127.0.0.1:9901\", admin_quota: true", &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NULL(c->server.admin.token);
    config_free(c);
    c = parse_server("admin_listen: \"[::1]:9901\", admin_quota: true", &errors);
    CU_ASSERT_PTR_NOT_NULL(c);
    config_free(c);
}

static void test_token_from_environment_and_file(void)
{
    char path[] = "/tmp/sluice-admin-token-XXXXXX", yaml[256], *errors;
    int fd = mkstemp(path);
    struct config *c;

    setenv("SLUICE_TEST_ADMIN_TOKEN", TOKEN, 1);
    c = parse_server("admin_token: \"${SLUICE_TEST_ADMIN_TOKEN}\"", &errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->server.admin.token, TOKEN);
    config_free(c);
    unsetenv("SLUICE_TEST_ADMIN_TOKEN");

    CU_ASSERT_TRUE_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, TOKEN " \r\nsecond line\n", strlen(TOKEN) + 15),
                    (ssize_t)strlen(TOKEN) + 15);
    close(fd);
    snprintf(yaml, sizeof yaml, "admin_token_file: \"%s\"", path);
    c = parse_server(yaml, &errors);
    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->server.admin.token, TOKEN); /* its first line, trimmed */
    config_free(c);
    unlink(path);
    expect_server_problem(yaml, "admin_token_file: cannot read /tmp/sluice-admin-token-");
}

static void test_token_problems(void)
{
    char *errors;
    struct config *c;

    expect_server_problem("admin_token: \"short-token\"",
                          "t.yaml:1:23: admin_token: the token must be 16 to 4096 characters "
                          "(this one has 11)");
    expect_server_problem("admin_token: \"has a space in it, sadly\"",
                          "admin_token: the token may hold only letters, digits and -._~+/");
    expect_server_problem("admin_token: \"=abcdefghijklmnopqrstu\"",
                          "admin_token: the token may hold only");
    expect_server_problem("admin_token: \"" TOKEN "\", admin_token_file: /dev/null",
                          "admin_token_file: give the token once");
    expect_server_problem("metrics_need_token: true",
                          "metrics_need_token: needs server.admin_token or admin_token_file");
    expect_server_problem("admin_listen: \"0.0.0.0:9901\", admin_quota: true",
                          "admin_quota: the quota endpoints on 0.0.0.0 (not a loopback "
                          "address) need server.admin_token or admin_token_file");
    expect_server_problem("admin_listen: \"10.1.2.3:9901\", admin_quota: yes please",
                          "admin_quota");
    /* A bad token is never echoed back. */
    c = parse_server("admin_token: \"secret value with spaces\"", &errors);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    CU_ASSERT_PTR_NULL(strstr(errors, "secret value"));
    free(errors);
}

void register_config_admin_tests(void)
{
    CU_pSuite s = add_suite("config_admin");

    add_test(s, "a token turns the quota endpoints on", test_token_turns_quota_on);
    add_test(s, "the token from the environment or a file", test_token_from_environment_and_file);
    add_test(s, "bad tokens and combinations are refused at their place", test_token_problems);
}
