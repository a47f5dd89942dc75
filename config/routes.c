/* routes: each route's match:, name and own settings, parsed through the sections it holds,
 * and the checks across routes; see sections.h. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/methods.h"
#include "config/sections.h"

static void parse_route_headers(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    int mode = config_parse_headers_mode(ld, node);

    if (mode >= 0) {
        route->headers = (enum config_headers)mode;
        route->headers_set = true;
    }
}

static void parse_methods(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    size_t n = 0;

    if (node->type != YAML_SEQUENCE_NODE) {
        config_error(ld, node, "methods: expected a list like [GET, POST], found %s",
                     config_kind_name(node));
        return;
    }
    if (node->data.sequence.items.top == node->data.sequence.items.start) {
        config_error(ld, node, "methods: an empty list matches nothing; leave methods out for all");
        return;
    }
    route->methods =
        calloc((size_t)(node->data.sequence.items.top - node->data.sequence.items.start) + 1,
               sizeof(char *));
    for (yaml_node_item_t *it = node->data.sequence.items.start;
         route->methods != NULL && it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = config_node_at(ld, *it);
        const char *text = config_scalar(ld, item, "methods");
        char *method;

        if (text == NULL)
            continue;
        /* Only the standard methods: a route limited to one no client sends (GETT) would
         * never match. */
        if (config_method_standard(text) == NULL) {
            config_error(ld, item, "methods: \"%s\" is not an HTTP method (expected %s)", text,
                         CONFIG_METHOD_LIST);
            continue;
        }
        method = strdup(config_method_standard(text));
        if (method == NULL) {
            config_error(ld, item, "methods: out of memory");
            continue;
        }
        route->methods[n++] = method;
    }
}

static const struct field match_fields[] = {
    {"path_prefix", CONFIG_STRING, offsetof(struct config_route, path_prefix), 0, 0, NULL},
    {"methods", CONFIG_CUSTOM, 0, 0, 0, parse_methods},
    {"host", CONFIG_STRING, offsetof(struct config_route, host), 0, 0, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

static void parse_match(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    config_walk_mapping(ld, node, match_fields, route, "match");
    if (route->path_prefix == NULL)
        config_error(ld, node, "match: path_prefix is required");
    else if (route->path_prefix[0] != '/')
        config_error(ld, config_value_or_self(ld, node, "path_prefix"),
                     "path_prefix: must start with /");
    for (char *c = route->host; c != NULL && *c != '\0'; c++)
        *c = (char)tolower((unsigned char)*c);
}

static void parse_unknown_key(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"anonymous", "reject"};
    struct config_route *route = object;
    int choice = config_parse_choice(ld, node, "unknown_key", names, 2);

    if (choice >= 0) {
        route->unknown_key = (enum config_unknown_key)choice;
        route->unknown_key_set = true;
    }
}

static void parse_route_store(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    config_parse_store(ld, node, &route->store);
    route->store_set = true;
}

static const struct field route_fields[] = {
    {"name", CONFIG_STRING, offsetof(struct config_route, name), 0, 0, NULL},
    {"match", CONFIG_CUSTOM, 0, 0, 0, parse_match},
    {"upstream", CONFIG_CUSTOM, 0, 0, 0, config_parse_upstream},
    {"retries", CONFIG_CUSTOM, 0, 0, 0, config_parse_retries},
    {"strip_prefix", CONFIG_BOOL, offsetof(struct config_route, forwarding.strip_prefix), 0, 0,
     NULL},
    {"host", CONFIG_CUSTOM, 0, 0, 0, config_parse_route_host},
    {"set_headers", CONFIG_CUSTOM, 0, 0, 0, config_parse_set_headers},
    {"remove_headers", CONFIG_CUSTOM, 0, 0, 0, config_parse_remove_headers},
    {"timeout", CONFIG_DURATION, offsetof(struct config_route, timeout_ns), 1, DAY, NULL},
    {"connect_timeout", CONFIG_DURATION, offsetof(struct config_route, connect_timeout_ns), 1, DAY,
     NULL},
    {"upgrades", CONFIG_CUSTOM, 0, 0, 0, config_parse_upgrades},
    {"tunnel_idle_timeout", CONFIG_DURATION,
     offsetof(struct config_route, forwarding.tunnel_idle_timeout_ns), SECOND, DAY, NULL},
    {"key", CONFIG_CUSTOM, 0, 0, 0, config_parse_route_key},
    {"ipv6_prefix", CONFIG_U32, offsetof(struct config_route, ipv6_prefix_len), 1, 128, NULL},
    {"limit", CONFIG_CUSTOM, 0, 0, 0, config_parse_limit},
    {"store", CONFIG_CUSTOM, 0, 0, 0, parse_route_store},
    {"headers", CONFIG_CUSTOM, 0, 0, 0, parse_route_headers},
    {"on_limit", CONFIG_CUSTOM, 0, 0, 0, config_parse_on_limit},
    {"tls_verify", CONFIG_BOOL, offsetof(struct config_route, tls_verify), 0, 0, NULL},
    {"proxy", CONFIG_CUSTOM, 0, 0, 0, config_parse_proxy},
    {"plan", CONFIG_STRING, offsetof(struct config_route, plan), 0, 0, NULL},
    {"plans", CONFIG_CUSTOM, 0, 0, 0, config_parse_route_plans},
    {"unknown_key", CONFIG_CUSTOM, 0, 0, 0, parse_unknown_key},
    {NULL, 0, 0, 0, 0, NULL},
};

const struct key_table config_route_keys[] = {
    {"routes", route_fields},
    {"routes.match", match_fields},
    {NULL, NULL},
};

static void parse_route(struct loader *ld, yaml_node_t *node, struct config_route *route)
{
    route->timeout_ns = 30 * (int64_t)1000000000;
    route->connect_timeout_ns = 2 * (int64_t)1000000000;
    route->forwarding.n_upgrades = 1;
    snprintf(route->forwarding.upgrades[0], sizeof route->forwarding.upgrades[0], "websocket");
    route->forwarding.tunnel_idle_timeout_ns = 3600 * (int64_t)SECOND;
    route->key_kind = CONFIG_KEY_IP;
    route->ipv6_prefix_len = 64;
    route->tls_verify = true;
    route->anonymous_plan = -1;
    route->on_limit.status = 429;
    /* The upstream's, for a URL as for a mapping that leaves them out. */
    config_upstream_defaults(&route->upstream);
    /* Without retries: one attempt; config_parse_retries() has the defaults of retries: {}. */
    route->retries.attempts = 1;
    route->retries.on = 0;
    route->retries.budget_percent = 20;
    route->forwarding.host_mode = CONFIG_HOST_PRESERVE;
    if (config_blocks_open(route->blocks, CONFIG_IN_ROUTE) != 0)
        config_error(ld, node, "route: out of memory");
    config_walk_mapping_blocks(ld, node, route_fields, route, "route", CONFIG_IN_ROUTE,
                               route->blocks);
    if (node->type != YAML_MAPPING_NODE)
        return;
    config_inherit_route_key(ld, node, route, route->limits, route->n_limits);

    if (route->name == NULL || route->name[0] == '\0') {
        config_error(ld, node, "route: name is required");
    } else if (!config_is_plain_name(route->name)) {
        config_error(ld, config_value_or_self(ld, node, "name"),
                     "name: \"%s\" may hold only letters, digits, '_', '.' and '-', 64 at most",
                     route->name);
    }
    if (config_find_value(ld, node, "match") == NULL)
        config_error(ld, node, "route: match (with path_prefix) is required");
    if (config_find_value(ld, node, "upstream") == NULL)
        config_error(ld, node, "route: upstream is required");
    /* A single unnamed limit speaks for its route. */
    if (route->n_limits == 1 && route->limits[0].name == NULL && route->name != NULL)
        route->limits[0].name = strdup(route->name);
}

static int by_route_name_then_place(const void *a, const void *b)
{
    const struct config_route *const *x = a, *const *y = b;
    int order = strcmp((*x)->name, (*y)->name);

    if (order != 0)
        return order;
    return *x < *y ? -1 : *x > *y;
}

/* Reports each route named like one before it, in n log n as for keys. */
static void check_route_names(struct loader *ld, yaml_node_t *list, struct config *config)
{
    const struct config_route **named = calloc(config->n_routes + 1, sizeof *named);
    size_t n = 0;

    if (named == NULL) {
        config_error(ld, list, "routes: out of memory");
        return;
    }
    for (size_t i = 0; i < config->n_routes; i++) /* a bad name was reported already */
        if (config->routes[i].name != NULL && config_is_plain_name(config->routes[i].name))
            named[n++] = &config->routes[i];
    qsort(named, n, sizeof *named, by_route_name_then_place);
    for (size_t i = 1; i < n; i++) {
        yaml_node_t *route;

        if (strcmp(named[i]->name, named[i - 1]->name) != 0)
            continue;
        route = config_node_at(ld, list->data.sequence.items.start[named[i] - config->routes]);
        config_error(ld, config_value_or_self(ld, route, "name"),
                     "name: route \"%s\" is defined twice", named[i]->name);
    }
    free(named);
}

#define ANY_OTHER_METHOD (1u << CONFIG_METHOD_COUNT)

/* The bit of `method` among the standard methods (config_method_index()); 0 for none. */
static unsigned method_bit(const char *method)
{
    int index = config_method_index(method);

    return index >= 0 ? 1u << index : 0;
}

/* The methods `route` takes, as bits of the standard methods (HEAD with GET, as routes.c
 * matches), and ANY_OTHER_METHOD when it names none and so takes every method. */
static unsigned methods_taken(const struct config_route *route)
{
    unsigned bits = 0;

    if (route->methods == NULL)
        return ANY_OTHER_METHOD | (ANY_OTHER_METHOD - 1);
    for (char **m = route->methods; *m != NULL; m++)
        bits |= method_bit(*m) | (strcmp(*m, "GET") == 0 ? method_bit("HEAD") : 0);
    return bits;
}

static uint64_t fnv1a(const char *text)
{
    uint64_t hash = 14695981039346656037ULL;

    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++)
        hash = (hash ^ *c) * 1099511628211ULL;
    return hash;
}

/* A route's match, as check_shadowed_routes() compares it. */
struct route_match {
    uint64_t prefix_hash, host_hash; /* host_hash 0: any host */
    unsigned methods;
    bool whole_segments; /* its prefix ends in /: it matches whole segments, stripped or not */
};

/* Whether the earlier route `a` takes every request the later `b` would: routes.c picks the
 * longest matching path_prefix and, of equal ones, the first, so only the same prefix can
 * shadow; `a` must take b's methods, b's host (or any), and every path b's would (a
 * strip_prefix route takes whole segments only, unless its prefix ends in /). */
static bool shadows(const struct config_route *a, const struct route_match *am,
                    const struct config_route *b, const struct route_match *bm)
{
    return am->prefix_hash == bm->prefix_hash && (bm->methods & ~am->methods) == 0 &&
           (a->host == NULL || am->host_hash == bm->host_hash) &&
           (!a->forwarding.strip_prefix || b->forwarding.strip_prefix || bm->whole_segments) &&
           strcmp(a->path_prefix, b->path_prefix) == 0 &&
           (a->host == NULL || (b->host != NULL && strcmp(a->host, b->host) == 0));
}

/* Warns of each route that an earlier one shadows, so that it can never match (a copy left in
 * by mistake, or a specific route put after the general one). Each pair is compared by hashes
 * first, so 1024 routes of one long prefix cost half a million cheap comparisons. */
static void check_shadowed_routes(struct loader *ld, yaml_node_t *list, struct config *config)
{
    struct route_match *m = calloc(config->n_routes + 1, sizeof *m);

    if (m == NULL) {
        config_error(ld, list, "routes: out of memory");
        return;
    }
    for (size_t i = 0; i < config->n_routes; i++) {
        const struct config_route *r = &config->routes[i];

        m[i].prefix_hash = r->path_prefix != NULL ? fnv1a(r->path_prefix) : 0;
        m[i].host_hash = r->host != NULL ? fnv1a(r->host) | 1 : 0;
        m[i].methods = methods_taken(r);
        m[i].whole_segments = r->path_prefix != NULL && r->path_prefix[0] != '\0' &&
                              r->path_prefix[strlen(r->path_prefix) - 1] == '/';
    }
    for (size_t i = 1; i < config->n_routes; i++) {
        const struct config_route *b = &config->routes[i];

        for (size_t j = 0; j < i && b->path_prefix != NULL && b->name != NULL; j++) {
            const struct config_route *a = &config->routes[j];
            yaml_node_t *b_node, *a_node;

            if (a->path_prefix == NULL || a->name == NULL || !shadows(a, &m[j], b, &m[i]))
                continue;
            b_node = config_node_at(ld, list->data.sequence.items.start[i]);
            a_node = config_node_at(ld, list->data.sequence.items.start[j]);
            config_warn_at(
                ld, config_value_or_self(ld, b_node, "match")->start_mark,
                "route \"%s\" can never match: route \"%s\" (line %zu) comes first with "
                "the same path_prefix %s, %s and %s",
                b->name, a->name, config_value_or_self(ld, a_node, "match")->start_mark.line + 1,
                a->path_prefix, a->methods == NULL ? "any method" : "every method of this one",
                a->host == NULL ? "any host" : "the same host");
            break;
        }
    }
    free(m);
}

void config_parse_routes(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;
    size_t n;

    if (node->type != YAML_SEQUENCE_NODE) {
        config_error(ld, node, "routes: expected a list of routes, found %s",
                     config_kind_name(node));
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    if (n == 0) {
        config_error(ld, node, "routes: at least one route is required");
        return;
    }
    /* The routes within the bound are still read, for their own problems. */
    if (n > CONFIG_MAX_ROUTES) {
        config_error(ld, config_node_at(ld, node->data.sequence.items.start[CONFIG_MAX_ROUTES]),
                     "routes: at most %d routes are allowed; this is route %d of %zu",
                     CONFIG_MAX_ROUTES, CONFIG_MAX_ROUTES + 1, n);
        n = CONFIG_MAX_ROUTES;
    }
    config->routes = calloc(n, sizeof *config->routes);
    if (config->routes == NULL) {
        config_error(ld, node, "routes: out of memory");
        return;
    }
    config->n_routes = n;
    for (size_t i = 0; i < n; i++)
        parse_route(ld, config_node_at(ld, node->data.sequence.items.start[i]), &config->routes[i]);
    check_route_names(ld, node, config);
    check_shadowed_routes(ld, node, config);
}
