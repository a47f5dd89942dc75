/* The documentation names what the repository has: the commands docs/benchmarks.md shows,
 * and what .ci/run runs, as the README says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"

/* Whether the Makefile has a rule for the `len` bytes of `target` ("target:" starting a line). */
static bool has_make_target(const char *makefile, const char *target, size_t len)
{
    char rule[128];

    snprintf(rule, sizeof rule, "\n%.*s:", (int)len, target);
    return len < sizeof rule - 3 && strstr(makefile, rule) != NULL;
}

/* Every script docs/benchmarks.md names is in tests/bench/, every `make X` a target of the
 * Makefile, and nothing is named outside the repository (../). */
static void test_benchmarks_name_repository_commands(void)
{
    char *doc = read_file("docs/benchmarks.md"), *makefile = read_file("Makefile");
    unsigned scripts = 0, targets = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(makefile);
    CU_ASSERT_PTR_NULL(strstr(doc, "../"));
    for (const char *p = strstr(doc, "tests/bench/"); p != NULL;
         p = strstr(p + 1, "tests/bench/")) {
        char script[128];
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_./");

        snprintf(script, sizeof script, "%.*s", (int)len, p);
        if (access(script, R_OK) != 0)
            fprintf(stderr, "\ndocs/benchmarks.md names %s, which is not in the repository",
                    script);
        CU_ASSERT_EQUAL(access(script, R_OK), 0);
        scripts++;
    }
    for (const char *p = strstr(doc, "make "); p != NULL; p = strstr(p + 1, "make ")) {
        const char *target = p + 5;
        size_t len = strspn(target, "abcdefghijklmnopqrstuvwxyz_-/");

        /* Commands only, `make X` or "$ make X"; not prose, nor make -C elsewhere. */
        if (p == doc || (p[-1] != '`' && (p - doc < 2 || strncmp(p - 2, "$ ", 2) != 0)) ||
            target[0] == '-')
            continue;
        if (!has_make_target(makefile, target, len))
            fprintf(stderr, "\ndocs/benchmarks.md runs make %.*s, which the Makefile lacks",
                    (int)len, target);
        CU_ASSERT_TRUE(has_make_target(makefile, target, len));
        targets++;
    }
    CU_ASSERT(scripts > 5);
    CU_ASSERT(targets > 3);
    free(doc);
    free(makefile);
}

/* Each command .ci/run runs is named in the README, as it is written there. */
static void test_readme_says_what_ci_runs(void)
{
    char *ci = read_file(".ci/run"), *readme = read_file("README.md");
    unsigned commands = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(ci);
    CU_ASSERT_PTR_NOT_NULL_FATAL(readme);
    for (char *line = ci, *end; *line != '\0'; line = end + (*end != '\0')) {
        char quoted[256];

        end = line + strcspn(line, "\n");
        if (strncmp(line, "make ", 5) != 0)
            continue; /* the shebang, comments, set and cd */
        snprintf(quoted, sizeof quoted, "`%.*s`", (int)(end - line), line);
        if (strstr(readme, quoted) == NULL)
            fprintf(stderr, "\nREADME.md does not say CI runs %s", quoted);
        CU_ASSERT_PTR_NOT_NULL(strstr(readme, quoted));
        commands++;
    }
    CU_ASSERT_EQUAL(commands, 4);
    free(ci);
    free(readme);
}

/* `text` with each run of white space one space, and without "`" (README's code marks). */
static char *flattened(const char *text)
{
    char *out = malloc(strlen(text) + 1), *o = out;

    for (const char *c = text; out != NULL && *c != '\0'; c++) {
        if (*c == '`')
            continue;
        if (*c == ' ' || *c == '\n' || *c == '\t') {
            if (o > out && o[-1] != ' ')
                *o++ = ' ';
            continue;
        }
        *o++ = *c;
    }
    if (out != NULL)
        *o = '\0';
    return out;
}

/* The man page says how a request finds its route in the README's own words, and nothing
 * else: the rule is the longest path_prefix, not the first route listed. */
static void test_man_page_routing_rule(void)
{
    char *readme = read_file("README.md"), *man = read_file("docs/man/sluice.yaml.5");
    char *flat_readme = readme ? flattened(readme) : NULL, *flat_man = man ? flattened(man) : NULL;
    char *rule = flat_readme ? strstr(flat_readme, "Among the routes whose methods") : NULL;
    char *end = rule ? strstr(rule, "listed first.") : NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(flat_man);
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    end[strlen("listed first.")] = '\0';
    check_case(strstr(flat_man, rule) != NULL, "sluice.yaml(5)", "does not say: %s", rule);
    CU_ASSERT_PTR_NULL(strstr(flat_man, "first route that matches"));
    free(readme);
    free(man);
    free(flat_readme);
    free(flat_man);
}

void register_docs_tests(void)
{
    CU_pSuite s = add_suite_with("docs", NULL, NULL);

    add_test(s, "docs/benchmarks.md names commands of the repository",
             test_benchmarks_name_repository_commands);
    add_test(s, "the README says what .ci/run runs", test_readme_says_what_ci_runs);
    add_test(s, "sluice.yaml(5) states the README's routing rule", test_man_page_routing_rule);
}
