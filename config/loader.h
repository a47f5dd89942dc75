/*
 * loader: the YAML engine under config_parse(), shared by the files of config/ that parse one
 * section each (sections.h). Internal to config/: nothing outside it includes this header.
 *
 * A load runs in five steps. config_loader_open() opens the texts that problems and warnings
 * are written to. config_read_yaml() checks the file's size and shape (nesting, keys or items
 * per collection, bytes per scalar, no alias or merge key) on libyaml's event stream, before
 * any node is built, and only then loads libyaml's document into ld->doc. The top level's table
 * is walked, each section in turn: a section is a table of `struct field` (its key, the type
 * of its value, where in the object the value goes and its bounds, or a custom parser), which
 * config_walk_mapping() applies to one mapping, reporting unknown keys (with the known key
 * likely meant) and repeated ones. Then the checks that need the whole file run, and
 * config_loader_close() hands over the texts.
 *
 * Every value is read through config_scalar(), which replaces ${VAR} and ${VAR:-default};
 * every problem is one "FILE:LINE:COL: message" line written by config_error() and its kin,
 * at the mark libyaml gives the node (LINE and COL count from 1), and past CONFIG_MAX_ERRORS
 * only counted. A custom parser takes the value's node and the object its table fills:
 *
 *   static void parse_balance(struct loader *ld, yaml_node_t *node, void *object)
 *   {
 *       static const char *const names[] = {"round_robin", "least_request", "random_two"};
 *       int choice = config_parse_choice(ld, node, "balance", names, 3);
 *
 *       if (choice >= 0)
 *           ((struct config_route *)object)->balance = (enum config_balance)choice;
 *   }
 *
 * so `balance: random` is reported as `sluice.yaml:12:16: balance: "random" is not one of
 * round_robin, least_request or random_two`. Nodes belong to the document, which lives until
 * read_sections() deletes it; the text config_scalar() returns lives until its next call. The
 * typed values a field may hold (durations, sizes, counts, booleans, address lists, endpoints,
 * enumerations) are read by values.c.
 */
#ifndef SLUICE_CONFIG_LOADER_H
#define SLUICE_CONFIG_LOADER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <yaml.h>

#include "config/blocks.h"
#include "config/config.h"

/* A key naming a header with '_' in it, kept until the whole file is read. */
struct underscore_key {
    yaml_node_t *node;
    char *header; /* owned */
};

/* Where a consumer was read: the file (the config, or consumers_file) and the marks to point
 * an error at. */
struct consumer_place {
    const char *file;
    yaml_mark_t item, name, key, plan;
};

/* A sliding_window_log limit: where it is written, and its requests. */
struct log_limit {
    yaml_node_t *node;
    uint64_t requests;
};

/* One load of a file: its document, its problems and warnings, and what the sections keep
 * until the whole file is read. */
struct loader {
    const char *path;
    struct consumer_place *places; /* one per config->consumers */
    size_t cap_places;
    yaml_mark_t consumers_file_at; /* the consumers_file: value */
    yaml_document_t doc;
    FILE *errors; /* one line per problem, into errors_text */
    char *errors_text;
    size_t errors_len;
    unsigned n_errors; /* all of them; only the first CONFIG_MAX_ERRORS are listed */
    yaml_mark_t first_unlisted;
    /* The last value with ${VAR} replaced. Each caller of config_scalar() is done with its value
     * before the next call, so one is kept at a time: a file naming a long variable a hundred
     * thousand times must not hold a hundred thousand copies of it. */
    char *expanded;
    /* Keys naming a header with '_' in it: errors unless server.underscores_in_headers, which
     * may come later in the file, so they are judged once the whole file is read. */
    struct underscore_key *underscore_keys;
    size_t n_underscore_keys, cap_underscore_keys;
    /* The sliding_window_log limits, judged against limiter.max_memory once the whole file
     * is read (limiter: may come after routes:). */
    struct log_limit *log_limits;
    size_t n_log_limits, cap_log_limits;
    /* What is legal but surely unintended, one "FILE:LINE:COL: warning: ..." line each, for
     * config->warnings; only the first CONFIG_MAX_ERRORS are listed. */
    FILE *warnings;
    char *warnings_text;
    size_t warnings_len;
    unsigned n_warnings;
};

#define MILLISECOND ((uint64_t)1000000) /* in ns */
#define SECOND      ((uint64_t)1000000000)
#define HOUR        (3600 * SECOND)
#define DAY         (86400 * SECOND) /* the longest timeout */
#define KIB         ((uint64_t)1024)

struct field {
    const char *key;
    enum config_type type; /* blocks.h */
    size_t offset;         /* of the target within the object */
    uint64_t min, max;     /* as a struct config_option's */
    void (*custom)(struct loader *ld, yaml_node_t *value, void *object);
};

/* A table of keys and the section it walks ("routes.limit"; "" for the top level), for
 * config_known_keys(); each file's list of them ends with a NULL section. */
struct key_table {
    const char *section;
    const struct field *fields;
};

/* --- loading (loader.c) --------------------------------------------------------------- */

/* Starts loading the file `path` (kept, not copied): `*ld` emptied, its texts opened. 0; or
 * -1, with nothing left open, when memory is short. */
int config_loader_open(struct loader *ld, const char *path);

/* Reads `len` bytes of YAML into ld->doc once their size and shape are within the bounds of
 * config.h; the caller deletes the document (yaml_document_delete). 0, or -1 after reporting. */
int config_read_yaml(struct loader *ld, const char *text, size_t len);

/* Ends loading and frees what the sections kept until the whole file was read. Returns the
 * problems, one line each, or NULL when there are none; `*warnings` the warnings, or NULL.
 * The caller frees both. */
char *config_loader_close(struct loader *ld, char **warnings);

/* --- problems (loader.c) -------------------------------------------------------------- */

/* One problem at `mark` (or at `node`), in the file ld->path names. */
void config_verror_at(struct loader *ld, yaml_mark_t mark, const char *fmt, va_list ap);
void config_error_at(struct loader *ld, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void config_error(struct loader *ld, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A warning at `mark`: the config stays valid (config->warnings). */
void config_warn_at(struct loader *ld, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The problem libyaml's parser stopped at. */
void config_syntax_error(struct loader *ld, const yaml_parser_t *parser);

/* --- nodes and keys (loader.c) -------------------------------------------------------- */

/* The node of document id `id`. */
yaml_node_t *config_node_at(struct loader *ld, int id);

/* "a mapping", "a list" or "a scalar", for messages. */
const char *config_kind_name(const yaml_node_t *node);

/* The value's text, ${VAR} replaced, valid until the next call; NULL after reporting that
 * `key` needs a single value or that a variable is missing. */
const char *config_scalar(struct loader *ld, yaml_node_t *node, const char *key);

/* The value of `key` in `mapping`, or NULL; or, for config_value_or_self(), the mapping itself
 * when the key is absent: where to point a problem about that key. */
yaml_node_t *config_find_value(struct loader *ld, yaml_node_t *mapping, const char *key);
yaml_node_t *config_value_or_self(struct loader *ld, yaml_node_t *mapping, const char *key);

/* Applies `fields` to every pair of the mapping `node`, into `object`; unknown and repeated
 * keys are reported, `section` naming where they are. */
void config_walk_mapping(struct loader *ld, yaml_node_t *node, const struct field *fields,
                         void *object, const char *section);

/* As config_walk_mapping(), and a key of none of `fields` may be an option of a block
 * registered for `place` (blocks.h), read into that block of `blocks` (config_blocks_open()'s). */
void config_walk_mapping_blocks(struct loader *ld, yaml_node_t *node, const struct field *fields,
                                void *object, const char *section, enum config_place place,
                                void **blocks);

/* For each pair of the mapping `node`, the first pair's key when an earlier pair has the same
 * key, else NULL; one allocation the caller frees, NULL when memory is short. */
const yaml_node_t **config_repeated_keys(struct loader *ld, yaml_node_t *node);

/* Calls `each` for every pair of the mapping `node` whose key is a plain name (values.c) not
 * seen before in it; reports the others, `section` naming the mapping and `whose` its names
 * ("plans" and "a plan's"). */
typedef void (*config_named_fn)(struct loader *ld, const char *name, yaml_node_t *key,
                                yaml_node_t *value, void *cls);
void config_each_named(struct loader *ld, yaml_node_t *node, const char *section, const char *whose,
                       config_named_fn each, void *cls);

/* Reports `name`, which none of `fields` is, at `mark`, with the known key it most likely
 * meant. */
void config_report_unknown_key(struct loader *ld, yaml_mark_t mark, const char *section,
                               const char *name, const struct field *fields);

/* `items` (`n` of `*cap`, each `size` bytes) with room for one more; NULL, with `items`
 * untouched, when memory is short. */
void *config_grow(void *items, size_t *cap, size_t n, size_t size);

/* --- the modules' blocks (blocks.c) ------------------------------------------------- */

/* "server" or "routes": the section of config_known_keys() that a block's keys are in. */
const char *config_place_section(enum config_place place);

/* The blocks registered, in the order of their slots. */
size_t config_blocks_count(void);
const struct config_block *config_blocks_at(size_t i);

/* Allocates, zeroes and gives its defaults to each block registered for `place` that `blocks`
 * (CONFIG_BLOCKS_MAX of them, by index) lacks. 0; or -1 when memory is short, each block
 * made until then kept in `blocks` for config_blocks_free(). */
int config_blocks_open(void **blocks, enum config_place place);

/* The option `key` of a block registered for `place`, that block's index in `*index`; or
 * NULL. */
const struct config_option *config_blocks_find(enum config_place place, const char *key,
                                               size_t *index);

/* Frees each block of `blocks` and what its options hold; leaves NULLs. */
void config_blocks_free(void **blocks);

/* --- typed values (values.c) ---------------------------------------------------------- */

/* Reads `node` as field `f` says, into `object`. */
void config_parse_value(struct loader *ld, const struct field *f, yaml_node_t *node, void *object);

/* An enumeration: the index of the value in `names`, or -1 after reporting it. */
int config_parse_choice(struct loader *ld, yaml_node_t *node, const char *key,
                        const char *const *names, size_t n_names);

/* headers: ietf | x-ratelimit | both | none (enum config_headers), or -1 after reporting. */
int config_parse_headers_mode(struct loader *ld, yaml_node_t *node);

/* store: memory | redis, into the enum config_store at `target`. */
void config_parse_store(struct loader *ld, yaml_node_t *node, void *target);

/* Whether `s` is an HTTP token (a field name, a protocol name), and a plain name (route,
 * limit, plan and consumer names: they go into headers, metrics and Redis keys). */
bool config_is_token(const char *s);
bool config_is_plain_name(const char *s);

/* A path, taken from the config file's directory when relative, into `*out` (allocated; freed
 * first). */
void config_relative_path(struct loader *ld, yaml_node_t *node, const char *key, char **out);

#endif
