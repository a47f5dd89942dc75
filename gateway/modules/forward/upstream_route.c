/* One route's upstream in one runtime; design in upstream_route.h. */
#include <stdlib.h>
#include <string.h>

#include "gateway/modules/forward/forward.h"
#include "gateway/modules/forward/upstream_route.h"

struct gw_upstream_route *gw_upstream_route_of(const struct gw_runtime *rt, size_t route)
{
    return gw_runtime_state(rt, route, &gw_forward_module);
}

/* `origin`, or `origin` " via " `proxy`: the pool's name. NULL when memory is short. */
static char *pool_name(const char *origin, const char *proxy)
{
    size_t len = strlen(origin) + (proxy ? strlen(" via ") + strlen(proxy) : 0) + 1;
    char *name = malloc(len);

    if (name != NULL)
        snprintf(name, len, "%s%s%s", origin, proxy ? " via " : "", proxy ? proxy : "");
    return name;
}

int gw_upstream_route_open(struct gw_runtime *rt, size_t route, const struct gw_runtime *previous,
                           void **state, char *err, size_t err_len)
{
    const struct config_route *cr = &rt->config->routes[route];
    struct gw_upstream_route *r = calloc(1, sizeof *r);

    (void)previous; /* the servers' state is the registry's, across runtimes */
    *state = r;
    if (r == NULL || gw_backend_set_init(&r->backends, rt->backends, cr) != 0 ||
        (r->budget = gw_backends_budget(rt->backends, cr->name)) == NULL ||
        (r->pools = calloc(cr->upstream.n_servers, sizeof *r->pools)) == NULL)
        goto short_of_memory;
    for (size_t k = 0; k < cr->upstream.n_servers; k++)
        if ((r->pools[k] = pool_name(cr->upstream.servers[k].origin, cr->proxy)) == NULL)
            goto short_of_memory;
    return 0;

short_of_memory:
    snprintf(err, err_len, "out of memory");
    return -1;
}

void gw_upstream_route_close(struct gw_runtime *rt, size_t route, void *state)
{
    struct gw_upstream_route *r = state;

    for (size_t k = 0; r->pools != NULL && k < rt->config->routes[route].upstream.n_servers; k++)
        free(r->pools[k]);
    free(r->pools);
    gw_backend_set_free(&r->backends);
    free(r);
}

/* The three per-server families, each written once, a shared upstream's servers once. */
void gw_upstream_routes_render(const struct gw_runtime *rt, FILE *out)
{
    static const struct {
        enum gw_backend_family family;
        const char *head;
    } families[] = {
        {GW_FAMILY_REQUESTS,
         "# HELP sluice_upstream_requests_total Attempts on each upstream server by what "
         "it answered (error: no answer).\n# TYPE sluice_upstream_requests_total counter\n"},
        {GW_FAMILY_HEALTHY, "# HELP sluice_upstream_healthy Whether a server is believed "
                            "healthy (passive and active health).\n"
                            "# TYPE sluice_upstream_healthy gauge\n"},
        {GW_FAMILY_INFLIGHT, "# HELP sluice_upstream_inflight Requests on each server now.\n"
                             "# TYPE sluice_upstream_inflight gauge\n"},
    };
    int64_t now = limiter_now_ns();

    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        fputs(families[f].head, out);
        for (size_t i = 0; i < rt->config->n_routes; i++)
            if (config_route_owns_upstream(rt->config, i))
                gw_backend_set_render(&gw_upstream_route_of(rt, i)->backends, out,
                                      families[f].family, now);
    }
}

bool gw_forward_upstreams_ready(const struct gw_runtime *rt, int64_t now_ns)
{
    for (size_t i = 0; i < rt->config->n_routes; i++) {
        const struct gw_backend_set *set = &gw_upstream_route_of(rt, i)->backends;
        bool any = false;

        for (size_t k = 0; k < set->n && !any; k++)
            any = gw_backend_healthy(set->servers[k], now_ns);
        if (!any)
            return false;
    }
    return true;
}

struct gw_backend_set **gw_forward_backend_sets(const struct gw_runtime *rt)
{
    struct gw_backend_set **sets = calloc(rt->config->n_routes + 1, sizeof *sets);

    for (size_t i = 0; sets != NULL && i < rt->config->n_routes; i++)
        sets[i] = &gw_upstream_route_of(rt, i)->backends;
    return sets;
}
