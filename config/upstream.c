/* An upstream: block (its servers, balancing, passive and active health), a route's own or
 * one of upstreams: (upstreams.c); a route's retries:. Their URLs are read in urls.c. See
 * sections.h. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

static void parse_server_item_url(struct loader *ld, yaml_node_t *node, void *object)
{
    config_parse_server_url(ld, node, "url", object);
}

static const struct field upstream_server_fields[] = {
    {"url", CONFIG_CUSTOM, 0, 0, 0, parse_server_item_url},
    {"weight", CONFIG_U32, offsetof(struct config_server, weight), 1, 1000, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

/* Where a server item's URL stands: the item itself, or its url:. */
static yaml_node_t *server_url_node(struct loader *ld, yaml_node_t *item)
{
    return item->type == YAML_MAPPING_NODE ? config_value_or_self(ld, item, "url") : item;
}

/* servers: a list of 1 to CONFIG_MAX_SERVERS items, each a URL or {url, weight}. */
static void parse_servers(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_upstream *up = object;
    size_t n;

    if (node->type != YAML_SEQUENCE_NODE) {
        config_error(ld, node, "servers: expected a list of URLs or {url, weight}, found %s",
                     config_kind_name(node));
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    if (n == 0) {
        config_error(ld, node, "servers: at least one server is required");
        return;
    }
    /* The servers within the bound are still read, for their own problems. */
    if (n > CONFIG_MAX_SERVERS) {
        config_error(ld, config_node_at(ld, node->data.sequence.items.start[CONFIG_MAX_SERVERS]),
                     "servers: at most %d servers are allowed; this is server %d of %zu",
                     CONFIG_MAX_SERVERS, CONFIG_MAX_SERVERS + 1, n);
        n = CONFIG_MAX_SERVERS;
    }
    up->servers = calloc(n, sizeof *up->servers);
    if (up->servers == NULL) {
        config_error(ld, node, "servers: out of memory");
        return;
    }
    up->n_servers = n;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = config_node_at(ld, node->data.sequence.items.start[i]);
        struct config_server *server = &up->servers[i];

        server->weight = 1;
        if (item->type == YAML_SCALAR_NODE) {
            config_parse_server_url(ld, item, "servers", server);
        } else if (item->type == YAML_MAPPING_NODE) {
            config_walk_mapping(ld, item, upstream_server_fields, server, "servers");
            if (config_find_value(ld, item, "url") == NULL)
                config_error(ld, item, "servers: each server needs a url");
        } else {
            config_error(ld, item, "servers: expected a URL or {url, weight}, found %s",
                         config_kind_name(item));
        }
        /* At most CONFIG_MAX_SERVERS squared comparisons an upstream. */
        for (size_t j = 0; j < i && server->url != NULL; j++) {
            const yaml_node_t *first;

            if (up->servers[j].url == NULL || strcmp(up->servers[j].url, server->url) != 0)
                continue;
            first = server_url_node(ld, config_node_at(ld, node->data.sequence.items.start[j]));
            config_error(ld, server_url_node(ld, item),
                         "servers: %s appears twice (first at line %zu)", server->url,
                         first->start_mark.line + 1);
            break;
        }
    }
}

static void parse_balance(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"round_robin", "least_request", "random_two"};
    int choice = config_parse_choice(ld, node, "balance", names, 3);

    if (choice >= 0)
        ((struct config_upstream *)object)->balance = (enum config_balance)choice;
}

/* Upstream outcomes by the names fail_on: and retries.on: give them. */
static const struct {
    const char *name;
    unsigned bit;
} outcome_names[] = {
    {"connect_failure", CONFIG_FAIL_CONNECT},
    {"timeout", CONFIG_FAIL_TIMEOUT},
    {"reset", CONFIG_FAIL_RESET},
    {"502", CONFIG_FAIL_502},
    {"503", CONFIG_FAIL_503},
    {"504", CONFIG_FAIL_504},
};

/* A list of outcomes into `*bits` (CONFIG_FAIL_*); [] is none of them. */
static void parse_outcomes(struct loader *ld, yaml_node_t *node, const char *key, unsigned *bits)
{
    if (node->type != YAML_SEQUENCE_NODE) {
        config_error(ld, node,
                     "%s: expected a list such as [connect_failure, reset, 503], found %s", key,
                     config_kind_name(node));
        return;
    }
    *bits = 0;
    for (yaml_node_item_t *it = node->data.sequence.items.start; it < node->data.sequence.items.top;
         it++) {
        yaml_node_t *item = config_node_at(ld, *it);
        const char *text = config_scalar(ld, item, key);
        size_t i = 0;

        if (text == NULL)
            continue;
        while (i < sizeof outcome_names / sizeof outcome_names[0] &&
               strcmp(text, outcome_names[i].name) != 0)
            i++;
        if (i == sizeof outcome_names / sizeof outcome_names[0]) {
            config_error(
                ld, item,
                "%s: \"%s\" is not one of connect_failure, timeout, reset, 502, 503 or 504", key,
                text);
            continue;
        }
        if ((*bits & outcome_names[i].bit) != 0)
            config_error(ld, item, "%s: %s appears twice", key, text);
        *bits |= outcome_names[i].bit;
    }
}

static void parse_fail_on(struct loader *ld, yaml_node_t *node, void *object)
{
    parse_outcomes(ld, node, "fail_on", &((struct config_upstream *)object)->passive.fail_on);
}

/* health_check.path: sent as the target of a request line, so nothing that could end or
 * split that line, and no fragment. */
static void parse_health_path(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_upstream *up = object;
    const char *text = config_scalar(ld, node, "path");
    bool plain;

    if (text == NULL)
        return;
    plain = text[0] == '/';
    for (const unsigned char *c = (const unsigned char *)text; plain && *c != '\0'; c++)
        plain = *c > ' ' && *c != 0x7f && *c != '#';
    if (!plain) {
        config_error(ld, node,
                     "path: \"%s\" is not a path like /healthz (starting with /, without spaces, "
                     "line breaks or #)",
                     text);
        return;
    }
    free(up->health_check.path);
    up->health_check.path = strdup(text);
    if (up->health_check.path == NULL)
        config_error(ld, node, "path: out of memory");
}

#define MAX_EXPECT_STATUS 32

/* expect_status: the answers to a check that count as healthy. */
static void parse_expect_status(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_upstream *up = object;
    size_t n = node->type == YAML_SEQUENCE_NODE
                   ? (size_t)(node->data.sequence.items.top - node->data.sequence.items.start)
                   : 0;

    if (n == 0 || n > MAX_EXPECT_STATUS) {
        config_error(ld, node,
                     "expect_status: expected a list of 1 to %d status codes, such as [200]",
                     MAX_EXPECT_STATUS);
        return;
    }
    free(up->health_check.expect_status);
    up->health_check.n_expect_status = 0;
    up->health_check.expect_status = calloc(n, sizeof *up->health_check.expect_status);
    if (up->health_check.expect_status == NULL) {
        config_error(ld, node, "expect_status: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = config_node_at(ld, node->data.sequence.items.start[i]);
        const char *text = config_scalar(ld, item, "expect_status");
        char *end = NULL;
        unsigned long status;
        bool repeated = false;

        if (text == NULL)
            continue;
        errno = 0;
        status = strtoul(text, &end, 10);
        if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno != 0 || status < 100 ||
            status > 599) {
            config_error(ld, item, "expect_status: \"%s\" is not a status code from 100 to 599",
                         text);
            continue;
        }
        for (size_t j = 0; j < up->health_check.n_expect_status; j++)
            repeated = repeated || up->health_check.expect_status[j] == status;
        if (repeated)
            config_error(ld, item, "expect_status: %lu appears twice", status);
        else
            up->health_check.expect_status[up->health_check.n_expect_status++] = (unsigned)status;
    }
}

static const struct field health_check_fields[] = {
    {"path", CONFIG_CUSTOM, 0, 0, 0, parse_health_path},
    /* 100ms: more often than that, the checks are a load of their own. */
    {"interval", CONFIG_DURATION, offsetof(struct config_upstream, health_check.interval_ns),
     100 * MILLISECOND, HOUR, NULL},
    {"timeout", CONFIG_DURATION, offsetof(struct config_upstream, health_check.timeout_ns),
     10 * MILLISECOND, HOUR, NULL},
    {"healthy", CONFIG_U32, offsetof(struct config_upstream, health_check.healthy), 1, 100, NULL},
    {"unhealthy", CONFIG_U32, offsetof(struct config_upstream, health_check.unhealthy), 1, 100,
     NULL},
    {"expect_status", CONFIG_CUSTOM, 0, 0, 0, parse_expect_status},
    {NULL, 0, 0, 0, 0, NULL},
};

/* health_check: {path, interval, timeout, healthy, unhealthy, expect_status}. */
static void parse_health_check(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_upstream *up = object;
    unsigned errors_before = ld->n_errors;
    yaml_node_t *timeout_at;
    char timeout[32], interval[32];

    up->health_check.enabled = true;
    up->health_check.interval_ns = 5 * (int64_t)SECOND;
    up->health_check.timeout_ns = 2 * (int64_t)SECOND;
    up->health_check.healthy = 2;
    up->health_check.unhealthy = 3;
    config_walk_mapping(ld, node, health_check_fields, up, "health_check");
    if (node->type != YAML_MAPPING_NODE)
        return;
    if (config_find_value(ld, node, "path") == NULL)
        config_error(ld, node, "health_check: path is required");
    if (up->health_check.expect_status == NULL &&
        config_find_value(ld, node, "expect_status") == NULL) {
        up->health_check.expect_status = calloc(1, sizeof *up->health_check.expect_status);
        if (up->health_check.expect_status == NULL) {
            config_error(ld, node, "health_check: out of memory");
            return;
        }
        up->health_check.expect_status[0] = 200;
        up->health_check.n_expect_status = 1;
    }
    /* A check must be over before the next one starts. Reported at the timeout, or at the
     * interval when the timeout is the default. */
    timeout_at = config_find_value(ld, node, "timeout");
    if (timeout_at == NULL)
        timeout_at = config_value_or_self(ld, node, "interval");
    if (ld->n_errors == errors_before && up->health_check.timeout_ns > up->health_check.interval_ns)
        config_error(
            ld, timeout_at, "health_check: timeout (%s) is longer than interval (%s)",
            config_format_duration(up->health_check.timeout_ns, timeout, sizeof timeout),
            config_format_duration(up->health_check.interval_ns, interval, sizeof interval));
}

static const struct field upstream_fields[] = {
    {"servers", CONFIG_CUSTOM, 0, 0, 0, parse_servers},
    {"balance", CONFIG_CUSTOM, 0, 0, 0, parse_balance},
    {"max_fails", CONFIG_U32, offsetof(struct config_upstream, passive.max_fails), 0, 1000, NULL},
    {"fail_window", CONFIG_DURATION, offsetof(struct config_upstream, passive.fail_window_ns),
     SECOND, HOUR, NULL},
    {"fail_timeout", CONFIG_DURATION, offsetof(struct config_upstream, passive.fail_timeout_ns),
     SECOND, HOUR, NULL},
    {"fail_on", CONFIG_CUSTOM, 0, 0, 0, parse_fail_on},
    {"health_check", CONFIG_CUSTOM, 0, 0, 0, parse_health_check},
    {NULL, 0, 0, 0, 0, NULL},
};

void config_upstream_defaults(struct config_upstream *up)
{
    up->first_route = SIZE_MAX;
    up->balance = CONFIG_BALANCE_ROUND_ROBIN;
    up->passive.max_fails = 3;
    up->passive.fail_window_ns = 10 * (int64_t)SECOND;
    up->passive.fail_timeout_ns = 10 * (int64_t)SECOND;
    up->passive.fail_on = CONFIG_FAIL_CONNECT | CONFIG_FAIL_TIMEOUT | CONFIG_FAIL_RESET;
}

/* A URL, one server of weight 1; or {servers: [...], balance, ...}. `key` names the value in
 * problems. */
void config_parse_upstream_block(struct loader *ld, yaml_node_t *node, const char *key,
                                 struct config_upstream *up)
{
    if (node->type == YAML_MAPPING_NODE) {
        config_walk_mapping(ld, node, upstream_fields, up, key);
        if (config_find_value(ld, node, "servers") == NULL)
            config_error(ld, node, "%s: servers is required", key);
        return;
    }
    if (node->type != YAML_SCALAR_NODE) {
        config_error(ld, node, "%s: expected a URL or a mapping with servers:, found %s", key,
                     config_kind_name(node));
        return;
    }
    up->servers = calloc(1, sizeof *up->servers);
    if (up->servers == NULL) {
        config_error(ld, node, "%s: out of memory", key);
        return;
    }
    up->n_servers = 1;
    up->servers[0].weight = 1;
    config_parse_server_url(ld, node, key, &up->servers[0]);
}

/* A route's upstream: a URL or a block as above (its defaults set by parse_route(),
 * routes.c); or a plain name, one of upstreams:, which config_resolve_upstreams() looks up
 * once the whole file is read. A URL always holds ':', which no name does. */
void config_parse_upstream(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    const char *text = node->type == YAML_SCALAR_NODE ? config_scalar(ld, node, "upstream") : NULL;

    if (node->type == YAML_SCALAR_NODE && text == NULL)
        return;
    if (text != NULL && strchr(text, ':') == NULL) {
        if (!config_is_plain_name(text))
            config_error(ld, node,
                         "upstream: \"%s\" is neither a URL (http://host:port) nor the name of "
                         "one of upstreams:",
                         text);
        else if ((route->upstream.name = strdup(text)) == NULL)
            config_error(ld, node, "upstream: out of memory");
        return;
    }
    config_parse_upstream_block(ld, node, "upstream", &route->upstream);
}

void config_free_upstream(struct config_upstream *up)
{
    for (size_t j = 0; up->servers != NULL && j < up->n_servers; j++) {
        free(up->servers[j].url);
        free(up->servers[j].origin);
        free(up->servers[j].base_path);
        free(up->servers[j].authority);
    }
    free(up->servers);
    free(up->health_check.path);
    free(up->health_check.expect_status);
    free(up->name);
}

/* retries.budget: "20%", or a bare 20. */
static void parse_retry_budget(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    const char *text = config_scalar(ld, node, "budget");
    char *end = NULL;
    unsigned long percent;

    if (text == NULL)
        return;
    errno = 0;
    percent = strtoul(text, &end, 10);
    if (!isdigit((unsigned char)text[0]) || errno != 0 || percent > 100 ||
        (strcmp(end, "%") != 0 && *end != '\0')) {
        config_error(ld, node, "budget: \"%s\" is not a percentage from 0 to 100 (like 20%%)",
                     text);
        return;
    }
    route->retries.budget_percent = (uint32_t)percent;
}

static void parse_retry_on(struct loader *ld, yaml_node_t *node, void *object)
{
    parse_outcomes(ld, node, "on", &((struct config_route *)object)->retries.on);
}

static const struct field retries_fields[] = {
    {"attempts", CONFIG_U32, offsetof(struct config_route, retries.attempts), 1, 10, NULL},
    {"on", CONFIG_CUSTOM, 0, 0, 0, parse_retry_on},
    {"budget", CONFIG_CUSTOM, 0, 0, 0, parse_retry_budget},
    {NULL, 0, 0, 0, 0, NULL},
};

const struct key_table config_upstream_keys[] = {
    {"routes.upstream", upstream_fields},
    {"routes.upstream.servers", upstream_server_fields},
    {"routes.upstream.health_check", health_check_fields},
    {"upstreams.NAME", upstream_fields},
    {"upstreams.NAME.servers", upstream_server_fields},
    {"upstreams.NAME.health_check", health_check_fields},
    {"routes.retries", retries_fields},
    {NULL, NULL},
};

/* retries: {attempts, on, budget}; without it, one attempt (parse_route(), routes.c). */
void config_parse_retries(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    route->retries.attempts = 2;
    route->retries.on = CONFIG_FAIL_CONNECT | CONFIG_FAIL_RESET;
    config_walk_mapping(ld, node, retries_fields, route, "retries");
}
