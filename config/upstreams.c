/* upstreams: the named upstreams routes share, and the routes that name one, resolved once the
 * whole file is read; see sections.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

static void parse_named(struct loader *ld, const char *name, yaml_node_t *key, yaml_node_t *value,
                        void *cls)
{
    struct config *config = cls;
    struct config_upstream *up = &config->upstreams[config->n_upstreams];
    char section[96];

    config_upstream_defaults(up);
    if ((up->name = strdup(name)) == NULL) {
        config_error(ld, key, "upstreams: out of memory");
        return;
    }
    config->n_upstreams++;
    snprintf(section, sizeof section, "upstreams.%s", name);
    config_parse_upstream_block(ld, value, section, up);
}

/* upstreams: {NAME: a URL, or {servers: [...], balance, ...}}, as a route's upstream:. */
void config_parse_upstreams(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;

    if (node->type != YAML_MAPPING_NODE) {
        config_error(ld, node, "upstreams: expected a mapping of names to upstreams, found %s",
                     config_kind_name(node));
        return;
    }
    config->upstreams =
        calloc((size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start) + 1,
               sizeof *config->upstreams);
    if (config->upstreams == NULL) {
        config_error(ld, node, "upstreams: out of memory");
        return;
    }
    config_each_named(ld, node, "upstreams", "an upstream's", parse_named, config);
}

/* A copy of `src` into `dst` (zeroed); false when memory is short (what was copied is left
 * for config_free_upstream()). */
static bool copy_upstream(struct config_upstream *dst, const struct config_upstream *src)
{
    *dst = *src;
    dst->name = NULL;
    dst->servers = NULL;
    dst->health_check.path = NULL;
    dst->health_check.expect_status = NULL;
    if ((dst->name = strdup(src->name)) == NULL ||
        (dst->servers = calloc(src->n_servers, sizeof *dst->servers)) == NULL)
        return false;
    for (size_t k = 0; k < src->n_servers; k++) {
        struct config_server *s = &dst->servers[k];

        s->weight = src->servers[k].weight;
        if ((s->url = strdup(src->servers[k].url)) == NULL ||
            (s->origin = strdup(src->servers[k].origin)) == NULL ||
            (s->base_path = strdup(src->servers[k].base_path)) == NULL ||
            (s->authority = strdup(src->servers[k].authority)) == NULL)
            return false;
    }
    if (src->health_check.path != NULL &&
        (dst->health_check.path = strdup(src->health_check.path)) == NULL)
        return false;
    if (src->health_check.n_expect_status > 0) {
        size_t size = src->health_check.n_expect_status * sizeof *src->health_check.expect_status;

        if ((dst->health_check.expect_status = malloc(size)) == NULL)
            return false;
        memcpy(dst->health_check.expect_status, src->health_check.expect_status, size);
    }
    return true;
}

static int upstream_index(const struct config *config, const char *name)
{
    for (size_t u = 0; u < config->n_upstreams; u++)
        if (strcmp(config->upstreams[u].name, name) == 0)
            return (int)u;
    return -1;
}

/* The names of upstreams:, "a, b, c", into `out` (shortened with "..." if need be). */
static const char *list_names(const struct config *config, char *out, size_t cap)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t u = 0; u < config->n_upstreams && used < cap; u++) {
        int n =
            snprintf(out + used, cap - used, "%s%s", u > 0 ? ", " : "", config->upstreams[u].name);

        used += n > 0 ? (size_t)n : 0;
    }
    if (used >= cap && cap > 4)
        memcpy(out + cap - 4, "...", 4);
    return out;
}

/* Route `i` names upstream `up`. The routes sharing one share what its servers did (passive
 * failures; active checks, sent through the first route's forward proxy and TLS settings),
 * which holds only if they reach the servers the same way: they must agree on proxy and
 * tls_verify. */
static void check_agrees(struct loader *ld, yaml_node_t *at, const struct config *config, size_t i,
                         const struct config_upstream *up)
{
    const struct config_route *route = &config->routes[i], *first;
    const char *differs;

    if (up->first_route == i)
        return;
    first = &config->routes[up->first_route];
    differs = route->tls_verify != first->tls_verify ? "tls_verify"
              : (route->proxy == NULL) != (first->proxy == NULL) ||
                      (route->proxy != NULL && strcmp(route->proxy, first->proxy) != 0)
                  ? "proxy"
                  : NULL;
    if (differs != NULL)
        config_error(ld, at,
                     "upstream: routes %s and %s share upstream %s, and so its servers' health, "
                     "but their %s differs; give them the same %s",
                     first->name, route->name, up->name, differs, differs);
}

/* Warns of each upstream no route names, at its name. */
static void warn_unused(struct loader *ld, yaml_node_t *root, const struct config *config)
{
    yaml_node_t *node = config_find_value(ld, root, "upstreams");

    for (size_t u = 0; node != NULL && u < config->n_upstreams; u++) {
        if (config->upstreams[u].first_route != SIZE_MAX)
            continue;
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
             p++) {
            yaml_node_t *key = config_node_at(ld, p->key);

            if (key->type == YAML_SCALAR_NODE &&
                strcmp((const char *)key->data.scalar.value, config->upstreams[u].name) == 0) {
                config_warn_at(ld, key->start_mark, "upstreams: %s is named by no route",
                               config->upstreams[u].name);
                break;
            }
        }
    }
}

void config_resolve_upstreams(struct loader *ld, yaml_node_t *root, struct config *config)
{
    yaml_node_t *routes = config_find_value(ld, root, "routes");
    bool whole = ld->n_errors == 0; /* else an upstream may lack what a copy needs */
    char names[256];

    for (size_t i = 0; routes != NULL && i < config->n_routes; i++) {
        struct config_route *route = &config->routes[i];
        yaml_node_t *at = config_value_or_self(
            ld, config_node_at(ld, routes->data.sequence.items.start[i]), "upstream");
        int u;

        if (route->upstream.name == NULL)
            continue;
        if ((u = upstream_index(config, route->upstream.name)) < 0) {
            config_error(ld, at, "upstream: \"%s\" is not one of upstreams: (%s)",
                         route->upstream.name,
                         config->n_upstreams > 0 ? list_names(config, names, sizeof names)
                                                 : "there are none");
            continue;
        }
        if (config->upstreams[u].first_route == SIZE_MAX)
            config->upstreams[u].first_route = i;
        if (!whole)
            continue;
        config_free_upstream(&route->upstream);
        if (!copy_upstream(&route->upstream, &config->upstreams[u])) {
            config_error(ld, at, "upstream: out of memory");
            continue;
        }
        check_agrees(ld, at, config, i, &config->upstreams[u]);
    }
    warn_unused(ld, root, config);
}

bool config_route_owns_upstream(const struct config *config, size_t i)
{
    const struct config_upstream *up = &config->routes[i].upstream;

    return up->name == NULL || up->first_route == i;
}
