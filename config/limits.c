/* limiter: (the client tables and the store), and a route's key:, limit: (one or a list) and
 * on_limit:; each limit is checked by building it. See sections.h. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/methods.h"
#include "config/sections.h"
#include "limiter/limiter.h"

static void parse_config_store(struct loader *ld, yaml_node_t *node, void *object)
{
    config_parse_store(ld, node, &((struct config *)object)->store);
}

static void parse_on_store_error(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"local", "allow", "deny"};
    int choice = config_parse_choice(ld, node, "on_store_error", names, 3);

    if (choice >= 0)
        ((struct config *)object)->on_store_error = (enum config_store_error)choice;
}

/* sentinels: ["host:port", ...], 1 to CONFIG_MAX_SENTINELS of them. */
static void parse_sentinels(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;
    yaml_node_item_t *item;
    size_t n = node->type == YAML_SEQUENCE_NODE
                   ? (size_t)(node->data.sequence.items.top - node->data.sequence.items.start)
                   : 0;

    if (n == 0 || n > CONFIG_MAX_SENTINELS) {
        config_error(ld, node, "sentinels: expected a list of 1 to %d \"host:port\"",
                     CONFIG_MAX_SENTINELS);
        return;
    }
    config->redis.sentinels = calloc(n, sizeof *config->redis.sentinels);
    if (config->redis.sentinels == NULL) {
        config_error(ld, node, "sentinels: out of memory");
        return;
    }
    for (item = node->data.sequence.items.start; item < node->data.sequence.items.top; item++) {
        yaml_node_t *at = config_node_at(ld, *item);
        const char *text = config_scalar(ld, at, "sentinels");
        struct config_endpoint *e = &config->redis.sentinels[config->redis.n_sentinels];

        if (text == NULL)
            continue;
        if (config_parse_endpoint(text, e) != 0 || e->port == 0) {
            free(e->host);
            e->host = NULL;
            config_error(ld, at, "sentinels: \"%s\" is not host:port", text);
            continue;
        }
        config->redis.n_sentinels++;
    }
}

static const struct field redis_fields[] = {
    {"address", CONFIG_ENDPOINT, offsetof(struct config, redis.address), 0, 0, NULL},
    {"password", CONFIG_STRING, offsetof(struct config, redis.password), 0, 0, NULL},
    {"db", CONFIG_U32, offsetof(struct config, redis.db), 0, 1000000, NULL},
    {"timeout", CONFIG_DURATION, offsetof(struct config, redis.timeout_ns), 1, DAY, NULL},
    {"prefix", CONFIG_STRING, offsetof(struct config, redis.prefix), 0, 0, NULL},
    {"lease", CONFIG_DURATION, offsetof(struct config, redis.lease_ns), SECOND, HOUR, NULL},
    {"sentinels", CONFIG_CUSTOM, 0, 0, 0, parse_sentinels},
    {"master", CONFIG_STRING, offsetof(struct config, redis.master), 0, 0, NULL},
    {"sentinel_password", CONFIG_STRING, offsetof(struct config, redis.sentinel_password), 0, 0,
     NULL},
    /* 0: never. An hour: an operator's reset waits at most that long on other replicas. */
    {"refusal_cache", CONFIG_DURATION, offsetof(struct config, redis.refusal_cache_ns), 0, HOUR,
     NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

/* Sentinel (sentinels: and master:, together) or one Redis (address:), not both. */
static void parse_redis(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;
    yaml_node_t *sentinels, *master;

    config_walk_mapping(ld, node, redis_fields, config, "redis");
    if (node->type != YAML_MAPPING_NODE)
        return;
    sentinels = config_find_value(ld, node, "sentinels");
    master = config_find_value(ld, node, "master");
    if ((sentinels == NULL) != (master == NULL))
        config_error(ld, sentinels ? sentinels : master,
                     "%s: sentinels and master go together (the sentinels' name for the master)",
                     sentinels ? "sentinels" : "master");
    else if (sentinels != NULL && config_find_value(ld, node, "address") != NULL)
        config_error(ld, sentinels,
                     "sentinels: give the sentinels or one Redis's address, not both");
    if (master != NULL && config->redis.master != NULL && config->redis.master[0] == '\0')
        config_error(ld, master, "master: the sentinels' name for the master, not empty");
    if (config_find_value(ld, node, "sentinel_password") != NULL && sentinels == NULL)
        config_error(ld, config_find_value(ld, node, "sentinel_password"),
                     "sentinel_password: there are no sentinels to give it to");
}

/* replicas: a number (1 to 10000), or auto: the replicas that announce themselves in Redis. */
static void parse_replicas(struct loader *ld, yaml_node_t *node, void *object)
{
    static const struct field as_number = {
        "replicas", CONFIG_U32, offsetof(struct config, replicas), 1, 10000, NULL};
    struct config *config = object;
    const char *text = node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : "";

    if (strcmp(text, "auto") == 0) {
        config->replicas = 1;
        config->replicas_auto = true;
        return;
    }
    config_parse_value(ld, &as_number, node, object);
}

static const struct field limiter_fields[] = {
    {"max_clients", CONFIG_U32, offsetof(struct config, max_clients), 1, 100000000, NULL},
    {"store", CONFIG_CUSTOM, 0, 0, 0, parse_config_store},
    {"redis", CONFIG_CUSTOM, 0, 0, 0, parse_redis},
    {"replicas", CONFIG_CUSTOM, 0, 0, 0, parse_replicas},
    {"on_store_error", CONFIG_CUSTOM, 0, 0, 0, parse_on_store_error},
    /* 1MiB: below that, not even the default max_clients of 1-request logs fit. 1TiB: no
     * machine sluice runs on has more. */
    {"max_memory", CONFIG_SIZE, offsetof(struct config, max_memory), 1024 * KIB,
     1024 * 1024 * 1024 * KIB, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

void config_parse_limiter(struct loader *ld, yaml_node_t *node, void *object)
{
    config_walk_mapping(ld, node, limiter_fields, object, "limiter");
}

/* key: ip | header:NAME | query:NAME, for a route or for one of its limits. */
static void parse_key_into(struct loader *ld, yaml_node_t *node, enum config_key_kind *kind,
                           char **key_name)
{
    const char *text = config_scalar(ld, node, "key");
    const char *name = NULL;
    enum config_key_kind found = CONFIG_KEY_IP;
    struct underscore_key *grown;

    if (text == NULL)
        return;
    if (strcmp(text, "ip") == 0) {
        *kind = CONFIG_KEY_IP;
        free(*key_name);
        *key_name = NULL;
        return;
    }
    if (strncmp(text, "header:", 7) == 0) {
        found = CONFIG_KEY_HEADER;
        name = text + 7;
    } else if (strncmp(text, "query:", 6) == 0) {
        found = CONFIG_KEY_QUERY;
        name = text + 6;
    }
    if (name == NULL || !config_is_token(name)) {
        config_error(ld, node, "key: expected ip, header:NAME or query:NAME, not \"%s\"", text);
        return;
    }
    /* The kind and its name change together: a header or query key always has its name,
     * even in a config being refused (config_same_key() reads both). */
    free(*key_name);
    *key_name = strdup(name);
    if (*key_name == NULL) {
        *kind = CONFIG_KEY_IP;
        config_error(ld, node, "key: out of memory");
        return;
    }
    *kind = found;
    if (*kind != CONFIG_KEY_HEADER || strchr(name, '_') == NULL)
        return;
    grown = config_grow(ld->underscore_keys, &ld->cap_underscore_keys, ld->n_underscore_keys,
                        sizeof *grown);
    if (grown == NULL) {
        config_error(ld, node, "key: out of memory");
        return;
    }
    ld->underscore_keys = grown;
    grown[ld->n_underscore_keys].node = node;
    grown[ld->n_underscore_keys].header = strdup(name);
    if (grown[ld->n_underscore_keys].header == NULL)
        config_error(ld, node, "key: out of memory");
    else
        ld->n_underscore_keys++;
}

void config_parse_route_key(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    parse_key_into(ld, node, &route->key_kind, &route->key_name);
}

static void parse_limit_key(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_limit *limit = object;

    parse_key_into(ld, node, &limit->key_kind, &limit->key_name);
    limit->key_set = true;
}

/* Reports each key naming a header with '_', unless such headers are kept: the gateway drops
 * them before forwarding, so a limit would count clients by a field the upstream never sees,
 * most likely a config written for an upstream that spells it with '-'. Nodes are valid until
 * the document is deleted. */
void config_check_underscore_keys(struct loader *ld, const struct config *config)
{
    for (size_t i = 0; i < ld->n_underscore_keys && !config->server.underscores_in_headers; i++)
        config_error(ld, ld->underscore_keys[i].node,
                     "key: header %s has '_', which sluice drops unless "
                     "server.underscores_in_headers: true",
                     ld->underscore_keys[i].header);
}

/* cost: {METHOD: units, ..., default: units}; bounded by the limit once it is whole. */
static void parse_cost(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_limit *limit = object;
    size_t n;

    if (node->type != YAML_MAPPING_NODE) {
        config_error(ld, node,
                     "cost: expected a mapping of methods to units, such as {POST: 5, "
                     "default: 1}");
        return;
    }
    n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start);
    free(limit->costs);
    limit->costs = calloc(n + 1, sizeof *limit->costs);
    limit->n_costs = 0;
    if (limit->costs == NULL) {
        config_error(ld, node, "cost: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *key = config_node_at(ld, node->data.mapping.pairs.start[i].key);
        yaml_node_t *value = config_node_at(ld, node->data.mapping.pairs.start[i].value);
        const char *method =
            key->type == YAML_SCALAR_NODE ? (const char *)key->data.scalar.value : "";
        const char *text = config_scalar(ld, value, "cost");
        char *end = NULL;
        unsigned long long units;

        if (text == NULL)
            continue;
        errno = 0;
        units = strtoull(text, &end, 10);
        if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || units == 0 ||
            units > LIMITER_MAX_REQUESTS) {
            config_error(ld, value, "cost: \"%s\" is not a whole number of units from 1", text);
            continue;
        }
        if (strcmp(method, "default") == 0) {
            limit->default_cost = units;
            continue;
        }
        /* In capitals, as the request line carries it and the lookup compares it. */
        if (!config_method_is_standard(method)) {
            config_error(ld, key, "cost: \"%s\" is not default or a method in capitals (%s)",
                         method, CONFIG_METHOD_LIST);
            continue;
        }
        for (size_t j = 0; j < limit->n_costs; j++)
            if (strcmp(limit->costs[j].method, method) == 0)
                config_error(ld, key, "cost: %s appears twice", method);
        limit->costs[limit->n_costs].method = strdup(method);
        limit->costs[limit->n_costs].units = units;
        if (limit->costs[limit->n_costs].method == NULL)
            config_error(ld, key, "cost: out of memory");
        else
            limit->n_costs++;
    }
}

static const struct field limit_fields[] = {
    {"name", CONFIG_STRING, offsetof(struct config_limit, name), 0, 0, NULL},
    {"algorithm", CONFIG_STRING, offsetof(struct config_limit, params.algorithm), 0, 0, NULL},
    {"requests", CONFIG_U64, offsetof(struct config_limit, params.requests), 1,
     LIMITER_MAX_REQUESTS, NULL},
    {"per", CONFIG_DURATION, offsetof(struct config_limit, params.per_ns), 0, 0, NULL},
    {"burst", CONFIG_U64, offsetof(struct config_limit, params.burst), 1, LIMITER_MAX_REQUESTS,
     NULL},
    {"key", CONFIG_CUSTOM, 0, 0, 0, parse_limit_key},
    {"cost", CONFIG_CUSTOM, 0, 0, 0, parse_cost},
    {"count", CONFIG_CUSTOM, 0, 0, 0, config_parse_count},
    {"delay", CONFIG_CUSTOM, 0, 0, 0, config_parse_delay},
    {NULL, 0, 0, 0, 0, NULL},
};

/* Keeps a sliding_window_log limit for config_check_log_memory(). */
static void note_log_limit(struct loader *ld, yaml_node_t *node, uint64_t requests)
{
    struct log_limit *grown =
        config_grow(ld->log_limits, &ld->cap_log_limits, ld->n_log_limits, sizeof *grown);

    if (grown == NULL) {
        config_error(ld, node, "limit: out of memory");
        return;
    }
    ld->log_limits = grown;
    grown[ld->n_log_limits++] = (struct log_limit){node, requests};
}

/* A sliding_window_log keeps 8 bytes for each request in its window, for each client: at
 * worst requests x 8 B x limiter.max_clients, which must fit in limiter.max_memory. A log of
 * 100,000 a minute is 80 GB for the default 100,000 clients; the sliding window counter
 * limits as closely in 24 bytes a client. */
void config_check_log_memory(struct loader *ld, const struct config *config)
{
    char budget[32];

    for (size_t i = 0; i < ld->n_log_limits; i++) {
        const struct log_limit *l = &ld->log_limits[i];
        uint64_t worst = l->requests * 8 * config->max_clients; /* < 2^63: both are bounded */

        if (worst <= config->max_memory)
            continue;
        config_error(
            ld, config_value_or_self(ld, l->node, "requests"),
            "limit: sliding_window_log keeps 8 bytes per request for each client: %llu "
            "requests x 8 B x %u clients (limiter.max_clients) is %.1f MiB at worst, over "
            "limiter.max_memory (%s); use sliding_window_counter, which needs no more memory "
            "for more requests, or fewer requests or max_clients",
            (unsigned long long)l->requests, config->max_clients, (double)worst / (1024.0 * 1024.0),
            config_format_size(config->max_memory, budget, sizeof budget));
    }
}

/* Whether the limit's algorithm counts requests in flight, and so takes no per. */
static bool in_flight(const struct limiter_params *p)
{
    return limiter_algorithm_from_name(p->algorithm) == LIMITER_CONCURRENCY;
}

/* Names each of algorithm, requests and per (but for concurrency) that a limit lacks ("all
 * required" left a newcomer to guess which). */
static void report_missing_limit_keys(struct loader *ld, yaml_node_t *node,
                                      const struct limiter_params *p)
{
    const char *missing[3];
    size_t n = 0;

    if (p->algorithm == NULL)
        missing[n++] = "algorithm";
    if (p->requests == 0)
        missing[n++] = "requests";
    if (config_find_value(ld, node, "per") == NULL && !in_flight(p))
        missing[n++] = "per";
    if (n == 1)
        config_error(ld, node, "limit: %s is required", missing[0]);
    else if (n == 2)
        config_error(ld, node, "limit: %s and %s are required", missing[0], missing[1]);
    else
        config_error(ld, node, "limit: %s, %s and %s are required", missing[0], missing[1],
                     missing[2]);
}

/* One limit, checked by building the limiter itself, so the config accepts exactly what the
 * limiter will run. */
static void parse_one_limit(struct loader *ld, yaml_node_t *node, struct config_limit *limit)
{
    struct limiter_params *p = &limit->params;
    char err[LIMITER_ERR_LEN];
    struct limiter *probe;
    unsigned errors_before = ld->n_errors;

    limit->default_cost = 1;
    config_walk_mapping(ld, node, limit_fields, limit, "limit");
    if (ld->n_errors != errors_before)
        return;
    if (limit->name != NULL && !config_is_plain_name(limit->name)) {
        config_error(ld, config_value_or_self(ld, node, "name"),
                     "name: \"%s\" may hold only letters, digits, '_', '.' and '-', 64 at most",
                     limit->name);
        return;
    }
    if (p->algorithm == NULL || p->requests == 0 ||
        (config_find_value(ld, node, "per") == NULL && !in_flight(p))) {
        report_missing_limit_keys(ld, node, p);
        return;
    }
    if (in_flight(p)) {
        if (config_find_value(ld, node, "per") != NULL) {
            config_error(ld, config_find_value(ld, node, "per"),
                         "per: concurrency counts requests in flight, not over time; leave per "
                         "out");
            return;
        }
        if (limit->count.set) {
            config_error(ld, config_find_value(ld, node, "count"),
                         "count: a concurrency slot is given back when its request ends, "
                         "whatever its answer");
            return;
        }
    } else if (p->per_ns < LIMITER_MIN_PER_NS || p->per_ns > LIMITER_MAX_PER_NS) {
        config_error(ld, config_value_or_self(ld, node, "per"), "per must be %s",
                     p->per_ns < LIMITER_MIN_PER_NS ? "at least 1ms" : "at most 366d");
        return;
    }
    p->algorithm_id = limiter_algorithm_from_name(p->algorithm);
    if (p->algorithm_id == LIMITER_ALGORITHM_UNKNOWN) {
        config_error(ld, config_value_or_self(ld, node, "algorithm"),
                     "algorithm: unknown \"%s\" (expected " LIMITER_ALGORITHM_LIST ")",
                     p->algorithm);
        return;
    }
    if (p->algorithm_id == LIMITER_SLIDING_WINDOW_LOG)
        note_log_limit(ld, node, p->requests);
    p->max_clients = 1; /* only the parameters are on trial here */
    probe = limiter_create(p, err);
    p->max_clients = 0;
    if (probe == NULL)
        config_error(ld,
                     strncmp(err, "burst", 5) == 0 ? config_value_or_self(ld, node, "burst") : node,
                     "limit: %s", err);
    /* A cost the limit can never let through would deny that method for good. */
    for (size_t i = 0; probe != NULL && i <= limit->n_costs; i++) {
        uint64_t units = i < limit->n_costs ? limit->costs[i].units : limit->default_cost;

        if (units > limiter_quota(probe))
            config_error(ld, config_value_or_self(ld, node, "cost"),
                         "cost: %llu units is more than this limit lets through at once (%llu)",
                         (unsigned long long)units, (unsigned long long)limiter_quota(probe));
    }
    limiter_free(probe);
}

/* One mapping, or a list of named ones (all of which must allow a request), into `*limits`;
 * a single unnamed limit is named `name`. For a route's limit: and each plan. */
void config_parse_limit_list(struct loader *ld, yaml_node_t *node, const char *name,
                             struct config_limit **limits, size_t *n_limits)
{
    bool list = node->type == YAML_SEQUENCE_NODE;
    size_t n = list ? (size_t)(node->data.sequence.items.top - node->data.sequence.items.start) : 1;
    struct config_limit *parsed;

    if (n == 0 || n > LIMITER_MAX_PER_REQUEST) {
        config_error(ld, node, "limit: a list of 1 to %d limits is expected",
                     LIMITER_MAX_PER_REQUEST);
        return;
    }
    parsed = calloc(n, sizeof *parsed);
    if (parsed == NULL)
        return;
    *limits = parsed;
    *n_limits = n;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = list ? config_node_at(ld, node->data.sequence.items.start[i]) : node;

        parse_one_limit(ld, item, &parsed[i]);
        if (list && parsed[i].name == NULL && item->type == YAML_MAPPING_NODE)
            config_error(ld, item, "limit: each limit of a list needs a name");
        for (size_t j = 0; j < i && parsed[i].name != NULL; j++)
            if (parsed[j].name != NULL && strcmp(parsed[j].name, parsed[i].name) == 0)
                config_error(ld, config_value_or_self(ld, item, "name"),
                             "name: limit \"%s\" appears twice", parsed[i].name);
    }
    if (n == 1 && parsed[0].name == NULL && name != NULL)
        parsed[0].name = strdup(name);
    config_check_delays(ld, node, parsed, n);
}

void config_parse_limit(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    /* Named after the route once its name is known (parse_route(), routes.c). */
    config_parse_limit_list(ld, node, NULL, &route->limits, &route->n_limits);
}

static void parse_on_limit_status(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    const char *text = config_scalar(ld, node, "status");

    if (text != NULL && strcmp(text, "429") == 0)
        route->on_limit.status = 429;
    else if (text != NULL && strcmp(text, "503") == 0)
        route->on_limit.status = 503;
    else if (text != NULL)
        config_error(ld, node, "status: \"%s\" is not 429 or 503", text);
}

/* body_file: read now, whole, so that a denial never touches the disk. */
static void parse_on_limit_body(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    char *path = NULL, why[128];

    config_relative_path(ld, node, "body_file", &path);
    if (path == NULL)
        return;
    free(route->on_limit.body);
    if (config_read_file(path, CONFIG_MAX_BODY_FILE, &route->on_limit.body,
                         &route->on_limit.body_len, why) != 0)
        config_error(ld, node, "body_file: %s", why);
    free(path);
}

static void parse_on_limit_content_type(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    const char *text = config_scalar(ld, node, "content_type");

    if (text == NULL)
        return;
    /* A field value goes out as it is: nothing that could end the field or the head. */
    if (text[0] == '\0' || strlen(text) > 200 || strpbrk(text, "\r\n") != NULL) {
        config_error(ld, node, "content_type: expected a media type such as text/plain");
        return;
    }
    free(route->on_limit.content_type);
    route->on_limit.content_type = strdup(text);
    if (route->on_limit.content_type == NULL)
        config_error(ld, node, "content_type: out of memory");
}

static const struct field on_limit_fields[] = {
    {"status", CONFIG_CUSTOM, 0, 0, 0, parse_on_limit_status},
    {"body_file", CONFIG_CUSTOM, 0, 0, 0, parse_on_limit_body},
    {"content_type", CONFIG_CUSTOM, 0, 0, 0, parse_on_limit_content_type},
    {NULL, 0, 0, 0, 0, NULL},
};

void config_parse_on_limit(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    config_walk_mapping(ld, node, on_limit_fields, route, "on_limit");
    if ((route->on_limit.body != NULL) != (route->on_limit.content_type != NULL))
        config_error(ld, node, "on_limit: body_file and content_type go together");
}

/* Limits that name no key of their own count under the route's, and so do those that name
 * the same key: decided here once, not for each request. Done once the whole route is read,
 * since its key: may come after its limit:. */
void config_inherit_route_key(struct loader *ld, yaml_node_t *node,
                              const struct config_route *route, struct config_limit *limits,
                              size_t n_limits)
{
    for (size_t i = 0; i < n_limits; i++) {
        struct config_limit *limit = &limits[i];

        if (!limit->key_set) {
            limit->key_kind = route->key_kind;
            free(limit->key_name);
            limit->key_name = route->key_name != NULL ? strdup(route->key_name) : NULL;
            if (route->key_name != NULL && limit->key_name == NULL) {
                config_error(ld, node, "key: out of memory");
                continue;
            }
        }
        limit->route_key =
            config_same_key(limit->key_kind, limit->key_name, route->key_kind, route->key_name);
    }
    config_check_delay_keys(ld, node, route, limits, n_limits);
}

/* A deep copy of `n` limits into `*out`; -1 when memory is short. */
int config_copy_limits(const struct config_limit *from, size_t n, struct config_limit **out)
{
    struct config_limit *to = calloc(n + 1, sizeof *to);

    *out = to;
    if (to == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        to[i] = from[i];
        to[i].name = strdup(from[i].name);
        to[i].params.algorithm = strdup(from[i].params.algorithm);
        to[i].key_name = from[i].key_name ? strdup(from[i].key_name) : NULL;
        to[i].costs = calloc(from[i].n_costs + 1, sizeof *to[i].costs);
        to[i].n_costs = 0;
        if (to[i].name == NULL || to[i].params.algorithm == NULL ||
            (from[i].key_name != NULL && to[i].key_name == NULL) || to[i].costs == NULL)
            return -1;
        for (size_t j = 0; j < from[i].n_costs; j++) {
            to[i].costs[j] = from[i].costs[j];
            to[i].costs[j].method = strdup(from[i].costs[j].method);
            if (to[i].costs[j].method == NULL)
                return -1;
            to[i].n_costs++;
        }
    }
    return 0;
}

void config_free_limits(struct config_limit *limits, size_t n)
{
    for (size_t i = 0; limits != NULL && i < n; i++) {
        free(limits[i].name);
        free((char *)limits[i].params.algorithm);
        free(limits[i].key_name);
        for (size_t j = 0; j < limits[i].n_costs; j++)
            free(limits[i].costs[j].method);
        free(limits[i].costs);
    }
    free(limits);
}

/* Top-level plans: hold limits too (routes.limit). */
const struct key_table config_limit_keys[] = {
    {"limiter", limiter_fields},
    {"limiter.redis", redis_fields},
    {"routes.limit", limit_fields},
    {"routes.limit.count", config_count_fields},
    {"routes.limit.delay", config_delay_fields},
    {"routes.on_limit", on_limit_fields},
    {NULL, NULL},
};
