/* config/blocks.c: the keys a module owns, read by the loader into the module's block, as the
 * access and limit modules' are; and, in a child process that registers a block of every type
 * (a block once registered stays for the process), what a new module's keys would get. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/blocks.h"
#include "config/config.h"
#include "gateway/modules/access/access_options.h"
#include "gateway/modules/limit/limit_options.h"
#include "tests/unit.h"

#define ROUTE                                                                                      \
    "routes:\n  - name: api\n    match: {path_prefix: /}\n    upstream: \"http://127.0.0.1:9\"\n"

/* Parses `yaml` as "t.yaml": the config, or NULL with the errors in `*errors` (freed by the
 * caller). */
static struct config *parse(const char *yaml, char **errors)
{
    return config_parse("t.yaml", yaml, strlen(yaml), errors);
}

/* Parsing `yaml` fails with exactly one problem, which starts with `want`. */
static void expect_problem(const char *yaml, const char *want)
{
    char *errors = NULL;
    struct config *c = parse(yaml, &errors);

    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    if (strncmp(errors, want, strlen(want)) != 0 || strchr(errors, '\n')[1] != '\0')
        fprintf(stderr, "\nexpected only %s... in:\n%s", want, errors);
    CU_ASSERT_EQUAL(strncmp(errors, want, strlen(want)), 0);
    CU_ASSERT_EQUAL(strchr(errors, '\n')[1], '\0');
    config_free(c);
    free(errors);
}

static void test_module_keys_read(void)
{
    char *errors = NULL;
    struct config *c = parse("server: {deny: [\"10.0.0.0/8\"]}\n" ROUTE
                             "    deny: [\"192.0.2.0/24\", \"2001:db8::/32\"]\n"
                             "    exempt: [\"198.51.100.7\"]\n    dry_run: true\n"
                             "  - name: plain\n    match: {path_prefix: /p/}\n"
                             "    upstream: \"http://127.0.0.1:9\"\n",
                             &errors);
    const struct access_options *server, *deny, *none;
    const struct limit_options *limit, *defaults;

    CU_ASSERT_PTR_NULL(errors);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    server = config_server_block(c, &gw_access_server_options);
    deny = config_route_block(&c->routes[0], &gw_access_route_options);
    none = config_route_block(&c->routes[1], &gw_access_route_options);
    limit = config_route_block(&c->routes[0], &gw_limit_route_options);
    defaults = config_route_block(&c->routes[1], &gw_limit_route_options);
    CU_ASSERT_FATAL(server != NULL && deny != NULL && none != NULL && limit != NULL &&
                    defaults != NULL);
    CU_ASSERT_EQUAL(server->deny.n, 1);
    CU_ASSERT_EQUAL(deny->deny.n, 2);
    CU_ASSERT_EQUAL(deny->deny.items[1].family, AF_INET6);
    CU_ASSERT_EQUAL(limit->exempt.n, 1);
    CU_ASSERT_TRUE(limit->dry_run);
    /* A route that writes none of them has its blocks all the same, empty. */
    CU_ASSERT_EQUAL(none->deny.n, 0);
    CU_ASSERT_EQUAL(defaults->exempt.n, 0);
    CU_ASSERT_FALSE(defaults->dry_run);
    /* Another module's block is not this one's: a block read for routes is not server:'s. */
    CU_ASSERT_PTR_NULL(config_server_block(c, &gw_limit_route_options));
    config_free(c);
}

static void test_module_key_problems(void)
{
    expect_problem(ROUTE "    deny: [\"10.0.0.0/33\"]\n",
                   "t.yaml:5:12: deny: \"10.0.0.0/33\" is not an address");
    expect_problem("server:\n  deny: 10.0.0.0/8\n" ROUTE,
                   "t.yaml:2:9: deny: expected a list of addresses");
    expect_problem(ROUTE "    dry_run: yes\n", "t.yaml:5:14: dry_run: expected true or false");
    /* An unknown key is guessed among the modules' keys as among config/'s own. */
    expect_problem(ROUTE "    denny: [\"10.0.0.0/8\"]\n",
                   "t.yaml:5:5: route: unknown key \"denny\"; did you mean deny?");
    expect_problem(ROUTE "    exmept: []\n",
                   "t.yaml:5:5: route: unknown key \"exmept\"; did you mean exempt?");
    expect_problem(ROUTE "    Dry_Run: true\n",
                   "t.yaml:5:5: route: unknown key \"Dry_Run\"; did you mean dry_run?");
    /* A block's keys are read where it says, nowhere else. */
    expect_problem("server: {exempt: []}\n" ROUTE, "t.yaml:1:10: server: unknown key \"exempt\"");
    expect_problem("routes:\n  - name: api\n    match: {path_prefix: /, deny: []}\n"
                   "    upstream: \"http://127.0.0.1:9\"\n",
                   "t.yaml:3:29: match: unknown key \"deny\"");
    /* Written twice: the second is the problem, as for any key. */
    expect_problem(ROUTE "    dry_run: true\n    dry_run: false\n",
                   "t.yaml:6:5: route: \"dry_run\" appears twice (first at line 5)");
}

static const struct config_option custom_option[] = {
    {"sketch", CONFIG_CUSTOM, 0, 0, 0},
    {NULL, 0, 0, 0, 0},
};
static const struct config_option name_option[] = {
    {"name", CONFIG_STRING, 0, 0, 0},
    {NULL, 0, 0, 0, 0},
};
static const struct config_option deny_again[] = {
    {"deny", CONFIG_CIDRS, 0, 0, 0},
    {NULL, 0, 0, 0, 0},
};

static void test_register_refusals(void)
{
    struct config_block custom = {"t", CONFIG_IN_ROUTE, custom_option, 8, NULL, 0};
    struct config_block name = {"t", CONFIG_IN_ROUTE, name_option, sizeof(char *), NULL, 0};
    struct config_block deny = {"t", CONFIG_IN_ROUTE, deny_again, sizeof(struct config_cidrs), NULL,
                                0};
    unsigned slot = gw_access_route_options.slot;

    CU_ASSERT_NOT_EQUAL(slot, 0); /* registered by the test runner, as by sluice */
    CU_ASSERT_EQUAL(config_block_register(&gw_access_route_options), 0);
    CU_ASSERT_EQUAL(gw_access_route_options.slot, slot);
    CU_ASSERT_EQUAL(config_block_register(&custom), -1); /* config/'s own type */
    CU_ASSERT_EQUAL(config_block_register(&name), -1);   /* config/'s own key */
    CU_ASSERT_EQUAL(config_block_register(&deny), -1);   /* the access module's */
    CU_ASSERT_EQUAL(custom.slot + name.slot + deny.slot, 0);
    /* The same key in server: is another place: deny is there, too, and so refused. */
    deny.place = CONFIG_IN_SERVER;
    CU_ASSERT_EQUAL(config_block_register(&deny), -1);
}

/* A block of every type, as a new module might bring. */
struct every_type {
    char *label;
    int64_t grace_ns;
    uint64_t buffer;
    uint32_t tries;
    uint64_t total;
    bool on;
    struct config_cidrs from;
    struct config_endpoint sink;
};

static const struct config_option every_option[] = {
    {"t_label", CONFIG_STRING, offsetof(struct every_type, label), 0, 0},
    {"t_grace", CONFIG_DURATION, offsetof(struct every_type, grace_ns), 1000000, 60000000000},
    {"t_buffer", CONFIG_SIZE, offsetof(struct every_type, buffer), 1, 1 << 20},
    {"t_tries", CONFIG_U32, offsetof(struct every_type, tries), 1, 9},
    {"t_total", CONFIG_U64, offsetof(struct every_type, total), 0, UINT64_MAX},
    {"t_on", CONFIG_BOOL, offsetof(struct every_type, on), 0, 0},
    {"t_from", CONFIG_CIDRS, offsetof(struct every_type, from), 0, 0},
    {"t_sink", CONFIG_ENDPOINT, offsetof(struct every_type, sink), 0, 0},
    {NULL, 0, 0, 0, 0},
};

static void every_type_defaults(void *block)
{
    ((struct every_type *)block)->tries = 3;
}

static struct config_block every_block = {
    "t", CONFIG_IN_ROUTE, every_option, sizeof(struct every_type), every_type_defaults, 0};

static void count_t_keys(const char *section, const char *key, void *cls)
{
    if (strcmp(section, "routes") == 0 && strncmp(key, "t_", 2) == 0)
        (*(int *)cls)++;
}

#define CHILD_CHECK(cond) (failures += !(cond))

/* In the child: the block registered, read with and without its keys, within its bounds, and
 * freed with the config (the sanitizer build checks that nothing leaks). The failures. */
static int every_type_in_child(void)
{
    char *errors = NULL;
    struct config *c;
    const struct every_type *b, *plain;
    int failures = 0, keys = 0;

    CHILD_CHECK(config_block_register(&every_block) == 0);
    config_known_keys(count_t_keys, &keys);
    CHILD_CHECK(keys == 8);
    c = parse(ROUTE "    t_label: edge\n    t_grace: 250ms\n    t_buffer: 64KiB\n"
                    "    t_tries: 5\n    t_total: 18446744073709551615\n    t_on: true\n"
                    "    t_from: [\"10.0.0.0/8\"]\n    t_sink: \"127.0.0.1:9125\"\n"
                    "  - name: plain\n    match: {path_prefix: /p/}\n"
                    "    upstream: \"http://127.0.0.1:9\"\n",
              &errors);
    CHILD_CHECK(c != NULL && errors == NULL);
    if (c == NULL) {
        fprintf(stderr, "\n%s", errors);
        free(errors);
        return failures;
    }
    b = config_route_block(&c->routes[0], &every_block);
    plain = config_route_block(&c->routes[1], &every_block);
    CHILD_CHECK(b != NULL && plain != NULL);
    CHILD_CHECK(strcmp(b->label, "edge") == 0 && b->grace_ns == 250000000);
    CHILD_CHECK(b->buffer == 65536 && b->tries == 5 && b->total == UINT64_MAX && b->on);
    CHILD_CHECK(b->from.n == 1 && b->sink.port == 9125 && strcmp(b->sink.host, "127.0.0.1") == 0);
    CHILD_CHECK(plain->tries == 3 && plain->label == NULL && !plain->on); /* the defaults */
    config_free(c);
    /* Its bounds, as config/'s own keys have theirs. */
    c = parse(ROUTE "    t_tries: 10\n", &errors);
    CHILD_CHECK(c == NULL && errors != NULL && strstr(errors, "t.yaml:5:14: t_tries") != NULL);
    free(errors);
    c = parse(ROUTE "    t_grace: 2m\n", &errors);
    CHILD_CHECK(c == NULL && errors != NULL && strstr(errors, "t.yaml:5:14: t_grace") != NULL);
    free(errors);
    return failures;
}

static void test_every_type(void)
{
    int status = 0;
    pid_t child;

    fflush(NULL); /* nothing buffered is written twice */
    child = fork();
    CU_ASSERT_FATAL(child >= 0);
    if (child == 0)
        exit(every_type_in_child());
    CU_ASSERT_EQUAL(waitpid(child, &status, 0), child);
    CU_ASSERT_TRUE(WIFEXITED(status));
    CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
}

void register_blocks_tests(void)
{
    CU_pSuite s = add_suite("config_blocks");

    add_test(s, "the modules' keys read into their blocks", test_module_keys_read);
    add_test(s, "the modules' keys: FILE:LINE:COL, guesses, places", test_module_key_problems);
    add_test(s, "a block whose keys are taken or not plain is refused", test_register_refusals);
    add_test(s, "a block of every type: read, bounded, defaults, freed", test_every_type);
}
