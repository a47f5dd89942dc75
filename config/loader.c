/* The YAML engine: a file's document read within its bounds, mappings walked against tables
 * of keys, ${VAR} replaced, every problem at FILE:LINE:COL; the design is in loader.h. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"

/* One problem at `mark`, on one line: a value quoted in the message keeps its line breaks and
 * other control characters as \n or \x1b. Past CONFIG_MAX_ERRORS problems are only counted:
 * a file of thousands of unknown keys would otherwise make as many lines in the log of every
 * reload. */
void config_verror_at(struct loader *ld, yaml_mark_t mark, const char *fmt, va_list ap)
{
    char *message = NULL;

    if (ld->n_errors == CONFIG_MAX_ERRORS)
        ld->first_unlisted = mark;
    if (ld->n_errors++ >= CONFIG_MAX_ERRORS)
        return;
    if (vasprintf(&message, fmt, ap) < 0)
        message = NULL;
    fprintf(ld->errors, "%s:%zu:%zu: ", ld->path, mark.line + 1, mark.column + 1);
    for (const unsigned char *c = (const unsigned char *)(message ? message : "out of memory");
         *c != '\0'; c++) {
        if (*c == '\n')
            fputs("\\n", ld->errors);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(ld->errors, "\\x%02x", *c);
        else
            fputc(*c, ld->errors);
    }
    fputc('\n', ld->errors);
    free(message);
}

void config_error_at(struct loader *ld, yaml_mark_t mark, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    config_verror_at(ld, mark, fmt, ap);
    va_end(ap);
}

void config_error(struct loader *ld, const yaml_node_t *node, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    config_verror_at(ld, node->start_mark, fmt, ap);
    va_end(ap);
}

void config_warn_at(struct loader *ld, yaml_mark_t mark, const char *fmt, ...)
{
    va_list ap;

    if (ld->n_warnings++ >= CONFIG_MAX_ERRORS)
        return;
    fprintf(ld->warnings, "%s:%zu:%zu: warning: ", ld->path, mark.line + 1, mark.column + 1);
    va_start(ap, fmt);
    vfprintf(ld->warnings, fmt, ap);
    va_end(ap);
    fputc('\n', ld->warnings);
}

/* `items` (`n` of `*cap`, each `size` bytes) with room for one more, doubling so that appends
 * stay linear; NULL, with `items` untouched, when memory is short. */
void *config_grow(void *items, size_t *cap, size_t n, size_t size)
{
    size_t new_cap = *cap ? *cap * 2 : 16;
    void *grown;

    if (n < *cap)
        return items;
    grown = realloc(items, new_cap * size);
    if (grown != NULL)
        *cap = new_cap;
    return grown;
}

yaml_node_t *config_node_at(struct loader *ld, int id)
{
    return yaml_document_get_node(&ld->doc, id);
}

const char *config_kind_name(const yaml_node_t *node)
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

/* `text` with every ${VAR} and ${VAR:-default} replaced; NULL after reporting a problem.
 * ${request.NAME} is copied through as it is: it names a part of a request, filled in by the
 * gateway (set_headers: checks which), and a name with '.' is no environment variable's. */
static const char *expand(struct loader *ld, yaml_node_t *node, const char *text)
{
    char *result = NULL;
    size_t len = 0, written = 0;
    FILE *out;
    bool failed = false;

    if (strstr(text, "${") == NULL)
        return text;
    free(ld->expanded);
    ld->expanded = NULL;
    out = open_memstream(&result, &len);
    if (out == NULL) {
        config_error(ld, node, "out of memory");
        return NULL;
    }
    /* The length is checked as it grows: a thousand ${LONG} must not take a thousand times
     * its size first. */
    for (const char *p = text; *p != '\0' && !failed && written <= CONFIG_MAX_SCALAR;) {
        const char *close, *fallback, *value;
        size_t name_len;
        char name[128];

        if (p[0] != '$' || p[1] != '{') {
            fputc(*p++, out);
            written++;
            continue;
        }
        close = strchr(p + 2, '}');
        if (close != NULL && strncmp(p + 2, "request.", 8) == 0) {
            fwrite(p, 1, (size_t)(close + 1 - p), out);
            written += (size_t)(close + 1 - p);
            p = close + 1;
            continue;
        }
        /* Looked for before the '}' only: a value of many ${A} stays linear. */
        fallback = close ? memmem(p + 2, (size_t)(close - (p + 2)), ":-", 2) : NULL;
        name_len = (size_t)((fallback ? fallback : close ? close : p + 2) - (p + 2));
        if (close == NULL || !is_variable_name(p + 2, name_len) || name_len >= sizeof name) {
            config_error(ld, node, "\"%s\": expected ${NAME} or ${NAME:-default}", text);
            failed = true;
            break;
        }
        memcpy(name, p + 2, name_len);
        name[name_len] = '\0';
        value = getenv(name);
        if (value != NULL && value[0] != '\0') {
            fputs(value, out);
            written += strlen(value);
        } else if (fallback != NULL) {
            fwrite(fallback + 2, 1, (size_t)(close - fallback - 2), out);
            written += (size_t)(close - fallback - 2);
        } else {
            config_error(ld, node, "${%s} is not set and has no default", name);
            failed = true;
        }
        p = close + 1;
    }
    fclose(out);
    if (!failed && written > CONFIG_MAX_SCALAR) {
        config_error(ld, node, "the value is longer than %d bytes once its ${...} are replaced",
                     CONFIG_MAX_SCALAR);
        failed = true;
    } else if (!failed && result == NULL) {
        config_error(ld, node, "out of memory");
        failed = true;
    }
    if (failed) {
        free(result);
        return NULL;
    }
    ld->expanded = result;
    return result;
}

/* The value's text, environment expanded; NULL after reporting that `key` needs a single
 * value or that a variable is missing. */
const char *config_scalar(struct loader *ld, yaml_node_t *node, const char *key)
{
    if (node->type != YAML_SCALAR_NODE) {
        config_error(ld, node, "%s: expected a single value, found %s", key,
                     config_kind_name(node));
        return NULL;
    }
    return expand(ld, node, (const char *)node->data.scalar.value);
}

/* A scalar key of a mapping, and where it stands among the mapping's pairs. */
struct key_ref {
    const yaml_node_t *key;
    size_t pair;
};

static int by_name_then_place(const void *a, const void *b)
{
    const struct key_ref *x = a, *y = b;
    int order =
        strcmp((const char *)x->key->data.scalar.value, (const char *)y->key->data.scalar.value);

    if (order != 0)
        return order;
    return x->pair < y->pair ? -1 : x->pair > y->pair;
}

/* One entry per pair of the mapping `node`: for a pair whose key an earlier pair already has,
 * that earlier key's first appearance; NULL for the others. Sorting the keys makes this
 * n log n, where comparing each key with all before it took 28 s for 40,000 keys. NULL when
 * memory is short; the caller frees the array. */
const yaml_node_t **config_repeated_keys(struct loader *ld, yaml_node_t *node)
{
    size_t n = (size_t)(node->data.mapping.pairs.top - node->data.mapping.pairs.start), n_refs = 0;
    struct key_ref *refs = calloc(n ? n : 1, sizeof *refs);
    const yaml_node_t **first = calloc(n ? n : 1, sizeof *first);

    if (refs == NULL || first == NULL) {
        free(refs);
        free(first);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *key = config_node_at(ld, node->data.mapping.pairs.start[i].key);

        if (key->type == YAML_SCALAR_NODE)
            refs[n_refs++] = (struct key_ref){key, i};
    }
    qsort(refs, n_refs, sizeof *refs, by_name_then_place);
    /* Equal keys sit together, in file order: each names the run's first. */
    for (size_t i = 1; i < n_refs; i++)
        if (strcmp((const char *)refs[i].key->data.scalar.value,
                   (const char *)refs[i - 1].key->data.scalar.value) == 0)
            first[refs[i].pair] =
                first[refs[i - 1].pair] ? first[refs[i - 1].pair] : refs[i - 1].key;
    free(refs);
    return first;
}

void config_each_named(struct loader *ld, yaml_node_t *node, const char *section, const char *whose,
                       config_named_fn each, void *cls)
{
    const yaml_node_t **first = config_repeated_keys(ld, node);

    if (first == NULL) {
        config_error(ld, node, "%s: out of memory", section);
        return;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *key = config_node_at(ld, p->key);
        const char *name =
            key->type == YAML_SCALAR_NODE ? (const char *)key->data.scalar.value : NULL;
        const yaml_node_t *earlier = first[p - node->data.mapping.pairs.start];

        if (name == NULL || !config_is_plain_name(name))
            config_error(ld, key,
                         "%s: %s name may hold only letters, digits, '_', '.' and '-', 64 at "
                         "most",
                         section, whose);
        else if (earlier != NULL)
            config_error(ld, key, "%s: \"%s\" appears twice (first at line %zu)", section, name,
                         earlier->start_mark.line + 1);
        else
            each(ld, name, key, config_node_at(ld, p->value), cls);
    }
    free(first);
}

#define SUGGEST_DISTANCE 2 /* the most edits between a mistyped key and the one suggested */

/* The Levenshtein distance between `a` and `b`, or SUGGEST_DISTANCE + 1 when it is surely
 * more: lengths further apart, or a key longer than any known one. Bounded so that a file of
 * thousands of long unknown keys costs no more than reading them. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t len_a = strlen(a), len_b = strlen(b), row[33], diagonal;

    if (len_a + SUGGEST_DISTANCE < len_b || len_b + SUGGEST_DISTANCE < len_a ||
        len_b >= sizeof row / sizeof row[0])
        return SUGGEST_DISTANCE + 1;
    for (size_t j = 0; j <= len_b; j++)
        row[j] = j;
    for (size_t i = 1; i <= len_a; i++) {
        diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= len_b; j++) {
            size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);

            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[len_b];
}

/* The search for the known key that `name` most likely meant: the one key that differs from
 * it only in case, or else the one nearest within SUGGEST_DISTANCE edits; none when two are
 * equally near. */
struct guess {
    const char *name, *best;
    size_t best_distance;
    bool tie;
};

static void consider(struct guess *g, const char *key)
{
    size_t distance = strcasecmp(key, g->name) == 0 ? 0 : edit_distance(g->name, key);

    if (distance < g->best_distance) {
        g->best = key;
        g->best_distance = distance;
        g->tie = false;
    } else if (distance == g->best_distance && distance <= SUGGEST_DISTANCE) {
        g->tie = true;
    }
}

/* Reports `name`, a key of none of `fields` nor of the blocks registered for `place` (or of
 * no block: `blocks_too` false), at `mark`, with the key it most likely meant. */
static void report_unknown(struct loader *ld, yaml_mark_t mark, const char *section,
                           const char *name, const struct field *fields, bool blocks_too,
                           enum config_place place)
{
    struct guess g = {name, NULL, SUGGEST_DISTANCE + 1, false};
    const char *meant;

    for (const struct field *f = fields; f->key != NULL; f++)
        consider(&g, f->key);
    for (size_t i = 0; blocks_too && i < config_blocks_count(); i++)
        if (config_blocks_at(i)->place == place)
            for (const struct config_option *o = config_blocks_at(i)->options; o->key != NULL; o++)
                consider(&g, o->key);
    meant = g.tie ? NULL : g.best;
    config_error_at(ld, mark, "%s: unknown key \"%s\"%s%s%s", section, name,
                    meant != NULL ? "; did you mean " : "", meant != NULL ? meant : "",
                    meant != NULL ? "?" : "");
}

void config_report_unknown_key(struct loader *ld, yaml_mark_t mark, const char *section,
                               const char *name, const struct field *fields)
{
    report_unknown(ld, mark, section, name, fields, false, CONFIG_IN_SERVER);
}

/* Reads the pair `p` of the mapping being walked: into `object` when `fields` has its key,
 * else into the block of `blocks` (NULL: none) whose option it is. */
static void walk_pair(struct loader *ld, yaml_node_pair_t *p, const struct field *fields,
                      void *object, const char *section, enum config_place place, void **blocks)
{
    yaml_node_t *key = config_node_at(ld, p->key);
    const char *name = (const char *)key->data.scalar.value;
    const struct config_option *option;
    size_t index;

    for (const struct field *f = fields; f->key != NULL; f++) {
        if (strcmp(f->key, name) == 0) {
            config_parse_value(ld, f, config_node_at(ld, p->value), object);
            return;
        }
    }
    option = blocks != NULL ? config_blocks_find(place, name, &index) : NULL;
    if (option == NULL) {
        report_unknown(ld, key->start_mark, section, name, fields, blocks != NULL, place);
    } else if (blocks[index] != NULL) { /* else memory was short, and said so */
        struct field f = {option->key, option->type, option->offset,
                          option->min, option->max,  NULL};

        config_parse_value(ld, &f, config_node_at(ld, p->value), blocks[index]);
    }
}

void config_walk_mapping_blocks(struct loader *ld, yaml_node_t *node, const struct field *fields,
                                void *object, const char *section, enum config_place place,
                                void **blocks)
{
    const yaml_node_t **first = NULL;

    if (node->type != YAML_MAPPING_NODE) {
        config_error(ld, node, "%s: expected a mapping of keys, found %s", section,
                     config_kind_name(node));
        return;
    }
    first = config_repeated_keys(ld, node);
    if (first == NULL) {
        config_error(ld, node, "%s: out of memory", section);
        return;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *key = config_node_at(ld, p->key);
        const yaml_node_t *earlier = first[p - node->data.mapping.pairs.start];

        if (key->type != YAML_SCALAR_NODE) {
            config_error(ld, key, "%s: keys must be plain names, not %s", section,
                         config_kind_name(key));
            continue;
        }
        if (earlier != NULL) {
            config_error(ld, key, "%s: \"%s\" appears twice (first at line %zu)", section,
                         (const char *)key->data.scalar.value, earlier->start_mark.line + 1);
            continue;
        }
        walk_pair(ld, p, fields, object, section, place, blocks);
    }
    free(first);
}

/* Applies `fields` to every pair of the mapping `node`; unknown and repeated keys are errors. */
void config_walk_mapping(struct loader *ld, yaml_node_t *node, const struct field *fields,
                         void *object, const char *section)
{
    config_walk_mapping_blocks(ld, node, fields, object, section, CONFIG_IN_SERVER, NULL);
}

/* The value node of `key` in a mapping, or NULL. */
yaml_node_t *config_find_value(struct loader *ld, yaml_node_t *mapping, const char *key)
{
    if (mapping->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = mapping->data.mapping.pairs.start;
         p < mapping->data.mapping.pairs.top; p++) {
        yaml_node_t *k = config_node_at(ld, p->key);

        if (k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
            return config_node_at(ld, p->value);
    }
    return NULL;
}

/* The value of `key` in `mapping`, or the mapping itself when the key is absent: where to
 * point an error about that key. */
yaml_node_t *config_value_or_self(struct loader *ld, yaml_node_t *mapping, const char *key)
{
    yaml_node_t *value = config_find_value(ld, mapping, key);

    return value != NULL ? value : mapping;
}

void config_syntax_error(struct loader *ld, const yaml_parser_t *parser)
{
    config_error_at(ld, parser->problem_mark, "YAML syntax: %s%s%s",
                    parser->problem ? parser->problem : "unreadable", parser->context ? " " : "",
                    parser->context ? parser->context : "");
}

/* A mapping or list being read by check_shape(). */
struct open_collection {
    bool mapping;
    size_t events;   /* of its items; a mapping's alternate key, value */
    bool over_bound; /* reported */
};

/* Counts one item (key, value or list item) of `c`, reporting the first beyond
 * CONFIG_MAX_ITEMS. */
static void count_item(struct loader *ld, struct open_collection *c, yaml_mark_t at)
{
    size_t items = c->mapping ? (c->events + 2) / 2 : c->events + 1;

    c->events++;
    if (items <= CONFIG_MAX_ITEMS || c->over_bound)
        return;
    c->over_bound = true;
    config_error_at(ld, at,
                    c->mapping ? "a mapping may hold at most %d keys; this is key %d"
                               : "a list may hold at most %d items; this is item %d",
                    CONFIG_MAX_ITEMS, CONFIG_MAX_ITEMS + 1);
}

/* Whether `e` is a plain << as a key of the mapping `in` (its item just counted): YAML 1.1's
 * merge key, which libyaml leaves to the application as an ordinary key. */
static bool is_merge_key(const yaml_event_t *e, const struct open_collection *in)
{
    return in != NULL && in->mapping && in->events % 2 == 1 &&
           e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           strcmp((const char *)e->data.scalar.value, "<<") == 0;
}

/* Checks the scalar `e`, an item of `in` (NULL at the top): its bounds, or that it is no merge
 * key. Whether it is one, so that the alias after it is not reported again. */
static bool check_scalar(struct loader *ld, const yaml_event_t *e, const struct open_collection *in)
{
    bool merge_key = is_merge_key(e, in);

    if (merge_key)
        config_error_at(ld, e->start_mark,
                        "<<: merge keys are not supported; give routes the same limits with "
                        "plans: (each route then says plan: NAME), and write other settings "
                        "out in each route");
    else if (e->data.scalar.length > CONFIG_MAX_SCALAR)
        config_error_at(ld, e->start_mark, "a key or value may hold at most %d bytes",
                        CONFIG_MAX_SCALAR);
    else if (memchr(e->data.scalar.value, '\0', e->data.scalar.length) != NULL)
        config_error_at(ld, e->start_mark, "a key or value may not hold a NUL character");
    return merge_key;
}

/* Checks the bounds of the first document's shape (see config.h) on libyaml's event stream,
 * before any node is built. Every problem is reported, but the first collection nested too
 * deep ends the reading: libyaml's scanner goes over every open flow level for each token, so
 * 50,000 '[' alone take it 10 s, and it must not be handed more of them. 0, or -1 after
 * reporting. */
static int check_shape(struct loader *ld, const char *text, size_t len)
{
    struct open_collection open[CONFIG_MAX_DEPTH];
    unsigned errors_before = ld->n_errors;
    size_t depth = 0;
    yaml_parser_t parser;
    yaml_event_t event;
    bool done = false, merge_key = false, merge_value = false;

    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    while (!done) {
        if (!yaml_parser_parse(&parser, &event)) {
            config_syntax_error(ld, &parser);
            break;
        }
        switch (event.type) {
        case YAML_SCALAR_EVENT:
        case YAML_ALIAS_EVENT:
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (depth > 0)
                count_item(ld, &open[depth - 1], event.start_mark);
            break;
        default:
            break;
        }
        merge_value = merge_key;
        merge_key = false;
        switch (event.type) {
        case YAML_SCALAR_EVENT:
            merge_key = check_scalar(ld, &event, depth > 0 ? &open[depth - 1] : NULL);
            break;
        case YAML_ALIAS_EVENT:
            if (!merge_value) /* reported at its << */
                config_error_at(ld, event.start_mark,
                                "*%s: aliases are not supported; write the value out in full",
                                (const char *)event.data.alias.anchor);
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (depth == CONFIG_MAX_DEPTH) {
                config_error_at(ld, event.start_mark,
                                "mappings and lists may be nested at most %d deep; the file is not "
                                "read past here",
                                CONFIG_MAX_DEPTH);
                done = true;
                break;
            }
            open[depth++] =
                (struct open_collection){.mapping = event.type == YAML_MAPPING_START_EVENT};
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_DOCUMENT_END_EVENT: /* yaml_parser_load() reads the first document only */
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&event);
    }
    yaml_parser_delete(&parser);
    return ld->n_errors == errors_before ? 0 : -1;
}

/* Parses `text` into ld->doc; reports a problem and returns -1 on failure. */
static int read_document(struct loader *ld, const char *text, size_t len)
{
    yaml_parser_t parser;
    int rc = -1;

    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &ld->doc)) {
        config_syntax_error(ld, &parser);
    } else if (yaml_document_get_root_node(&ld->doc) == NULL) {
        config_error_at(ld, (yaml_mark_t){0, 0, 0},
                        "the file is empty; at least one route is required");
        yaml_document_delete(&ld->doc);
    } else {
        rc = 0;
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* Reports that `text` goes on past CONFIG_MAX_FILE, at the first byte beyond it. */
static void too_large(struct loader *ld, const char *text)
{
    yaml_mark_t at = {0, 0, 0};
    char limit[32];

    for (const char *p = text; p < text + CONFIG_MAX_FILE; p++) {
        if (*p == '\n') {
            at.line++;
            at.column = 0;
        } else {
            at.column++;
        }
    }
    config_error_at(ld, at, "the file goes on past %s, the most sluice reads",
                    config_format_size(CONFIG_MAX_FILE, limit, sizeof limit));
}

/* Starts loading the file `path`: the loader's error and warning texts opened. 0; or -1, with
 * nothing left open, when memory is short. */
int config_loader_open(struct loader *ld, const char *path)
{
    *ld = (struct loader){.path = path};
    ld->errors = open_memstream(&ld->errors_text, &ld->errors_len);
    ld->warnings = open_memstream(&ld->warnings_text, &ld->warnings_len);
    if (ld->errors != NULL && ld->warnings != NULL)
        return 0;
    if (ld->errors != NULL)
        fclose(ld->errors);
    if (ld->warnings != NULL)
        fclose(ld->warnings);
    free(ld->errors_text);
    free(ld->warnings_text);
    return -1;
}

/* Reads `len` bytes of YAML into ld->doc, once their size and shape are within the bounds
 * (config.h); the caller deletes the document. 0, or -1 after reporting. */
int config_read_yaml(struct loader *ld, const char *text, size_t len)
{
    if (len > CONFIG_MAX_FILE) {
        too_large(ld, text);
        return -1;
    }
    if (check_shape(ld, text, len) != 0)
        return -1;
    return read_document(ld, text, len);
}

/* Ends loading: counts the problems and warnings past CONFIG_MAX_ERRORS on one more line each,
 * and frees what the sections kept until the whole file was read. Returns the problems, one
 * line each (the caller frees them), or NULL when there are none; `*warnings` likewise. */
char *config_loader_close(struct loader *ld, char **warnings)
{
    if (ld->n_errors > CONFIG_MAX_ERRORS)
        fprintf(ld->errors, "%s:%zu:%zu: %u more problems from here on are not listed\n", ld->path,
                ld->first_unlisted.line + 1, ld->first_unlisted.column + 1,
                ld->n_errors - CONFIG_MAX_ERRORS);
    free(ld->expanded);
    free(ld->places);
    for (size_t i = 0; i < ld->n_underscore_keys; i++)
        free(ld->underscore_keys[i].header);
    free(ld->underscore_keys);
    free(ld->log_limits);

    if (ld->n_warnings > CONFIG_MAX_ERRORS)
        fprintf(ld->warnings, "%s: %u more warnings are not listed\n", ld->path,
                ld->n_warnings - CONFIG_MAX_ERRORS);
    fclose(ld->warnings);
    *warnings = ld->n_warnings > 0 ? ld->warnings_text : NULL;
    if (*warnings == NULL)
        free(ld->warnings_text);
    fclose(ld->errors);
    if (ld->n_errors > 0)
        return ld->errors_text;
    free(ld->errors_text);
    return NULL;
}
