/* YAML to `struct config`: a walk over libyaml's document tree, driven by one table of known
 * keys per section. Every problem is reported with its position; see config.h. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <yaml.h>

#include "config.h"

/* A key naming a header with '_' in it, kept until the whole file is read. */
struct underscore_key {
    yaml_node_t *node;
    char *header; /* owned */
};

struct loader {
    const char *path;
    yaml_document_t doc;
    FILE *errors; /* one line per problem, into errors_text */
    char *errors_text;
    size_t errors_len;
    unsigned n_errors;
    char **expanded; /* values with ${VAR} replaced, freed with the loader */
    size_t n_expanded;
    /* Keys naming a header with '_' in it: errors unless server.underscores_in_headers, which
     * may come later in the file, so they are judged once the whole file is read. */
    struct underscore_key *underscore_keys;
    size_t n_underscore_keys;
};

static void errorf(struct loader *ld, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void errorf(struct loader *ld, const yaml_node_t *node, const char *fmt, ...)
{
    va_list ap;

    fprintf(ld->errors, "%s:%zu:%zu: ", ld->path, node->start_mark.line + 1,
            node->start_mark.column + 1);
    va_start(ap, fmt);
    vfprintf(ld->errors, fmt, ap);
    va_end(ap);
    fputc('\n', ld->errors);
    ld->n_errors++;
}

static yaml_node_t *node_at(struct loader *ld, int id)
{
    return yaml_document_get_node(&ld->doc, id);
}

static const char *kind_name(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

static bool is_variable_name(const char *s, size_t len)
{
    if (len == 0 || isdigit((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_')
            return false;
    return true;
}

/* `text` with every ${VAR} and ${VAR:-default} replaced; NULL after reporting a problem. */
static const char *expand(struct loader *ld, yaml_node_t *node, const char *text)
{
    char *result = NULL, **grown;
    size_t len = 0;
    FILE *out;
    bool failed = false;

    if (strstr(text, "${") == NULL)
        return text;
    out = open_memstream(&result, &len);
    if (out == NULL)
        return NULL;
    for (const char *p = text; *p != '\0' && !failed;) {
        const char *close, *fallback, *value;
        size_t name_len;
        char name[128];

        if (p[0] != '$' || p[1] != '{') {
            fputc(*p++, out);
            continue;
        }
        close = strchr(p + 2, '}');
        fallback = close ? strstr(p + 2, ":-") : NULL;
        if (fallback != NULL && fallback > close)
            fallback = NULL;
        name_len = (size_t)((fallback ? fallback : close ? close : p + 2) - (p + 2));
        if (close == NULL || !is_variable_name(p + 2, name_len) || name_len >= sizeof name) {
            errorf(ld, node, "\"%s\": expected ${NAME} or ${NAME:-default}", text);
            failed = true;
            break;
        }
        memcpy(name, p + 2, name_len);
        name[name_len] = '\0';
        value = getenv(name);
        if (value != NULL && value[0] != '\0')
            fputs(value, out);
        else if (fallback != NULL)
            fwrite(fallback + 2, 1, (size_t)(close - fallback - 2), out);
        else {
            errorf(ld, node, "${%s} is not set and has no default", name);
            failed = true;
        }
        p = close + 1;
    }
    fclose(out);
    grown = realloc(ld->expanded, (ld->n_expanded + 1) * sizeof *grown);
    if (failed || grown == NULL) {
        free(result);
        if (grown != NULL)
            ld->expanded = grown;
        return NULL;
    }
    ld->expanded = grown;
    ld->expanded[ld->n_expanded++] = result;
    return result;
}

/* The value's text, environment expanded; NULL after reporting that `key` needs a single
 * value or that a variable is missing. */
static const char *scalar(struct loader *ld, yaml_node_t *node, const char *key)
{
    if (node->type != YAML_SCALAR_NODE) {
        errorf(ld, node, "%s: expected a single value, found %s", key, kind_name(node));
        return NULL;
    }
    return expand(ld, node, (const char *)node->data.scalar.value);
}

/* --- typed values ---------------------------------------------------------------------- */

enum value_type { V_STRING, V_DURATION, V_SIZE, V_U32, V_U64, V_BOOL, V_CIDRS, V_ENDPOINT, V_CUSTOM };

#define DAY ((uint64_t)86400 * 1000000000) /* the longest timeout, in ns */

struct field {
    const char *key;
    enum value_type type;
    size_t offset;  /* of the target within the object */
    uint64_t min, max; /* for V_U32 and V_U64; for V_DURATION in ns, when max is not 0 */
    void (*custom)(struct loader *ld, yaml_node_t *value, void *object);
};

static void parse_cidrs(struct loader *ld, yaml_node_t *node, const char *key,
                        struct config_cidrs *out)
{
    size_t n;

    if (node->type != YAML_SEQUENCE_NODE) {
        errorf(ld, node, "%s: expected a list of addresses or blocks, found %s", key,
               kind_name(node));
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    free(out->items);
    out->items = calloc(n ? n : 1, sizeof *out->items);
    out->n = 0;
    if (out->items == NULL)
        return;
    for (yaml_node_item_t *it = node->data.sequence.items.start;
         it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = node_at(ld, *it);
        const char *text = scalar(ld, item, key);

        if (text == NULL)
            continue;
        if (config_parse_cidr(text, &out->items[out->n]) != 0)
            errorf(ld, item, "%s: \"%s\" is not an address or address block (like 10.0.0.0/8)",
                   key, text);
        else
            out->n++;
    }
}

static void parse_value(struct loader *ld, const struct field *f, yaml_node_t *node,
                        void *object)
{
    void *target = (char *)object + f->offset;
    const char *text;
    uint64_t n;
    char *end;

    if (f->type == V_CUSTOM) {
        f->custom(ld, node, object);
        return;
    }
    if (f->type == V_CIDRS) {
        parse_cidrs(ld, node, f->key, target);
        return;
    }
    text = scalar(ld, node, f->key);
    if (text == NULL)
        return;
    switch (f->type) {
    case V_STRING:
        free(*(char **)target);
        *(char **)target = strdup(text);
        break;
    case V_DURATION:
        if (config_parse_duration(text, target) != 0)
            errorf(ld, node, "%s: \"%s\" is not a duration (like 250ms, 10s, 1m, 2h, 1d)", f->key,
                   text);
        else if (f->max != 0 && ((uint64_t)*(int64_t *)target < f->min ||
                                 (uint64_t)*(int64_t *)target > f->max))
            errorf(ld, node, "%s: \"%s\" is out of range (%s)", f->key, text,
                   f->min > 0 ? "above zero, at most a day" : "at most a day");
        break;
    case V_SIZE:
        if (config_parse_size(text, target) != 0)
            errorf(ld, node, "%s: \"%s\" is not a size (like 512, 64KiB, 10MiB)", f->key, text);
        break;
    case V_U32:
    case V_U64:
        errno = 0;
        n = strtoull(text, &end, 10);
        if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno != 0 || n < f->min ||
            n > f->max) {
            errorf(ld, node, "%s: \"%s\" is not a whole number from %llu to %llu", f->key, text,
                   (unsigned long long)f->min, (unsigned long long)f->max);
            break;
        }
        if (f->type == V_U32)
            *(uint32_t *)target = (uint32_t)n;
        else
            *(uint64_t *)target = n;
        break;
    case V_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0)
            *(bool *)target = text[0] == 't';
        else
            errorf(ld, node, "%s: expected true or false, not \"%s\"", f->key, text);
        break;
    case V_ENDPOINT: {
        struct config_endpoint *ep = target;

        free(ep->host);
        ep->host = NULL;
        if (config_parse_endpoint(text, ep) != 0)
            errorf(ld, node, "%s: \"%s\" is not host:port (IPv6 as [::1]:8080)", f->key, text);
        break;
    }
    default:
        break;
    }
}

/* Applies `fields` to every pair of the mapping `node`; unknown and repeated keys are errors. */
static void walk_mapping(struct loader *ld, yaml_node_t *node, const struct field *fields,
                         void *object, const char *section)
{
    if (node->type != YAML_MAPPING_NODE) {
        errorf(ld, node, "%s: expected a mapping of keys, found %s", section, kind_name(node));
        return;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *key = node_at(ld, p->key);
        const char *name = (const char *)key->data.scalar.value;
        const struct field *f = fields;

        if (key->type != YAML_SCALAR_NODE) {
            errorf(ld, key, "%s: keys must be plain names, not %s", section, kind_name(key));
            continue;
        }
        for (yaml_node_pair_t *q = node->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *earlier = node_at(ld, q->key);

            if (earlier->type == YAML_SCALAR_NODE &&
                strcmp((const char *)earlier->data.scalar.value, name) == 0) {
                errorf(ld, key, "%s: \"%s\" appears twice", section, name);
                name = NULL;
                break;
            }
        }
        if (name == NULL)
            continue;
        while (f->key != NULL && strcmp(f->key, name) != 0)
            f++;
        if (f->key == NULL) {
            errorf(ld, key, "%s: unknown key \"%s\"", section, name);
            continue;
        }
        parse_value(ld, f, node_at(ld, p->value), object);
    }
}

/* The value node of `key` in a mapping, or NULL. */
static yaml_node_t *find_value(struct loader *ld, yaml_node_t *mapping, const char *key)
{
    if (mapping->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = mapping->data.mapping.pairs.start;
         p < mapping->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(ld, p->key);

        if (k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
            return node_at(ld, p->value);
    }
    return NULL;
}

/* The value of `key` in `mapping`, or the mapping itself when the key is absent: where to
 * point an error about that key. */
static yaml_node_t *value_or_self(struct loader *ld, yaml_node_t *mapping, const char *key)
{
    yaml_node_t *value = find_value(ld, mapping, key);

    return value != NULL ? value : mapping;
}

/* --- sections ------------------------------------------------------------------------- */

static const struct field server_fields[] = {
    {"listen", V_ENDPOINT, offsetof(struct config, server.listen), 0, 0, NULL},
    {"admin_listen", V_ENDPOINT, offsetof(struct config, server.admin_listen), 0, 0, NULL},
    {"trusted_proxies", V_CIDRS, offsetof(struct config, server.trusted_proxies), 0, 0, NULL},
    {"max_connections", V_U32, offsetof(struct config, server.max_connections), 1, 1000000, NULL},
    {"max_connections_per_ip", V_U32, offsetof(struct config, server.max_connections_per_ip), 0,
     1000000, NULL},
    {"client_timeout", V_DURATION, offsetof(struct config, server.client_timeout_ns), 1, DAY, NULL},
    {"max_body", V_SIZE, offsetof(struct config, server.max_body), 0, 0, NULL},
    {"drain_timeout", V_DURATION, offsetof(struct config, server.drain_timeout_ns), 0, DAY, NULL},
    {"watch_config", V_BOOL, offsetof(struct config, server.watch_config), 0, 0, NULL},
    {"access_log", V_STRING, offsetof(struct config, server.access_log), 0, 0, NULL},
    {"underscores_in_headers", V_BOOL, offsetof(struct config, server.underscores_in_headers), 0, 0,
     NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

/* An enumeration: the index of `text` in `names`, or -1 after reporting it. */
static int parse_choice(struct loader *ld, yaml_node_t *node, const char *key,
                        const char *const *names, size_t n_names)
{
    const char *text = scalar(ld, node, key);

    for (size_t i = 0; text != NULL && i < n_names; i++)
        if (strcmp(text, names[i]) == 0)
            return (int)i;
    if (text != NULL)
        errorf(ld, node, "%s: \"%s\" is not one of %s%s%s%s%s", key, text, names[0],
               n_names > 2 ? ", " : " or ", names[1], n_names > 2 ? " or " : "",
               n_names > 2 ? names[2] : "");
    return -1;
}

static const char *const store_names[] = {"memory", "redis"};

static void parse_store(struct loader *ld, yaml_node_t *node, void *target)
{
    int choice = parse_choice(ld, node, "store", store_names, 2);

    if (choice >= 0)
        *(enum config_store *)target = (enum config_store)choice;
}

static void parse_config_store(struct loader *ld, yaml_node_t *node, void *object)
{
    parse_store(ld, node, &((struct config *)object)->store);
}

static void parse_on_store_error(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"local", "allow", "deny"};
    int choice = parse_choice(ld, node, "on_store_error", names, 3);

    if (choice >= 0)
        ((struct config *)object)->on_store_error = (enum config_store_error)choice;
}

static const struct field redis_fields[] = {
    {"address", V_ENDPOINT, offsetof(struct config, redis.address), 0, 0, NULL},
    {"password", V_STRING, offsetof(struct config, redis.password), 0, 0, NULL},
    {"db", V_U32, offsetof(struct config, redis.db), 0, 1000000, NULL},
    {"timeout", V_DURATION, offsetof(struct config, redis.timeout_ns), 1, DAY, NULL},
    {"prefix", V_STRING, offsetof(struct config, redis.prefix), 0, 0, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

static void parse_redis(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;

    walk_mapping(ld, node, redis_fields, config, "redis");
}

static const struct field limiter_fields[] = {
    {"max_clients", V_U32, offsetof(struct config, max_clients), 1, 100000000, NULL},
    {"store", V_CUSTOM, 0, 0, 0, parse_config_store},
    {"redis", V_CUSTOM, 0, 0, 0, parse_redis},
    {"replicas", V_U32, offsetof(struct config, replicas), 1, 10000, NULL},
    {"on_store_error", V_CUSTOM, 0, 0, 0, parse_on_store_error},
    {NULL, 0, 0, 0, 0, NULL},
};

static void parse_methods(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    size_t n = 0;

    if (node->type != YAML_SEQUENCE_NODE) {
        errorf(ld, node, "methods: expected a list like [GET, POST], found %s", kind_name(node));
        return;
    }
    if (node->data.sequence.items.top == node->data.sequence.items.start) {
        errorf(ld, node, "methods: an empty list matches nothing; leave methods out for all");
        return;
    }
    route->methods = calloc((size_t)(node->data.sequence.items.top -
                                     node->data.sequence.items.start) + 1,
                            sizeof(char *));
    for (yaml_node_item_t *it = node->data.sequence.items.start;
         route->methods != NULL && it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = node_at(ld, *it);
        const char *text = scalar(ld, item, "methods");
        char *method;

        if (text == NULL)
            continue;
        if (text[0] == '\0' || strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-") !=
                                   strlen(text)) {
            errorf(ld, item, "methods: \"%s\" is not an HTTP method", text);
            continue;
        }
        method = strdup(text);
        if (method == NULL) {
            errorf(ld, item, "methods: out of memory");
            continue;
        }
        for (char *c = method; *c != '\0'; c++)
            *c = (char)toupper((unsigned char)*c);
        route->methods[n++] = method;
    }
}

static const struct field match_fields[] = {
    {"path_prefix", V_STRING, offsetof(struct config_route, path_prefix), 0, 0, NULL},
    {"methods", V_CUSTOM, 0, 0, 0, parse_methods},
    {"host", V_STRING, offsetof(struct config_route, host), 0, 0, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

static void parse_match(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    walk_mapping(ld, node, match_fields, route, "match");
    if (route->path_prefix == NULL)
        errorf(ld, node, "match: path_prefix is required");
    else if (route->path_prefix[0] != '/')
        errorf(ld, value_or_self(ld, node, "path_prefix"), "path_prefix: must start with /");
    for (char *c = route->host; c != NULL && *c != '\0'; c++)
        *c = (char)tolower((unsigned char)*c);
}

/* upstream: http(s)://host[:port][/base-path], checked with libcurl's own URL parser. */
static void parse_upstream(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    const char *text = scalar(ld, node, "upstream");
    CURLU *url = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL, *user = NULL;
    size_t path_len;

    if (text == NULL || url == NULL)
        goto out;
    if (curl_url_set(url, CURLUPART_URL, text, 0) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(url, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        errorf(ld, node, "upstream: \"%s\" is not a URL like http://127.0.0.1:9000", text);
        goto out;
    }
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        errorf(ld, node, "upstream: scheme must be http or https, not \"%s\"", scheme);
        goto out;
    }
    if (curl_url_get(url, CURLUPART_QUERY, &query, 0) == CURLUE_OK ||
        curl_url_get(url, CURLUPART_USER, &user, 0) == CURLUE_OK || strchr(text, '#') != NULL) {
        errorf(ld, node, "upstream: only scheme, host, port and a base path are allowed");
        goto out;
    }
    path_len = strlen(path);
    while (path_len > 0 && path[path_len - 1] == '/')
        path_len--; /* "/base/" + "/x" must not become "/base//x" */
    free(route->upstream);
    free(route->upstream_base_path);
    route->upstream_base_path = strndup(path, path_len);
    route->upstream = malloc(strlen(scheme) + strlen(host) + strlen(port) + 8);
    if (route->upstream != NULL)
        snprintf(route->upstream, strlen(scheme) + strlen(host) + strlen(port) + 8, "%s://%s:%s",
                 scheme, host, port);
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_free(user);
    curl_url_cleanup(url);
}

static bool is_token(const char *s)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";

    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++)
        if (!isalnum((unsigned char)*s) && strchr(extra, *s) == NULL)
            return false;
    return true;
}

/* key: ip | header:NAME | query:NAME, for a route or for one of its limits. */
static void parse_key_into(struct loader *ld, yaml_node_t *node, enum config_key_kind *kind,
                           char **key_name)
{
    const char *text = scalar(ld, node, "key");
    const char *name = NULL;
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
        *kind = CONFIG_KEY_HEADER;
        name = text + 7;
    } else if (strncmp(text, "query:", 6) == 0) {
        *kind = CONFIG_KEY_QUERY;
        name = text + 6;
    }
    if (name == NULL || !is_token(name)) {
        errorf(ld, node, "key: expected ip, header:NAME or query:NAME, not \"%s\"", text);
        return;
    }
    free(*key_name);
    *key_name = strdup(name);
    if (*key_name == NULL) {
        errorf(ld, node, "key: out of memory");
        return;
    }
    if (*kind != CONFIG_KEY_HEADER || strchr(name, '_') == NULL)
        return;
    grown = realloc(ld->underscore_keys, (ld->n_underscore_keys + 1) * sizeof *grown);
    if (grown == NULL) {
        errorf(ld, node, "key: out of memory");
        return;
    }
    ld->underscore_keys = grown;
    grown[ld->n_underscore_keys].node = node;
    grown[ld->n_underscore_keys].header = strdup(name);
    if (grown[ld->n_underscore_keys].header == NULL)
        errorf(ld, node, "key: out of memory");
    else
        ld->n_underscore_keys++;
}

static void parse_route_key(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    parse_key_into(ld, node, &route->key_kind, &route->key_name);
}

static void parse_limit_key(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_limit *limit = object;

    parse_key_into(ld, node, &limit->key_kind, &limit->key_name);
}

/* Reports each key naming a header with '_', unless such headers are kept: the gateway drops
 * them before forwarding, so a limit would count clients by a field the upstream never sees,
 * most likely a config written for an upstream that spells it with '-'. Nodes are valid until
 * the document is deleted. */
static void check_underscore_keys(struct loader *ld, const struct config *config)
{
    for (size_t i = 0; i < ld->n_underscore_keys && !config->server.underscores_in_headers; i++)
        errorf(ld, ld->underscore_keys[i].node,
               "key: header %s has '_', which sluice drops unless "
               "server.underscores_in_headers: true",
               ld->underscore_keys[i].header);
}

static const struct field limit_fields[] = {
    {"name", V_STRING, offsetof(struct config_limit, name), 0, 0, NULL},
    {"algorithm", V_STRING, offsetof(struct config_limit, params.algorithm), 0, 0, NULL},
    {"requests", V_U64, offsetof(struct config_limit, params.requests), 1, LIMITER_MAX_REQUESTS,
     NULL},
    {"per", V_DURATION, offsetof(struct config_limit, params.per_ns), 0, 0, NULL},
    {"burst", V_U64, offsetof(struct config_limit, params.burst), 1, LIMITER_MAX_REQUESTS, NULL},
    {"key", V_CUSTOM, 0, 0, 0, parse_limit_key},
    {NULL, 0, 0, 0, 0, NULL},
};

/* Route and limit names: they go into headers, metrics and Redis keys. */
static bool is_plain_name(const char *s)
{
    size_t len = strlen(s);

    return len > 0 && len <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == len;
}

/* One limit, checked by building the limiter itself, so the config accepts exactly what the
 * limiter will run. */
static void parse_one_limit(struct loader *ld, yaml_node_t *node, struct config_limit *limit)
{
    struct limiter_params *p = &limit->params;
    char err[LIMITER_ERR_LEN];
    struct limiter *probe;
    unsigned errors_before = ld->n_errors;

    walk_mapping(ld, node, limit_fields, limit, "limit");
    if (ld->n_errors != errors_before)
        return;
    if (limit->name != NULL && !is_plain_name(limit->name)) {
        errorf(ld, value_or_self(ld, node, "name"),
               "name: \"%s\" may hold only letters, digits, '_', '.' and '-', 64 at most",
               limit->name);
        return;
    }
    if (p->algorithm == NULL || p->requests == 0 || p->per_ns == 0) {
        errorf(ld, node, "limit: algorithm, requests and per are all required");
        return;
    }
    if (!limiter_algorithm_exists(p->algorithm)) {
        errorf(ld, value_or_self(ld, node, "algorithm"),
               "algorithm: unknown \"%s\" (expected token_bucket, gcra, fixed_window, "
               "sliding_window_log or sliding_window_counter)",
               p->algorithm);
        return;
    }
    p->max_clients = 1; /* only the parameters are on trial here */
    probe = limiter_create(p, err);
    p->max_clients = 0;
    if (probe == NULL)
        errorf(ld, strncmp(err, "burst", 5) == 0 ? value_or_self(ld, node, "burst") : node,
               "limit: %s", err);
    limiter_free(probe);
}

/* limit: one mapping, or a list of named ones (all of which must allow a request). */
static void parse_limit(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    bool list = node->type == YAML_SEQUENCE_NODE;
    size_t n = list ? (size_t)(node->data.sequence.items.top - node->data.sequence.items.start) : 1;

    if (n == 0 || n > LIMITER_MAX_PER_REQUEST) {
        errorf(ld, node, "limit: a list of 1 to %d limits is expected", LIMITER_MAX_PER_REQUEST);
        return;
    }
    route->limits = calloc(n, sizeof *route->limits);
    if (route->limits == NULL)
        return;
    route->n_limits = n;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = list ? node_at(ld, node->data.sequence.items.start[i]) : node;

        parse_one_limit(ld, item, &route->limits[i]);
        if (list && route->limits[i].name == NULL && item->type == YAML_MAPPING_NODE)
            errorf(ld, item, "limit: each limit of a list needs a name");
        for (size_t j = 0; j < i && route->limits[i].name != NULL; j++)
            if (route->limits[j].name != NULL &&
                strcmp(route->limits[j].name, route->limits[i].name) == 0)
                errorf(ld, value_or_self(ld, item, "name"), "name: limit \"%s\" appears twice",
                       route->limits[i].name);
    }
}

static void parse_route_store(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;

    parse_store(ld, node, &route->store);
    route->store_set = true;
}

static const struct field route_fields[] = {
    {"name", V_STRING, offsetof(struct config_route, name), 0, 0, NULL},
    {"match", V_CUSTOM, 0, 0, 0, parse_match},
    {"upstream", V_CUSTOM, 0, 0, 0, parse_upstream},
    {"timeout", V_DURATION, offsetof(struct config_route, timeout_ns), 1, DAY, NULL},
    {"connect_timeout", V_DURATION, offsetof(struct config_route, connect_timeout_ns), 1, DAY,
     NULL},
    {"key", V_CUSTOM, 0, 0, 0, parse_route_key},
    {"ipv6_prefix", V_U32, offsetof(struct config_route, ipv6_prefix_len), 1, 128, NULL},
    {"limit", V_CUSTOM, 0, 0, 0, parse_limit},
    {"store", V_CUSTOM, 0, 0, 0, parse_route_store},
    {"dry_run", V_BOOL, offsetof(struct config_route, dry_run), 0, 0, NULL},
    {"exempt", V_CIDRS, offsetof(struct config_route, exempt), 0, 0, NULL},
    {"tls_verify", V_BOOL, offsetof(struct config_route, tls_verify), 0, 0, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

/* Limits that name no key of their own count under the route's. Done once the whole route is
 * read, since its key: may come after its limit:. */
static void inherit_route_key(struct loader *ld, yaml_node_t *node, struct config_route *route)
{
    yaml_node_t *limits = find_value(ld, node, "limit");

    for (size_t i = 0; limits != NULL && i < route->n_limits; i++) {
        yaml_node_t *item = limits->type == YAML_SEQUENCE_NODE
                                ? node_at(ld, limits->data.sequence.items.start[i])
                                : limits;
        struct config_limit *limit = &route->limits[i];

        if (find_value(ld, item, "key") != NULL)
            continue;
        limit->key_kind = route->key_kind;
        if (route->key_name == NULL)
            continue;
        limit->key_name = strdup(route->key_name);
        if (limit->key_name == NULL)
            errorf(ld, item, "key: out of memory");
    }
}

static void parse_route(struct loader *ld, yaml_node_t *node, struct config *config, size_t i)
{
    struct config_route *route = &config->routes[i];

    route->timeout_ns = 30 * (int64_t)1000000000;
    route->connect_timeout_ns = 2 * (int64_t)1000000000;
    route->key_kind = CONFIG_KEY_IP;
    route->ipv6_prefix_len = 64;
    route->tls_verify = true;
    walk_mapping(ld, node, route_fields, route, "route");
    if (node->type != YAML_MAPPING_NODE)
        return;
    inherit_route_key(ld, node, route);

    if (route->name == NULL || route->name[0] == '\0') {
        errorf(ld, node, "route: name is required");
    } else if (!is_plain_name(route->name)) {
        errorf(ld, value_or_self(ld, node, "name"),
               "name: \"%s\" may hold only letters, digits, '_', '.' and '-', 64 at most",
               route->name);
    } else {
        for (size_t j = 0; j < i; j++)
            if (config->routes[j].name != NULL && strcmp(config->routes[j].name, route->name) == 0)
                errorf(ld, value_or_self(ld, node, "name"), "name: route \"%s\" is defined twice",
                       route->name);
    }
    if (find_value(ld, node, "match") == NULL)
        errorf(ld, node, "route: match (with path_prefix) is required");
    if (find_value(ld, node, "upstream") == NULL)
        errorf(ld, node, "route: upstream is required");
    /* A single unnamed limit speaks for its route. */
    if (route->n_limits == 1 && route->limits[0].name == NULL && route->name != NULL)
        route->limits[0].name = strdup(route->name);
}

static void parse_routes(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;
    size_t n;

    if (node->type != YAML_SEQUENCE_NODE) {
        errorf(ld, node, "routes: expected a list of routes, found %s", kind_name(node));
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    if (n == 0) {
        errorf(ld, node, "routes: at least one route is required");
        return;
    }
    config->routes = calloc(n, sizeof *config->routes);
    if (config->routes == NULL)
        return;
    config->n_routes = n;
    for (size_t i = 0; i < n; i++)
        parse_route(ld, node_at(ld, node->data.sequence.items.start[i]), config, i);
}

static void parse_server(struct loader *ld, yaml_node_t *node, void *object)
{
    walk_mapping(ld, node, server_fields, object, "server");
}

static void parse_limiter(struct loader *ld, yaml_node_t *node, void *object)
{
    walk_mapping(ld, node, limiter_fields, object, "limiter");
}

static const struct field top_fields[] = {
    {"server", V_CUSTOM, 0, 0, 0, parse_server},
    {"limiter", V_CUSTOM, 0, 0, 0, parse_limiter},
    {"routes", V_CUSTOM, 0, 0, 0, parse_routes},
    {NULL, 0, 0, 0, 0, NULL},
};

static void set_defaults(struct config *config)
{
    config->server.max_connections = 1024;
    config->server.client_timeout_ns = 30 * (int64_t)1000000000;
    config->server.max_body = 10 << 20;
    config->server.drain_timeout_ns = 10 * (int64_t)1000000000;
    config->server.watch_config = true;
    config->max_clients = LIMITER_DEFAULT_MAX_CLIENTS;
    config->redis.db = 0;
    config->redis.timeout_ns = 5 * (int64_t)1000000;
    config->replicas = 1;
}

/* Parses `text` into ld->doc; reports a syntax error and returns -1 on failure. */
static int read_document(struct loader *ld, const char *text, size_t len)
{
    yaml_parser_t parser;
    int rc = -1;

    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &ld->doc)) {
        fprintf(ld->errors, "%s:%zu:%zu: YAML syntax: %s%s%s\n", ld->path,
                parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                parser.problem ? parser.problem : "unreadable",
                parser.context ? " " : "", parser.context ? parser.context : "");
        ld->n_errors++;
    } else if (yaml_document_get_root_node(&ld->doc) == NULL) {
        fprintf(ld->errors, "%s:1:1: the file is empty; at least one route is required\n",
                ld->path);
        ld->n_errors++;
        yaml_document_delete(&ld->doc);
    } else {
        rc = 0;
    }
    yaml_parser_delete(&parser);
    return rc;
}

struct config *config_parse(const char *name, const char *text, size_t len, char **errors)
{
    struct loader ld = {.path = name};
    struct config *config = calloc(1, sizeof *config);
    yaml_node_t *root;

    *errors = NULL;
    ld.errors = open_memstream(&ld.errors_text, &ld.errors_len);
    if (config == NULL || ld.errors == NULL) {
        free(config);
        if (ld.errors != NULL)
            fclose(ld.errors);
        free(ld.errors_text);
        *errors = strdup("out of memory\n");
        return NULL;
    }
    set_defaults(config);
    config->path = strdup(name);
    if (read_document(&ld, text, len) == 0) {
        root = yaml_document_get_root_node(&ld.doc);
        walk_mapping(&ld, root, top_fields, config, "top level");
        if (root->type == YAML_MAPPING_NODE && find_value(&ld, root, "routes") == NULL)
            errorf(&ld, root, "routes: at least one route is required");
        check_underscore_keys(&ld, config);
        yaml_document_delete(&ld.doc);
    }
    if (config->server.listen.host == NULL && ld.n_errors == 0 &&
        config_parse_endpoint("127.0.0.1:8080", &config->server.listen) != 0)
        ld.n_errors++;
    if (config->server.access_log == NULL)
        config->server.access_log = strdup("stdout");
    if (config->redis.prefix == NULL)
        config->redis.prefix = strdup("sluice:");
    if (config->redis.address.host == NULL)
        config_parse_endpoint("127.0.0.1:6379", &config->redis.address);
    /* Routes that name no store of their own use limiter.store. */
    for (size_t i = 0; i < config->n_routes; i++)
        if (!config->routes[i].store_set)
            config->routes[i].store = config->store;
    for (size_t i = 0; i < ld.n_expanded; i++)
        free(ld.expanded[i]);
    free(ld.expanded);
    for (size_t i = 0; i < ld.n_underscore_keys; i++)
        free(ld.underscore_keys[i].header);
    free(ld.underscore_keys);

    fclose(ld.errors);
    if (ld.n_errors > 0) {
        config_free(config);
        *errors = ld.errors_text;
        return NULL;
    }
    free(ld.errors_text);
    return config;
}

struct config *config_load(const char *path, char **errors)
{
    char *text = NULL, buf[65536];
    size_t len = 0, n;
    FILE *file = fopen(path, "rb"), *out;
    struct config *config;

    if (file == NULL || (out = open_memstream(&text, &len)) == NULL) {
        char message[512];

        snprintf(message, sizeof message, "%s: cannot read: %s\n", path, strerror(errno));
        *errors = strdup(message);
        if (file != NULL)
            fclose(file);
        return NULL;
    }
    while ((n = fread(buf, 1, sizeof buf, file)) > 0 && len < CONFIG_MAX_FILE)
        fwrite(buf, 1, n, out);
    fclose(file);
    fclose(out);
    if (len >= CONFIG_MAX_FILE) {
        free(text);
        *errors = strdup("the config file is larger than 16 MiB\n");
        return NULL;
    }
    config = config_parse(path, text, len, errors);
    free(text);
    return config;
}

void config_free(struct config *config)
{
    if (config == NULL)
        return;
    for (size_t i = 0; i < config->n_routes; i++) {
        struct config_route *r = &config->routes[i];

        free(r->name);
        free(r->path_prefix);
        for (char **m = r->methods; m != NULL && *m != NULL; m++)
            free(*m);
        free(r->methods);
        free(r->host);
        free(r->upstream);
        free(r->upstream_base_path);
        free(r->key_name);
        for (size_t j = 0; j < r->n_limits; j++) {
            free(r->limits[j].name);
            free((char *)r->limits[j].params.algorithm);
            free(r->limits[j].key_name);
        }
        free(r->limits);
        free(r->exempt.items);
    }
    free(config->routes);
    free(config->server.listen.host);
    free(config->server.admin_listen.host);
    free(config->server.trusted_proxies.items);
    free(config->server.access_log);
    free(config->redis.address.host);
    free(config->redis.password);
    free(config->redis.prefix);
    free(config->path);
    free(config);
}
