/* What the config tests share; see problems.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tests/config/problems.h"
#include "tests/unit.h"

void expect_config_problem(const char *yaml, const char *want)
{
    char *errors = NULL;
    struct config *c = config_parse("t.yaml", yaml, strlen(yaml), &errors);

    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(errors);
    if (strstr(errors, want) == NULL)
        fprintf(stderr, "\nexpected %s in:\n%s", want, errors);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors, want));
    config_free(c);
    free(errors);
}
