/* The typed values a table of keys reads (loader.h): durations, sizes and counts within their
 * bounds, booleans, address lists, endpoints, enumerations, names and paths. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"

/* "from 4KiB to 1MiB", "above zero, at most 1d": the bounds of a duration or size field. */
static const char *describe_range(const struct field *f, char *out, size_t cap)
{
    char min[32], max[32];

    if (f->type == CONFIG_DURATION) {
        config_format_duration((int64_t)f->min, min, sizeof min);
        config_format_duration((int64_t)f->max, max, sizeof max);
    } else {
        config_format_size(f->min, min, sizeof min);
        config_format_size(f->max, max, sizeof max);
    }
    if (f->min > 1)
        snprintf(out, cap, "from %s to %s", min, max);
    else
        snprintf(out, cap, "%sat most %s", f->min == 1 ? "above zero, " : "", max);
    return out;
}

/* Whether the number at `target` (an int64_t for durations, else a uint64_t) is out of the
 * field's bounds. */
static bool out_of_range(const struct field *f, const void *target)
{
    uint64_t n = f->type == CONFIG_DURATION ? (uint64_t)(*(const int64_t *)target)
                                            : *(const uint64_t *)target;

    return f->max != 0 && (n < f->min || n > f->max);
}

static void parse_cidrs(struct loader *ld, yaml_node_t *node, const char *key,
                        struct config_cidrs *out)
{
    size_t n;

    if (node->type != YAML_SEQUENCE_NODE) {
        config_error(ld, node, "%s: expected a list of addresses or blocks, found %s", key,
                     config_kind_name(node));
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    free(out->items);
    out->items = calloc(n ? n : 1, sizeof *out->items);
    out->n = 0;
    if (out->items == NULL)
        return;
    for (yaml_node_item_t *it = node->data.sequence.items.start; it < node->data.sequence.items.top;
         it++) {
        yaml_node_t *item = config_node_at(ld, *it);
        const char *text = config_scalar(ld, item, key);

        if (text == NULL)
            continue;
        if (config_parse_cidr(text, &out->items[out->n]) != 0)
            config_error(ld, item,
                         "%s: \"%s\" is not an address or address block (like 10.0.0.0/8)", key,
                         text);
        else
            out->n++;
    }
}

void config_parse_value(struct loader *ld, const struct field *f, yaml_node_t *node, void *object)
{
    void *target = (char *)object + f->offset;
    const char *text;
    uint64_t n;
    char *end, range[80];

    if (f->type == CONFIG_CUSTOM) {
        f->custom(ld, node, object);
        return;
    }
    if (f->type == CONFIG_CIDRS) {
        parse_cidrs(ld, node, f->key, target);
        return;
    }
    text = config_scalar(ld, node, f->key);
    if (text == NULL)
        return;
    switch (f->type) {
    case CONFIG_STRING:
        free(*(char **)target);
        *(char **)target = strdup(text);
        break;
    case CONFIG_DURATION:
        if (config_parse_duration(text, target) != 0)
            config_error(ld, node, "%s: \"%s\" is not a duration (like 250ms, 10s, 1m, 2h, 1d)",
                         f->key, text);
        else if (out_of_range(f, target))
            config_error(ld, node, "%s: \"%s\" is out of range (%s)", f->key, text,
                         describe_range(f, range, sizeof range));
        break;
    case CONFIG_SIZE:
        if (config_parse_size(text, target) != 0)
            config_error(ld, node, "%s: \"%s\" is not a size (like 512, 64KiB, 10MiB)", f->key,
                         text);
        else if (out_of_range(f, target))
            config_error(ld, node, "%s: \"%s\" is out of range (%s)", f->key, text,
                         describe_range(f, range, sizeof range));
        break;
    case CONFIG_U32:
    case CONFIG_U64:
        errno = 0;
        n = strtoull(text, &end, 10);
        if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno != 0 || n < f->min ||
            n > f->max) {
            config_error(ld, node, "%s: \"%s\" is not a whole number from %llu to %llu", f->key,
                         text, (unsigned long long)f->min, (unsigned long long)f->max);
            break;
        }
        if (f->type == CONFIG_U32)
            *(uint32_t *)target = (uint32_t)n;
        else
            *(uint64_t *)target = n;
        break;
    case CONFIG_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0)
            *(bool *)target = text[0] == 't';
        else
            config_error(ld, node, "%s: expected true or false, not \"%s\"", f->key, text);
        break;
    case CONFIG_ENDPOINT: {
        struct config_endpoint *ep = target;

        free(ep->host);
        ep->host = NULL;
        if (config_parse_endpoint(text, ep) != 0)
            config_error(ld, node, "%s: \"%s\" is not host:port (IPv6 as [::1]:8080)", f->key,
                         text);
        break;
    }
    default:
        break;
    }
}

/* An enumeration: the index of `text` in `names`, or -1 after reporting it. */
int config_parse_choice(struct loader *ld, yaml_node_t *node, const char *key,
                        const char *const *names, size_t n_names)
{
    const char *text = config_scalar(ld, node, key);

    char list[256] = "";
    size_t len = 0;

    for (size_t i = 0; text != NULL && i < n_names; i++)
        if (strcmp(text, names[i]) == 0)
            return (int)i;
    if (text == NULL)
        return -1;
    for (size_t i = 0; i < n_names && len < sizeof list; i++) /* "a, b or c" */
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                i == 0             ? ""
                                : i + 1 == n_names ? " or "
                                                   : ", ",
                                names[i]);
    config_error(ld, node, "%s: \"%s\" is not one of %s", key, text, list);
    return -1;
}

static const char *const header_modes[] = {"ietf", "x-ratelimit", "both", "none"};

/* headers: ietf | x-ratelimit | both | none, for the server or a route. */
int config_parse_headers_mode(struct loader *ld, yaml_node_t *node)
{
    return config_parse_choice(ld, node, "headers", header_modes,
                               sizeof header_modes / sizeof header_modes[0]);
}

static const char *const store_names[] = {"memory", "redis"};

void config_parse_store(struct loader *ld, yaml_node_t *node, void *target)
{
    int choice = config_parse_choice(ld, node, "store", store_names, 2);

    if (choice >= 0)
        *(enum config_store *)target = (enum config_store)choice;
}

bool config_is_token(const char *s)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";

    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++)
        if (!isalnum((unsigned char)*s) && strchr(extra, *s) == NULL)
            return false;
    return true;
}

/* Route and limit names: they go into headers, metrics and Redis keys. */
bool config_is_plain_name(const char *s)
{
    size_t len = strlen(s);

    return len > 0 && len <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == len;
}

/* A path in the config, taken from the config file's directory when relative, into `*out`. */
void config_relative_path(struct loader *ld, yaml_node_t *node, const char *key, char **out)
{
    const char *text = config_scalar(ld, node, key);
    const char *slash = strrchr(ld->path, '/');
    int dir_len = slash != NULL && text != NULL && text[0] != '/' ? (int)(slash - ld->path) : 0;

    if (text == NULL)
        return;
    if (text[0] == '\0') {
        config_error(ld, node, "%s: empty", key);
        return;
    }
    free(*out);
    if (asprintf(out, "%.*s%s%s", dir_len, ld->path, dir_len > 0 ? "/" : "", text) < 0) {
        *out = NULL;
        config_error(ld, node, "%s: out of memory", key);
    }
}
