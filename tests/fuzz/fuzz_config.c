/* libFuzzer: the YAML config loader, on any bytes. Beyond not crashing: exactly one of a
 * config and an error text; every error line is "fuzz.yaml:LINE:COL: message", and there are
 * at most CONFIG_MAX_ERRORS of them plus the count of the rest; a config returned is within
 * every bound the loader promises. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static void check_errors(const char *errors)
{
    static const char prefix[] = "fuzz.yaml:";
    size_t lines = 0;

    for (const char *line = errors; *line != '\0'; lines++) {
        const char *end = strchr(line, '\n'), *p = line + sizeof prefix - 1;

        if (end == NULL || strncmp(line, prefix, sizeof prefix - 1) != 0)
            abort();
        for (int part = 0; part < 2; part++) { /* LINE: then COL: */
            if (*p < '1' || *p > '9')
                abort();
            p += strspn(p, "0123456789");
            if (*p++ != ':')
                abort();
        }
        if (*p != ' ' || p + 1 >= end)
            abort();
        line = end + 1;
    }
    if (lines == 0 || lines > CONFIG_MAX_ERRORS + 1)
        abort();
}

static void check_config(const struct config *c)
{
    static const char *const proxy_schemes[] = {"http://", "https://", "socks5://"};

    if (c->n_routes == 0 || c->n_routes > CONFIG_MAX_ROUTES || c->server.max_header_size < 4096 ||
        c->server.max_header_size > 1024 * 1024 ||
        c->server.upstream_idle_timeout_ns < 1000000000LL ||
        c->server.upstream_idle_timeout_ns > 3600 * 1000000000LL ||
        c->server.upstream_max_idle < 1 || c->server.upstream_max_idle > 65536)
        abort();
    for (size_t i = 0; i < c->n_routes; i++) {
        const struct config_route *r = &c->routes[i];
        bool known = r->proxy == NULL;

        if (r->name == NULL || r->upstream == NULL || r->n_limits > LIMITER_MAX_PER_REQUEST)
            abort();
        for (size_t s = 0; s < 3 && !known; s++)
            known = strncmp(r->proxy, proxy_schemes[s], strlen(proxy_schemes[s])) == 0;
        if (!known)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *errors = NULL;
    struct config *config = config_parse("fuzz.yaml", (const char *)data, size, &errors);

    if ((config == NULL) == (errors == NULL))
        abort();
    if (errors != NULL)
        check_errors(errors);
    else
        check_config(config);
    config_free(config);
    free(errors);
    return 0;
}
