/* plans: the top level's named sets of limits and a route's own versions of them, resolved
 * for each route once the whole file is read; see sections.h. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

/* Where parse_plans_into() puts each plan. */
struct plan_list {
    struct config_plan *plans;
    size_t n;
};

static void parse_plan(struct loader *ld, const char *name, yaml_node_t *key, yaml_node_t *value,
                       void *cls)
{
    struct plan_list *list = cls;
    struct config_plan *plan = &list->plans[list->n];

    if ((plan->name = strdup(name)) == NULL) {
        config_error(ld, key, "plans: out of memory");
        return;
    }
    list->n++;
    config_parse_limit_list(ld, value, name, &plan->limits, &plan->n_limits);
}

/* plans: NAME: limit(s), at the top level or a route's own. */
static void parse_plans_into(struct loader *ld, yaml_node_t *node, struct config_plan **plans,
                             size_t *n_plans)
{
    struct plan_list list = {0};

    if (node->type != YAML_MAPPING_NODE) {
        config_error(ld, node, "plans: expected a mapping of plan names to limits, found %s",
                     config_kind_name(node));
        return;
    }
    list.plans = calloc((size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start) + 1,
                        sizeof *list.plans);
    if (list.plans == NULL) {
        config_error(ld, node, "plans: out of memory");
        return;
    }
    config_each_named(ld, node, "plans", "a plan's", parse_plan, &list);
    *plans = list.plans;
    *n_plans = list.n;
}

void config_parse_route_plans(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    parse_plans_into(ld, node, &route->plans, &route->n_plans);
}

void config_parse_plans(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;

    parse_plans_into(ld, node, &config->plans, &config->n_plans);
}

/* The plan of that name in `plans`, or -1. */
int config_plan_index(const struct config_plan *plans, size_t n_plans, const char *name)
{
    for (size_t i = 0; i < n_plans; i++)
        if (strcmp(plans[i].name, name) == 0)
            return (int)i;
    return -1;
}

void config_free_plans(struct config_plan *plans, size_t n)
{
    for (size_t i = 0; plans != NULL && i < n; i++) {
        free(plans[i].name);
        config_free_limits(plans[i].limits, plans[i].n_limits);
    }
    free(plans);
}

/* A route's plan:, its own plans: and unknown_key:, against the top-level plans and consumers,
 * once the whole file is read (plans: may come after routes:). */
static void resolve_route_plans(struct loader *ld, yaml_node_t *node, struct config *config,
                                struct config_route *route)
{
    struct config_plan *own = route->plans, *resolved;
    size_t n_own = route->n_plans;
    int default_plan = -1;

    route->plans = NULL;
    route->n_plans = 0;
    for (size_t i = 0; i < n_own; i++)
        if (config_plan_index(config->plans, config->n_plans, own[i].name) < 0)
            config_error(ld, config_value_or_self(ld, node, "plans"),
                         "plans: \"%s\" is not one of the top-level plans", own[i].name);
    if (route->plan != NULL) {
        default_plan = config_plan_index(config->plans, config->n_plans, route->plan);
        if (config_find_value(ld, node, "limit") != NULL)
            config_error(ld, config_value_or_self(ld, node, "plan"),
                         "plan: a route takes plan: or limit:, not both");
        else if (default_plan < 0)
            config_error(ld, config_value_or_self(ld, node, "plan"),
                         "plan: \"%s\" is not one of the top-level plans", route->plan);
    }
    route->identifies_consumers = config->n_consumers > 0 && route->key_kind != CONFIG_KEY_IP;
    /* The consumer header replaces what the client sent in it: it cannot be the key itself. */
    if (config->server.consumer_header != NULL && route->key_kind == CONFIG_KEY_HEADER &&
        strcasecmp(config->server.consumer_header, route->key_name) == 0)
        config_error(ld, config_value_or_self(ld, node, "key"),
                     "key: header %s is server.consumer_header, which the gateway sets itself",
                     route->key_name);
    if (route->unknown_key_set && !route->identifies_consumers)
        config_error(
            ld, config_value_or_self(ld, node, "unknown_key"),
            "unknown_key: needs consumers: and a route key: header:NAME or query:NAME that "
            "carries their keys");
    if (!route->unknown_key_set)
        route->unknown_key =
            route->identifies_consumers ? CONFIG_UNKNOWN_KEY_REJECT : CONFIG_UNKNOWN_KEY_ANONYMOUS;
    if (config->n_plans > 0) {
        resolved = calloc(config->n_plans, sizeof *resolved);
        route->plans = resolved;
        route->n_plans = resolved != NULL ? config->n_plans : 0;
        for (size_t i = 0; resolved != NULL && i < config->n_plans; i++) {
            const struct config_plan *top = &config->plans[i];
            int mine = config_plan_index(own, n_own, top->name);
            const struct config_plan *from = mine >= 0 ? &own[mine] : top;

            resolved[i].name = strdup(top->name);
            resolved[i].n_limits = from->n_limits;
            if (resolved[i].name == NULL ||
                config_copy_limits(from->limits, from->n_limits, &resolved[i].limits) != 0) {
                config_error(ld, node, "plans: out of memory");
                break;
            }
            config_inherit_route_key(ld, node, route, resolved[i].limits, resolved[i].n_limits);
        }
        if (resolved == NULL)
            config_error(ld, node, "plans: out of memory");
        route->anonymous_plan = config_plan_index(config->plans, config->n_plans, "anonymous");
    }
    if (default_plan >= 0 && route->plans != NULL && route->limits == NULL) {
        const struct config_plan *plan = &route->plans[default_plan];

        route->n_limits = plan->n_limits;
        if (config_copy_limits(plan->limits, plan->n_limits, &route->limits) != 0)
            config_error(ld, node, "plan: out of memory");
    }
    config_free_plans(own, n_own);
}

/* Each route's plans, resolved against the top-level ones and the consumers. */
void config_resolve_plans(struct loader *ld, yaml_node_t *root, struct config *config)
{
    yaml_node_t *routes = config_find_value(ld, root, "routes");

    for (size_t i = 0; routes != NULL && i < config->n_routes; i++)
        resolve_route_plans(ld, config_node_at(ld, routes->data.sequence.items.start[i]), config,
                            &config->routes[i]);
}
