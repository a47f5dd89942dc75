#include <string.h>
#include <strings.h>

#include "routes.h"

static bool method_accepted(const struct config_route *route, const char *method)
{
    if (route->methods == NULL)
        return true;
    for (char **m = route->methods; *m != NULL; m++)
        if (strcmp(*m, method) == 0)
            return true;
    return false;
}

/* Host without its port: "Api.Example.com:8080" matches "api.example.com", "[::1]:80" "::1". */
static bool host_accepted(const struct config_route *route, const char *host)
{
    size_t len;

    if (route->host == NULL)
        return true;
    if (host == NULL)
        return false;
    if (host[0] == '[') {
        host++;
        len = strcspn(host, "]");
    } else {
        len = strcspn(host, ":");
    }
    return len == strlen(route->host) && strncasecmp(host, route->host, len) == 0;
}

int gw_route_match(const struct config *config, const char *method, const char *path,
                   const char *host)
{
    int best = -1;
    size_t best_len = 0;

    for (size_t i = 0; i < config->n_routes; i++) {
        const struct config_route *r = &config->routes[i];
        size_t len = strlen(r->path_prefix);

        if ((best < 0 || len > best_len) && strncmp(path, r->path_prefix, len) == 0 &&
            method_accepted(r, method) && host_accepted(r, host)) {
            best = (int)i;
            best_len = len;
        }
    }
    return best;
}
