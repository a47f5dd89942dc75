/* HTTP request methods, in one table; design in methods.h. */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "config/methods.h"

/* Anything beyond these is far more likely a typo (GETT) than an extension method. */
static const struct method {
    const char *name;
    bool idempotent; /* RFC 9110 section 9.2.2 */
    bool retried;    /* a retry may send it again */
} methods[] = {
    {"GET", true, true},     {"HEAD", true, true},   {"POST", false, false},
    {"PUT", true, true},     {"DELETE", true, true}, {"CONNECT", false, false},
    {"OPTIONS", true, true}, {"TRACE", true, false}, {"PATCH", false, false},
};

_Static_assert(sizeof methods / sizeof methods[0] == CONFIG_METHOD_COUNT,
               "CONFIG_METHOD_COUNT counts the table");

/* The entry `text` names in any case, or NULL. */
static const struct method *method_any_case(const char *text)
{
    for (size_t i = 0; text != NULL && i < CONFIG_METHOD_COUNT; i++)
        if (strcasecmp(text, methods[i].name) == 0)
            return &methods[i];
    return NULL;
}

/* The entry `method` is, spelled exactly so, or NULL. */
static const struct method *method_exactly(const char *method)
{
    const struct method *m = method_any_case(method);

    return m != NULL && strcmp(m->name, method) == 0 ? m : NULL;
}

const char *config_method_standard(const char *text)
{
    const struct method *m = method_any_case(text);

    return m != NULL ? m->name : NULL;
}

bool config_method_is_standard(const char *method)
{
    return method_exactly(method) != NULL;
}

bool config_method_is_miscased(const char *method)
{
    return method_any_case(method) != NULL && method_exactly(method) == NULL;
}

int config_method_index(const char *method)
{
    const struct method *m = method_exactly(method);

    return m != NULL ? (int)(m - methods) : -1;
}

bool config_method_is_idempotent(const char *method)
{
    const struct method *m = method_exactly(method);

    return m != NULL && m->idempotent;
}

bool config_method_may_retry(const char *method)
{
    const struct method *m = method_exactly(method);

    return m != NULL && m->retried;
}
