/* Every default that sluice.yaml(5) states is the loader's: each "(default X)" (or
 * "X (default)" for a choice) in the page's key sections is read, with the key named in bold
 * nearest before it; a config that leaves the key out must load as one that sets it to X.
 * A default the table below does not know fails the test, so a new one cannot go unchecked.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/blocks.h"
#include "config/config.h"
#include "gateway/modules/limit/limit_options.h"
#include "tests/unit.h"

#define MAN "docs/man/sluice.yaml.5"

/* Where a key's value lives in a loaded config. */
enum where {
    IN_CONFIG,      /* `size` bytes at `offset` in struct config */
    IN_ROUTE,       /* ... in the first route */
    IN_LIMIT_BLOCK, /* ... in the first route's limit module block */
    IN_LIMIT,       /* ... in the first route's first limit */
    STRING,         /* a char * at `offset` in struct config */
    CORES,          /* server.workers: one per core */
};

struct known {
    const char *section, *key;
    enum where where;
    size_t offset, size;
    const char *top;   /* the key set to %s, above routes:; or NULL */
    const char *route; /* the key set to %s, in the route; or NULL */
    const char *plain; /* the route's upstream: as the default is read, when not the URL */
};

#define CFG(member) IN_CONFIG, offsetof(struct config, member), sizeof(((struct config *)0)->member)
#define ROUTE(member)                                                                              \
    IN_ROUTE, offsetof(struct config_route, member), sizeof(((struct config_route *)0)->member)
#define STR(member)    STRING, offsetof(struct config, member), sizeof(char *)
#define SERVER(key)    "server: {" key ": %s}\n", NULL, NULL
#define ROUTE_KEY(key) NULL, "    " key ": %s\n", NULL
#define DELAYED(delay) "    limit: {algorithm: gcra, requests: 1, per: 1s, delay: " delay "}\n"

static const struct known known[] = {
    {"SERVER", "mode", CFG(server.mode), SERVER("mode")},
    {"SERVER", "workers", CORES, 0, 0, SERVER("workers")},
    {"SERVER", "max_connections", CFG(server.max_connections), SERVER("max_connections")},
    {"SERVER", "max_connections_per_ip", CFG(server.max_connections_per_ip),
     SERVER("max_connections_per_ip")},
    {"SERVER", "client_timeout", CFG(server.client_timeout_ns), SERVER("client_timeout")},
    {"SERVER", "park_idle_after", CFG(server.park_idle_after_ns), SERVER("park_idle_after")},
    {"SERVER", "max_body", CFG(server.max_body), SERVER("max_body")},
    {"SERVER", "max_header_size", CFG(server.max_header_size), SERVER("max_header_size")},
    {"SERVER", "max_response_header_size", CFG(server.max_response_header_size),
     SERVER("max_response_header_size")},
    {"SERVER", "underscores_in_headers", CFG(server.underscores_in_headers),
     SERVER("underscores_in_headers")},
    {"SERVER", "upstream_idle_timeout", CFG(server.upstream_idle_timeout_ns),
     SERVER("upstream_idle_timeout")},
    {"SERVER", "upstream_max_idle", CFG(server.upstream_max_idle), SERVER("upstream_max_idle")},
    {"SERVER", "drain_timeout", CFG(server.drain_timeout_ns), SERVER("drain_timeout")},
    {"SERVER", "watch_config", CFG(server.watch_config), SERVER("watch_config")},
    {"SERVER", "access_log", STR(server.access_log), SERVER("access_log")},
    {"SERVER", "trusted_proxies", CFG(server.trusted_proxies.n), SERVER("trusted_proxies")},
    {"SERVER", "headers", CFG(server.headers), SERVER("headers")},
    {"SERVER", "consumer_header", STR(server.consumer_header), SERVER("consumer_header")},
    {"SERVER", "ready_needs_upstreams", CFG(server.ready_needs_upstreams),
     SERVER("ready_needs_upstreams")},
    {"SERVER", "proxy_protocol", CFG(server.proxy_protocol), SERVER("proxy_protocol")},
    {"LOG", "format", CFG(log.format), "log: {format: %s}\n", NULL, NULL},
    {"LOG", "level", CFG(log.level), "log: {level: %s}\n", NULL, NULL},
    {"LIMITER", "max_clients", CFG(max_clients), "limiter: {max_clients: %s}\n", NULL, NULL},
    {"LIMITER", "max_memory", CFG(max_memory), "limiter: {max_memory: %s}\n", NULL, NULL},
    {"LIMITER", "store", CFG(store), "limiter: {store: %s}\n", NULL, NULL},
    {"LIMITER", "timeout", CFG(redis.timeout_ns), "limiter: {redis: {timeout: %s}}\n", NULL, NULL},
    {"LIMITER", "lease", CFG(redis.lease_ns), "limiter: {redis: {lease: %s}}\n", NULL, NULL},
    {"LIMITER", "refusal_cache", CFG(redis.refusal_cache_ns),
     "limiter: {redis: {refusal_cache: %s}}\n", NULL, NULL},
    {"LIMITER", "replicas", CFG(replicas), "limiter: {replicas: %s}\n", NULL, NULL},
    {"LIMITER", "on_store_error", CFG(on_store_error), "limiter: {on_store_error: %s}\n", NULL,
     NULL},
    {"ROUTES", "methods", ROUTE(methods), NULL, NULL, NULL},
    {"ROUTES", "host", ROUTE(host), NULL, NULL, NULL},
    {"ROUTES", "balance", ROUTE(upstream.balance), NULL,
     "    upstream: {servers: [\"http://127.0.0.1:9\"], balance: %s}\n",
     "    upstream: {servers: [\"http://127.0.0.1:9\"]}\n"},
    {"ROUTES", "timeout", ROUTE(timeout_ns), ROUTE_KEY("timeout")},
    {"ROUTES", "connect_timeout", ROUTE(connect_timeout_ns), ROUTE_KEY("connect_timeout")},
    {"ROUTES", "upgrades", ROUTE(forwarding.upgrades), ROUTE_KEY("upgrades")},
    {"ROUTES", "tunnel_idle_timeout", ROUTE(forwarding.tunnel_idle_timeout_ns),
     ROUTE_KEY("tunnel_idle_timeout")},
    {"ROUTES", "proxy", ROUTE(proxy), ROUTE_KEY("proxy")},
    {"ROUTES", "tls_verify", ROUTE(tls_verify), ROUTE_KEY("tls_verify")},
    {"ROUTES", "ipv6_prefix", ROUTE(ipv6_prefix_len), ROUTE_KEY("ipv6_prefix")},
    {"ROUTES", "dry_run", IN_LIMIT_BLOCK, offsetof(struct limit_options, dry_run), sizeof(bool),
     ROUTE_KEY("dry_run")},
    {"ROUTES", "queue", IN_LIMIT, offsetof(struct config_limit, delay.queue), sizeof(uint32_t),
     NULL, "    upstream: \"http://127.0.0.1:9\"\n" DELAYED("{max: 1s, queue: %s}"),
     "    upstream: \"http://127.0.0.1:9\"\n" DELAYED("{max: 1s}")},
    {"PLANS", "sample", CFG(tracing.sample), "tracing: {sample: %s}\n", NULL, NULL},
};

#define N_KNOWN (sizeof known / sizeof known[0])

/* One default the page states. */
struct stated {
    char section[32], key[64], value[64];
    int line;
};

static const struct known *known_of(const char *section, const char *key)
{
    for (size_t i = 0; i < N_KNOWN; i++)
        if (strcmp(known[i].section, section) == 0 && strcmp(known[i].key, key) == 0)
            return &known[i];
    return NULL;
}

/* Whether `word` is a key the loader knows, in any section. */
struct key_search {
    const char *word;
    bool found;
};

static void match_key(const char *section, const char *key, void *cls)
{
    struct key_search *k = cls;

    (void)section;
    k->found = k->found || strcmp(k->word, key) == 0;
}

static bool is_key(const char *word)
{
    struct key_search k = {word, false};

    config_known_keys(match_key, &k);
    return k.found;
}

/* `raw` without the punctuation around a word, into `out`. */
static void bare(const char *raw, char *out, size_t cap)
{
    size_t start = strspn(raw, "({\"'"), len = strlen(raw + start);

    while (len > 0 && strchr(")}.,;:\"'", raw[start + len - 1]) != NULL)
        len--;
    snprintf(out, cap, "%.*s", (int)len, raw + start);
}

/* The page's text line without roff: `*bold` says whether it was set in bold. */
static void plain_line(const char *line, char *out, size_t cap, bool *bold)
{
    size_t o = 0;

    *bold = strncmp(line, ".B ", 3) == 0 || strncmp(line, ".BR ", 4) == 0 ||
            strncmp(line, ".RB ", 4) == 0 || strncmp(line, ".BI ", 4) == 0;
    if (line[0] == '.')
        line += strcspn(line, " ");
    for (; *line != '\0' && *line != '\n' && o + 1 < cap; line++) {
        if (line[0] == '\\' && line[1] == '-') {
            out[o++] = '-';
            line++;
        } else if (*line != '"') {
            out[o++] = *line;
        }
    }
    out[o] = '\0';
}

/* Reads every stated default of the page's key sections into `out` (up to `cap`). */
static size_t read_stated(const char *page, struct stated *out, size_t cap)
{
    char section[32] = "", last_key[64] = "", previous[64] = "", text[512];
    bool in_keys = false, in_example = false, want_value = false;
    size_t n = 0;
    int lineno = 0;
    struct stated *pending = NULL;

    for (const char *line = page, *end; *line != '\0'; line = *end != '\0' ? end + 1 : end) {
        bool bold;

        end = line + strcspn(line, "\n");
        lineno++;
        if (strncmp(line, ".SH ", 4) == 0) {
            sscanf(line + 4, "%31[A-Z]", section);
            in_keys = strcmp(section, "NAME") != 0 && strcmp(section, "SYNOPSIS") != 0 &&
                      strcmp(section, "DESCRIPTION") != 0 && strcmp(section, "EXAMPLE") != 0 &&
                      strcmp(section, "SEE") != 0;
            last_key[0] = '\0';
            continue;
        }
        if (strncmp(line, ".EX", 3) == 0 || strncmp(line, ".EE", 3) == 0) {
            in_example = line[2] == 'X';
            continue;
        }
        if (!in_keys || in_example)
            continue;
        if (strncmp(line, ".TP", 3) == 0) {
            last_key[0] = '\0';
            continue;
        }
        plain_line(line, text, sizeof text, &bold);
        for (char *save = NULL, *raw = strtok_r(text, " \t", &save); raw != NULL;
             raw = strtok_r(NULL, " \t", &save)) {
            char word[64];
            size_t len = strlen(raw);

            bare(raw, word, sizeof word);
            if (want_value && pending != NULL) {
                snprintf(pending->value, sizeof pending->value, "%s", word);
                want_value = false;
                pending = NULL;
            }
            if (strcmp(word, "default") == 0 && n < cap) {
                struct stated *s = &out[n++];

                *s = (struct stated){.line = lineno};
                snprintf(s->section, sizeof s->section, "%s", section);
                snprintf(s->key, sizeof s->key, "%s", last_key);
                /* "X (default)" or "X (default: why)": X is the value; else the next word. */
                while (len > 1 && strchr(",;.", raw[len - 1]) != NULL)
                    len--;
                if (raw[len - 1] == ')' || raw[len - 1] == ':')
                    snprintf(s->value, sizeof s->value, "%s", previous);
                else {
                    pending = s;
                    want_value = true;
                }
            } else if (bold && is_key(word)) {
                snprintf(last_key, sizeof last_key, "%s", word);
            }
            snprintf(previous, sizeof previous, "%s", word);
        }
    }
    return n;
}

static struct config *load(const char *top, const char *route)
{
    char yaml[1024], *errors = NULL;
    struct config *c;

    snprintf(yaml, sizeof yaml, "%sroutes:\n  - name: r\n    match: {path_prefix: /}\n%s",
             top != NULL ? top : "", route);
    c = config_parse("man.yaml", yaml, strlen(yaml), &errors);
    if (c == NULL)
        fprintf(stderr, "\n%s%s", yaml, errors);
    free(errors);
    return c;
}

/* The bytes of `k`'s value in `c`. */
static const void *value_of(const struct config *c, const struct known *k)
{
    switch (k->where) {
    case IN_CONFIG:
    case STRING:
        return (const char *)c + k->offset;
    case IN_ROUTE:
        return (const char *)&c->routes[0] + k->offset;
    case IN_LIMIT_BLOCK:
        return (const char *)config_route_block(&c->routes[0], &gw_limit_route_options) + k->offset;
    case IN_LIMIT:
        return (const char *)&c->routes[0].limits[0] + k->offset;
    default:
        return NULL;
    }
}

/* Whether the config that leaves `k` out has `value` for it. */
static bool holds(const struct known *k, const char *value)
{
    const char *url = "    upstream: \"http://127.0.0.1:9\"\n";
    char set[256], route[512], top[256];
    struct config *omitted, *given = NULL;
    bool same = false;

    snprintf(route, sizeof route, "%s", k->plain != NULL ? k->plain : url);
    omitted = load(NULL, route);
    if (omitted == NULL)
        return false;
    if (k->where == CORES) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);

        same = strcmp(value, "one") == 0 && omitted->server.workers == (uint32_t)cores;
    } else if (strcmp(value, "none") == 0 || strcmp(value, "all") == 0 ||
               strcmp(value, "any") == 0) {
        /* Nothing set: a NULL pointer, or an empty list. */
        const void *v = value_of(omitted, k);

        same = k->size == sizeof(void *) ? *(void *const *)v == NULL : *(const size_t *)v == 0;
    } else if (k->top != NULL || k->route != NULL) {
        if (k->top != NULL)
            snprintf(top, sizeof top, k->top, value);
        if (k->route != NULL) {
            snprintf(set, sizeof set, k->route, value);
            snprintf(route, sizeof route, "%s%s", k->plain != NULL ? "" : url, set);
        }
        given = load(k->top != NULL ? top : NULL, route);
        if (given != NULL && k->where == STRING)
            same = strcmp(*(char *const *)value_of(omitted, k),
                          *(char *const *)value_of(given, k)) == 0;
        else if (given != NULL)
            same = memcmp(value_of(omitted, k), value_of(given, k), k->size) == 0;
    }
    config_free(omitted);
    config_free(given);
    return same;
}

static void test_man_page_defaults(void)
{
    char why[128], *page = NULL;
    size_t len, n;
    struct stated stated[128];
    bool checked[N_KNOWN] = {false};

    CU_ASSERT_EQUAL_FATAL(config_read_file(MAN, 1 << 20, &page, &len, why), 0);
    n = read_stated(page, stated, sizeof stated / sizeof stated[0]);
    CU_ASSERT(n >= 35);
    for (size_t i = 0; i < n; i++) {
        const struct stated *s = &stated[i];
        const struct known *k = known_of(s->section, s->key);

        if (k == NULL) {
            fprintf(stderr, "\n%s:%d: a default of %s \"%s\" the test does not know", MAN, s->line,
                    s->section, s->key);
            CU_FAIL("a default the test does not know");
            continue;
        }
        checked[k - known] = true;
        if (!holds(k, s->value)) {
            fprintf(stderr, "\n%s:%d: says %s defaults to %s; the loader disagrees", MAN, s->line,
                    s->key, s->value);
            CU_FAIL("a default the man page states wrongly");
        }
    }
    /* Every key of the table was found on the page: a rewording cannot hide one. */
    for (size_t i = 0; i < N_KNOWN; i++)
        if (!checked[i]) {
            fprintf(stderr, "\n%s no longer states a default for %s", MAN, known[i].key);
            CU_FAIL("a default the man page no longer states");
        }
    free(page);
}

/* The check itself: a wrong default on the page is found. */
static void test_man_page_defaults_can_fail(void)
{
    CU_ASSERT_TRUE(holds(known_of("SERVER", "client_timeout"), "30s"));
    CU_ASSERT_FALSE(holds(known_of("SERVER", "client_timeout"), "31s"));
    CU_ASSERT_FALSE(holds(known_of("LOG", "level"), "warn"));
    CU_ASSERT_FALSE(holds(known_of("ROUTES", "balance"), "least_request"));
    CU_ASSERT_FALSE(holds(known_of("ROUTES", "dry_run"), "true"));
    CU_ASSERT_FALSE(holds(known_of("SERVER", "access_log"), "off"));
    CU_ASSERT_FALSE(holds(known_of("ROUTES", "proxy"), "http://127.0.0.1:3128"));
    CU_ASSERT_TRUE(holds(known_of("ROUTES", "proxy"), "none"));
}

void register_man_defaults_tests(void)
{
    CU_pSuite s = add_suite("config_man_defaults");

    add_test(s, "every default sluice.yaml(5) states is the loader's", test_man_page_defaults);
    add_test(s, "a wrong default would be found", test_man_page_defaults_can_fail);
}
