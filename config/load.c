/* YAML to `struct config`, the top level: config_parse() and config_load() run the YAML engine
 * (loader.h) over the top level's table of keys, each section parsed by its own file
 * (sections.h), then the checks that need the whole file; config_free(). See config.h. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

/* The whole of the regular file at `path`, at most `max` bytes, into `*text` (allocated, the
 * caller frees it; NUL-terminated) and `*len`. 0; or -1 with `why` saying what went wrong. A
 * file that is not a regular one (a FIFO, a device, /dev/stdin) is refused rather than waited
 * on. */
int config_read_file(const char *path, size_t max, char **text, size_t *len, char why[128])
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    ssize_t got = 0;
    char limit[32];

    *text = NULL;
    *len = 0;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, 128, "cannot read %.80s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, 128, "%.80s is not a regular file", path);
        goto fail;
    }
    *text = malloc(max + 2);
    if (*text == NULL) {
        snprintf(why, 128, "out of memory");
        goto fail;
    }
    /* One byte past the bound tells a file that is too large; the rest is never read. */
    while (*len <= max && (got = read(fd, *text + *len, max + 1 - *len)) > 0)
        *len += (size_t)got;
    if (got < 0) {
        snprintf(why, 128, "cannot read %.80s: %s", path, strerror(errno));
        goto fail;
    }
    if (*len > max) {
        snprintf(why, 128, "%.80s is larger than %s, the most read", path,
                 config_format_size(max, limit, sizeof limit));
        goto fail;
    }
    (*text)[*len] = '\0';
    close(fd);
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    free(*text);
    *text = NULL;
    return -1;
}

static const struct field top_fields[] = {
    {"server", CONFIG_CUSTOM, 0, 0, 0, config_parse_server},
    {"log", CONFIG_CUSTOM, 0, 0, 0, config_parse_log},
    {"limiter", CONFIG_CUSTOM, 0, 0, 0, config_parse_limiter},
    {"routes", CONFIG_CUSTOM, 0, 0, 0, config_parse_routes},
    {"upstreams", CONFIG_CUSTOM, 0, 0, 0, config_parse_upstreams},
    {"plans", CONFIG_CUSTOM, 0, 0, 0, config_parse_plans},
    {"consumers", CONFIG_CUSTOM, 0, 0, 0, config_parse_consumers},
    {"consumers_file", CONFIG_CUSTOM, 0, 0, 0, config_parse_consumers_file},
    {"tracing", CONFIG_CUSTOM, 0, 0, 0, config_parse_tracing},
    {NULL, 0, 0, 0, 0, NULL},
};

static const struct key_table top_keys[] = {
    {"", top_fields},
    {NULL, NULL},
};

/* Every section's tables of keys: a new section's list goes here too, so that the test that
 * holds config/sluice.yaml and README.md to the loader (tests/config/test_load.c) sees its
 * keys. */
static const struct key_table *const key_tables[] = {
    top_keys,          config_server_keys,   config_log_keys,      config_limit_keys,
    config_route_keys, config_upstream_keys, config_consumer_keys,
};

void config_known_keys(void (*each)(const char *section, const char *key, void *cls), void *cls)
{
    for (size_t i = 0; i < sizeof key_tables / sizeof key_tables[0]; i++)
        for (const struct key_table *t = key_tables[i]; t->section != NULL; t++)
            for (const struct field *f = t->fields; f->key != NULL; f++)
                each(t->section, f->key, cls);
    for (size_t i = 0; i < config_blocks_count(); i++) {
        const struct config_block *b = config_blocks_at(i);

        for (const struct config_option *o = b->options; o->key != NULL; o++)
            each(config_place_section(b->place), o->key, cls);
    }
}

static void set_defaults(struct config *config)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    config->server.max_connections = 1024;
    config->server.client_timeout_ns = 30 * (int64_t)1000000000;
    config->server.max_body = 10 << 20;
    config->server.drain_timeout_ns = 10 * (int64_t)1000000000;
    config->server.park_idle_after_ns = 5 * (int64_t)SECOND;
    config->server.watch_config = true;
    config->server.max_header_size = 16 * KIB;
    config->server.max_response_header_size = 16 * KIB;
    config->server.upstream_idle_timeout_ns = 60 * (int64_t)SECOND;
    config->server.upstream_max_idle = 64;
    config->server.ready_needs_upstreams = true;
    config->server.workers = cores >= 1 && cores <= 256 ? (uint32_t)cores : 1;
    config->log.level = CONFIG_LOG_INFO;
    config->max_clients = LIMITER_DEFAULT_MAX_CLIENTS;
    config->max_memory = 256 * 1024 * KIB;
    config->redis.db = 0;
    config->redis.timeout_ns = 50 * (int64_t)1000000;
    config->redis.lease_ns = 10 * (int64_t)SECOND;
    config->redis.refusal_cache_ns = (int64_t)SECOND;
    config->replicas = 1;
    config->tracing.sample = 0;
}

/* Walks the document's sections into `config`, then checks what spans sections, once the
 * whole file is read; deletes the document. */
static void read_sections(struct loader *ld, struct config *config)
{
    yaml_node_t *root = yaml_document_get_root_node(&ld->doc);

    config_walk_mapping(ld, root, top_fields, config, "top level");
    if (root->type == YAML_MAPPING_NODE && config_find_value(ld, root, "routes") == NULL)
        config_error(ld, root, "routes: at least one route is required");
    config_resolve_upstreams(ld, root, config);
    if (ld->n_errors == 0 && config->consumers_file != NULL)
        config_read_consumers_file(ld, config);
    if (ld->n_errors == 0) {
        config_check_consumers(ld, config);
        config_resolve_plans(ld, root, config);
    }
    config_check_underscore_keys(ld, config);
    config_check_log_memory(ld, config);
    yaml_document_delete(&ld->doc);
}

/* The defaults that set_defaults() cannot give before the file is read: the allocated ones,
 * and the server's store and headers for routes that name none of their own. */
static void fill_in_unset(struct loader *ld, struct config *config)
{
    if (config->server.listen.host == NULL && ld->n_errors == 0)
        config_parse_endpoint("127.0.0.1:8080", &config->server.listen);
    if (config->server.access_log == NULL)
        config->server.access_log = strdup("stdout");
    if (config->redis.prefix == NULL)
        config->redis.prefix = strdup("sluice:");
    if (config->redis.address.host == NULL)
        config_parse_endpoint("127.0.0.1:6379", &config->redis.address);
    if (ld->n_errors == 0 && (config->path == NULL || config->server.listen.host == NULL ||
                              config->server.access_log == NULL || config->redis.prefix == NULL ||
                              config->redis.address.host == NULL))
        config_error_at(ld, (yaml_mark_t){0, 0, 0}, "out of memory");
    for (size_t i = 0; i < config->n_routes; i++) {
        if (!config->routes[i].store_set)
            config->routes[i].store = config->store;
        if (!config->routes[i].headers_set)
            config->routes[i].headers = config->server.headers;
    }
}

struct config *config_parse(const char *name, const char *text, size_t len, char **errors)
{
    struct loader ld;
    struct config *config = calloc(1, sizeof *config);

    *errors = NULL;
    if (config == NULL || config_loader_open(&ld, name) != 0) {
        free(config);
        *errors = strdup("out of memory\n");
        return NULL;
    }
    set_defaults(config);
    config->path = strdup(name);
    if (config_blocks_open(config->server_blocks, CONFIG_IN_SERVER) != 0)
        config_error_at(&ld, (yaml_mark_t){0, 0, 0}, "out of memory");
    if (sodium_init() < 0) /* for the consumers' key digests */
        config_error_at(&ld, (yaml_mark_t){0, 0, 0}, "libsodium could not start");
    if (config_read_yaml(&ld, text, len) == 0)
        read_sections(&ld, config);
    fill_in_unset(&ld, config);
    *errors = config_loader_close(&ld, &config->warnings);
    if (*errors != NULL) {
        config_free(config);
        return NULL;
    }
    return config;
}

struct config *config_load(const char *path, char **errors)
{
    struct config *config = NULL;
    char *text = malloc(CONFIG_MAX_FILE + 1), message[512];
    FILE *file = fopen(path, "rb");
    struct stat st;
    size_t len;

    *errors = NULL;
    if (text == NULL || file == NULL)
        goto unreadable;
    /* fopen() opens a directory, and reading it then says only "Is a directory". */
    if (fstat(fileno(file), &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(message, sizeof message,
                 "%s: is a directory; name the config file in it (such as %s/sluice.yaml)\n", path,
                 path);
        *errors = strdup(message);
        goto out;
    }
    /* One byte past the bound tells config_parse() the file is too large; the rest, which may
     * never end (/dev/zero), is never read. */
    len = fread(text, 1, CONFIG_MAX_FILE + 1, file);
    if (ferror(file))
        goto unreadable;
    config = config_parse(path, text, len, errors);
    goto out;
unreadable:
    snprintf(message, sizeof message, "%s: cannot read: %s\n", path, strerror(errno));
    *errors = strdup(message);
out:
    if (file != NULL)
        fclose(file);
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
        config_free_upstream(&r->upstream);
        free(r->forwarding.host_name);
        for (size_t j = 0; j < r->forwarding.n_set_headers; j++) {
            free(r->forwarding.set_headers[j].name);
            free(r->forwarding.set_headers[j].value);
        }
        free(r->forwarding.set_headers);
        for (size_t j = 0; j < r->forwarding.n_remove_headers; j++)
            free(r->forwarding.remove_headers[j]);
        free(r->forwarding.remove_headers);
        free(r->key_name);
        config_free_limits(r->limits, r->n_limits);
        config_blocks_free(r->blocks);
        free(r->on_limit.body);
        free(r->on_limit.content_type);
        free(r->proxy);
        free(r->plan);
        /* Resolved, one per config plan; or, if loading stopped before, the route's own. */
        config_free_plans(r->plans, r->n_plans);
    }
    free(config->routes);
    for (size_t i = 0; i < config->n_upstreams; i++)
        config_free_upstream(&config->upstreams[i]);
    free(config->upstreams);
    config_free_plans(config->plans, config->n_plans);
    for (size_t i = 0; i < config->n_consumers; i++) {
        free(config->consumers[i].name);
        free(config->consumers[i].plan);
    }
    free(config->consumers);
    free(config->consumers_file);
    free(config->server.consumer_header);
    for (size_t i = 0; i < config->server.tls.n_certs; i++) {
        free(config->server.tls.certs[i].cert);
        free(config->server.tls.certs[i].key);
    }
    free(config->server.tls.certs);
    free(config->server.tls.ciphers);
    free(config->server.tls.priorities);
    free(config->server.listen.host);
    free(config->server.admin_listen.host);
    if (config->server.admin.token != NULL)
        explicit_bzero(config->server.admin.token, strlen(config->server.admin.token));
    free(config->server.admin.token);
    free(config->server.admin.token_file);
    free(config->server.trusted_proxies.items);
    free(config->server.proxy_protocol_from.items);
    config_blocks_free(config->server_blocks);
    free(config->server.access_log);
    free(config->redis.address.host);
    for (size_t i = 0; i < config->redis.n_sentinels; i++)
        free(config->redis.sentinels[i].host);
    free(config->redis.sentinels);
    free(config->redis.master);
    free(config->redis.sentinel_password);
    free(config->redis.password);
    free(config->redis.prefix);
    free(config->path);
    free(config->warnings);
    free(config);
}

const char *config_yaml_version(void)
{
    return yaml_get_version_string();
}
