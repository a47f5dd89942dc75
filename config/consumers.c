/* consumers: and consumers_file:, the clients known by their API keys (only each key's
 * SHA-256 digest is kept); see sections.h. */
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

/* A consumer's key: the key itself, or sha256:<64 hex digits>; only the digest is kept, in
 * `digest`. NULL, or what is wrong with it. */
static const char *key_digest(const char *text, unsigned char digest[32])
{
    size_t bin_len = 0;

    if (strncmp(text, "sha256:", 7) != 0) {
        if (text[0] == '\0')
            return "key: empty";
        crypto_hash_sha256(digest, (const unsigned char *)text, strlen(text));
        return NULL;
    }
    if (strlen(text + 7) != 64 ||
        sodium_hex2bin(digest, 32, text + 7, 64, NULL, &bin_len, NULL) != 0 || bin_len != 32)
        return "key: sha256: must be followed by 64 hex digits";
    return NULL;
}

static void parse_consumer_key(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_consumer *consumer = object;
    const char *text = config_scalar(ld, node, "key");
    const char *wrong = text != NULL ? key_digest(text, consumer->key_sha256) : NULL;

    if (wrong != NULL)
        config_error(ld, node, "%s", wrong);
}

static const struct field consumer_fields[] = {
    {"name", CONFIG_STRING, offsetof(struct config_consumer, name), 0, 0, NULL},
    {"key", CONFIG_CUSTOM, 0, 0, 0, parse_consumer_key},
    {"plan", CONFIG_STRING, offsetof(struct config_consumer, plan), 0, 0, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

const struct key_table config_consumer_keys[] = {
    {"consumers", consumer_fields},
    {NULL, NULL},
};

static int by_digest_then_place(const void *a, const void *b)
{
    const struct config_consumer *const *x = a, *const *y = b;
    int order = memcmp((*x)->key_sha256, (*y)->key_sha256, sizeof(*x)->key_sha256);

    if (order != 0)
        return order;
    return *x < *y ? -1 : *x > *y;
}

static int by_consumer_name_then_place(const void *a, const void *b)
{
    const struct config_consumer *const *x = a, *const *y = b;
    int order = strcmp((*x)->name, (*y)->name);

    if (order != 0)
        return order;
    return *x < *y ? -1 : *x > *y;
}

/* An error at `mark` of the file consumer `i` was read from. */
static void consumer_error(struct loader *ld, size_t i, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void consumer_error(struct loader *ld, size_t i, yaml_mark_t mark, const char *fmt, ...)
{
    const char *path = ld->path;
    va_list ap;

    ld->path = ld->places[i].file;
    va_start(ap, fmt);
    config_verror_at(ld, mark, fmt, ap);
    va_end(ap);
    ld->path = path;
}

/* Reports a consumer whose name or key an earlier one has, in n log n. */
static void check_consumers_apart(struct loader *ld, struct config *config)
{
    const struct config_consumer **sorted = calloc(config->n_consumers + 1, sizeof *sorted);
    size_t n = 0;

    if (sorted == NULL) {
        config_error_at(ld, (yaml_mark_t){0, 0, 0}, "consumers: out of memory");
        return;
    }
    for (size_t i = 0; i < config->n_consumers; i++)
        if (config->consumers[i].name != NULL)
            sorted[n++] = &config->consumers[i];
    qsort(sorted, n, sizeof *sorted, by_consumer_name_then_place);
    for (size_t i = 1; i < n; i++)
        if (strcmp(sorted[i]->name, sorted[i - 1]->name) == 0) {
            size_t at = (size_t)(sorted[i] - config->consumers);

            consumer_error(ld, at, ld->places[at].name, "name: consumer \"%s\" is defined twice",
                           sorted[i]->name);
        }
    qsort(sorted, n, sizeof *sorted, by_digest_then_place);
    for (size_t i = 1; i < n; i++)
        if (memcmp(sorted[i]->key_sha256, sorted[i - 1]->key_sha256,
                   sizeof sorted[i]->key_sha256) == 0) {
            size_t at = (size_t)(sorted[i] - config->consumers);

            consumer_error(ld, at, ld->places[at].key,
                           "key: consumer \"%s\" has the same key as consumer \"%s\"",
                           sorted[i]->name, sorted[i - 1]->name);
        }
    free(sorted);
}

/* Room for `more` consumers past config->n_consumers, and their places. 0, or -1. */
static int make_room_for_consumers(struct loader *ld, struct config *config, size_t more)
{
    size_t want = config->n_consumers + more + 1;
    struct config_consumer *grown = realloc(config->consumers, want * sizeof *grown);
    struct consumer_place *places;

    if (grown == NULL)
        return -1;
    config->consumers = grown;
    memset(grown + config->n_consumers, 0, (more + 1) * sizeof *grown);
    places = realloc(ld->places, want * sizeof *places);
    if (places == NULL)
        return -1;
    ld->places = places;
    ld->cap_places = want;
    return 0;
}

/* The checks of one consumer read whole (consumer `i`). */
static void check_consumer(struct loader *ld, struct config *config, size_t i, bool has_key)
{
    const struct config_consumer *c = &config->consumers[i];

    if (c->name == NULL || !has_key || c->plan == NULL)
        consumer_error(ld, i, ld->places[i].item, "consumer: name, key and plan are all required");
    else if (!config_is_plain_name(c->name))
        consumer_error(ld, i, ld->places[i].name,
                       "name: \"%s\" may hold only letters, digits, '_', '.' and '-', 64 at most",
                       c->name);
}

void config_parse_consumers(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;
    size_t n;

    if (node->type != YAML_SEQUENCE_NODE) {
        config_error(ld, node, "consumers: expected a list of {name, key, plan}, found %s",
                     config_kind_name(node));
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    if (make_room_for_consumers(ld, config, n) != 0) {
        config_error(ld, node, "consumers: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = config_node_at(ld, node->data.sequence.items.start[i]);
        size_t at = config->n_consumers++;
        unsigned errors_before = ld->n_errors;

        ld->places[at] = (struct consumer_place){
            .file = ld->path,
            .item = item->start_mark,
            .name = config_value_or_self(ld, item, "name")->start_mark,
            .key = config_value_or_self(ld, item, "key")->start_mark,
            .plan = config_value_or_self(ld, item, "plan")->start_mark,
        };
        config_walk_mapping(ld, item, consumer_fields, &config->consumers[at], "consumer");
        if (ld->n_errors == errors_before)
            check_consumer(ld, config, at, config_find_value(ld, item, "key") != NULL);
    }
}

/* --- consumers_file ------------------------------------------------------------------ */

/* The next event of the consumers file into `*event` (the last one deleted first); false after
 * reporting a syntax problem or an alias. */
static bool next_event(struct loader *ld, yaml_parser_t *parser, yaml_event_t *event)
{
    yaml_event_delete(event);
    if (!yaml_parser_parse(parser, event)) {
        config_syntax_error(ld, parser);
        return false;
    }
    if (event->type == YAML_ALIAS_EVENT) {
        config_error_at(ld, event->start_mark, "aliases (*name) are not allowed");
        return false;
    }
    return true;
}

static bool is_scalar(const yaml_event_t *e, const char *text)
{
    return e->type == YAML_SCALAR_EVENT &&
           (text == NULL || strcmp((const char *)e->data.scalar.value, text) == 0);
}

/* One consumer mapping of the file, its MAPPING_START just read: into consumer `at`. False
 * when the file cannot be read further. */
static bool read_file_consumer(struct loader *ld, yaml_parser_t *parser, yaml_event_t *event,
                               struct config *config, size_t at)
{
    struct config_consumer *c = &config->consumers[at];
    struct consumer_place *place = &ld->places[at];
    bool has_key = false;
    unsigned errors_before = ld->n_errors;

    *place = (struct consumer_place){.file = ld->path, .item = event->start_mark};
    place->name = place->key = place->plan = event->start_mark;
    for (;;) {
        char *field;
        yaml_mark_t key_at;

        if (!next_event(ld, parser, event))
            return false;
        if (event->type == YAML_MAPPING_END_EVENT)
            break;
        if (!is_scalar(event, NULL)) {
            config_error_at(ld, event->start_mark, "consumer: expected a key (name, key or plan)");
            return false;
        }
        field = strdup((const char *)event->data.scalar.value);
        key_at = event->start_mark;
        if (field == NULL || !next_event(ld, parser, event)) {
            free(field);
            return false;
        }
        if (!is_scalar(event, NULL) || event->data.scalar.length > CONFIG_MAX_SCALAR) {
            config_error_at(ld, event->start_mark, "%s: expected a plain value of at most %d bytes",
                            field, CONFIG_MAX_SCALAR);
            free(field);
            return false;
        }
        if ((strcmp(field, "name") == 0 && c->name != NULL) ||
            (strcmp(field, "key") == 0 && has_key) ||
            (strcmp(field, "plan") == 0 && c->plan != NULL)) {
            config_error_at(ld, key_at, "consumer: \"%s\" appears twice", field);
        } else if (strcmp(field, "name") == 0 || strcmp(field, "plan") == 0) {
            char **to = field[0] == 'n' ? &c->name : &c->plan;

            *to = strdup((const char *)event->data.scalar.value);
            if (*to == NULL)
                config_error_at(ld, event->start_mark, "consumers_file: out of memory");
            *(field[0] == 'n' ? &place->name : &place->plan) = event->start_mark;
        } else if (strcmp(field, "key") == 0) {
            const char *wrong = key_digest((const char *)event->data.scalar.value, c->key_sha256);

            has_key = true;
            place->key = event->start_mark;
            if (wrong != NULL)
                config_error_at(ld, event->start_mark, "%s", wrong);
        } else {
            config_report_unknown_key(ld, key_at, "consumer", field, consumer_fields);
        }
        free(field);
    }
    if (ld->n_errors == errors_before)
        check_consumer(ld, config, at, has_key);
    return true;
}

/* Reads the consumers of consumers_file (config->consumers_file) after the config's own:
 * `consumers:` and a list, as in the config, and nothing else. The file can hold far more
 * than the config's bounds allow (CONFIG_MAX_CONSUMERS), so it is read as libyaml's event
 * stream, one consumer at a time, never as a document. */
void config_read_consumers_file(struct loader *ld, struct config *config)
{
    const char *config_path = ld->path;
    char *text = NULL, why[128];
    yaml_parser_t parser;
    yaml_event_t event = {0};
    size_t len = 0;

    if (config_read_file(config->consumers_file, CONFIG_MAX_CONSUMERS_FILE, &text, &len, why) !=
        0) {
        config_error_at(ld, ld->consumers_file_at, "consumers_file: %s", why);
        return;
    }
    ld->path = config->consumers_file;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (next_event(ld, &parser, &event) && event.type == YAML_STREAM_START_EVENT &&
        next_event(ld, &parser, &event) && event.type == YAML_DOCUMENT_START_EVENT &&
        next_event(ld, &parser, &event) && event.type == YAML_MAPPING_START_EVENT &&
        next_event(ld, &parser, &event) && is_scalar(&event, "consumers") &&
        next_event(ld, &parser, &event) && event.type == YAML_SEQUENCE_START_EVENT) {
        size_t read = 0;

        for (;;) {
            if (!next_event(ld, &parser, &event))
                break;
            if (event.type == YAML_SEQUENCE_END_EVENT) {
                if (next_event(ld, &parser, &event) && event.type != YAML_MAPPING_END_EVENT)
                    config_error_at(ld, event.start_mark,
                                    "consumers_file: holds consumers: and nothing else");
                break;
            }
            if (event.type != YAML_MAPPING_START_EVENT) {
                config_error_at(ld, event.start_mark,
                                "consumers: expected a consumer {name, key, plan}");
                break;
            }
            if (++read > CONFIG_MAX_CONSUMERS) {
                config_error_at(ld, event.start_mark, "consumers_file: at most %d consumers",
                                CONFIG_MAX_CONSUMERS);
                break;
            }
            if (config->n_consumers + 1 >= ld->cap_places &&
                make_room_for_consumers(ld, config, config->n_consumers + 1024) != 0) {
                config_error_at(ld, event.start_mark, "consumers_file: out of memory");
                break;
            }
            if (!read_file_consumer(ld, &parser, &event, config, config->n_consumers++))
                break;
        }
    } else if (ld->n_errors == 0) {
        config_error_at(ld, event.start_mark, "consumers_file: expected consumers: and a list");
    }
    yaml_event_delete(&event);
    yaml_parser_delete(&parser);
    ld->path = config_path;
    free(text);
}

/* Consumers, once all are read (consumers_file: too): no two share a name or a key, and each
 * one's plan exists. */
void config_check_consumers(struct loader *ld, struct config *config)
{
    check_consumers_apart(ld, config);
    for (size_t i = 0; i < config->n_consumers; i++)
        if (config->consumers[i].plan != NULL &&
            config_plan_index(config->plans, config->n_plans, config->consumers[i].plan) < 0)
            consumer_error(ld, i, ld->places[i].plan,
                           "plan: \"%s\" is not one of the top-level plans",
                           config->consumers[i].plan);
}

/* consumers_file: a path, taken from the config file's directory when relative. */
void config_parse_consumers_file(struct loader *ld, yaml_node_t *node, void *object)
{
    ld->consumers_file_at = node->start_mark;
    config_relative_path(ld, node, "consumers_file", &((struct config *)object)->consumers_file);
}
