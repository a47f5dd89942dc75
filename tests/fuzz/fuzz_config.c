/* libFuzzer: the YAML config loader, on any bytes. Beyond not crashing: exactly one of a
 * config and an error text; every error line is "fuzz.yaml:LINE:COL: message" (or, for a file
 * the input names as its consumers_file, "PATH:LINE:COL: message"), and there are
 * at most CONFIG_MAX_ERRORS of them plus the count of the rest; a config returned is within
 * every bound the loader promises. The gateway's modules' own keys (config/blocks.h) are
 * registered as the gateway registers them, without the rest of the modules. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/blocks.h"
#include "config/config.h"
#include "gateway/modules/access/access_options.h"
#include "gateway/modules/limit/limit_options.h"

/* Where ":LINE:COL: " starts in `line` (up to `end`): at "fuzz.yaml", or, for a problem in
 * a file the config names (consumers_file), after that file's path. NULL if nowhere. */
static const char *position(const char *line, const char *end)
{
    static const char prefix[] = "fuzz.yaml";

    for (const char *at = strncmp(line, prefix, sizeof prefix - 1) == 0
                              ? line + sizeof prefix - 1
                              : memchr(line, ':', (size_t)(end - line));
         at != NULL && at < end; at = memchr(at + 1, ':', (size_t)(end - at - 1))) {
        const char *p = at + 1;
        bool ok = at > line;

        for (int part = 0; part < 2 && ok; part++) { /* LINE: then COL: */
            ok = *p >= '1' && *p <= '9';
            p += strspn(p, "0123456789");
            ok = ok && *p++ == ':';
        }
        if (ok && *p == ' ' && p + 1 < end)
            return at;
    }
    return NULL;
}

static void check_errors(const char *errors)
{
    size_t lines = 0;

    for (const char *line = errors; *line != '\0'; lines++) {
        const char *end = strchr(line, '\n');

        if (end == NULL || position(line, end) == NULL)
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

        if (r->name == NULL || r->upstream.n_servers == 0 ||
            r->upstream.n_servers > CONFIG_MAX_SERVERS || r->n_limits > LIMITER_MAX_PER_REQUEST ||
            r->retries.attempts < 1 || r->retries.budget_percent > 100 ||
            (r->upstream.health_check.enabled &&
             (r->upstream.health_check.timeout_ns > r->upstream.health_check.interval_ns ||
              r->upstream.health_check.path[0] != '/')))
            abort();
        for (size_t s = 0; s < r->upstream.n_servers; s++)
            if (r->upstream.servers[s].weight < 1 || r->upstream.servers[s].weight > 1000 ||
                strncmp(r->upstream.servers[s].url, r->upstream.servers[s].origin,
                        strlen(r->upstream.servers[s].origin)) != 0)
                abort();
        for (size_t s = 0; s < 3 && !known; s++)
            known = strncmp(r->proxy, proxy_schemes[s], strlen(proxy_schemes[s])) == 0;
        if (!known)
            abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (config_block_register(&gw_access_server_options) != 0 ||
        config_block_register(&gw_access_route_options) != 0 ||
        config_block_register(&gw_limit_route_options) != 0)
        abort();
    return 0;
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
