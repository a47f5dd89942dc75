/* server: (how sluice listens and serves), with its access_log: and tls:; see sections.h. */
#include <gnutls/gnutls.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"
#include "config/tls.h"

#define MAX_BODY_BOUND (64 * 1024 * 1024 * KIB) /* 64GiB: server.max_body's most */

static void parse_mode(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"thread_per_connection", "event"};
    int choice = config_parse_choice(ld, node, "mode", names, 2);

    if (choice >= 0)
        ((struct config *)object)->server.mode = (enum config_mode)choice;
}

static void parse_proxy_protocol(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"off", "v1", "v2", "any"};
    int choice = config_parse_choice(ld, node, "proxy_protocol", names, 4);

    if (choice >= 0)
        ((struct config *)object)->server.proxy_protocol = (enum config_proxy_protocol)choice;
}

static void parse_server_headers(struct loader *ld, yaml_node_t *node, void *object)
{
    int mode = config_parse_headers_mode(ld, node);

    if (mode >= 0)
        ((struct config *)object)->server.headers = (enum config_headers)mode;
}

/* consumer_header: a field name, such as X-Consumer. */
static void parse_consumer_header(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const reserved[] = {"Host",
                                           "Content-Length",
                                           "Transfer-Encoding",
                                           "Connection",
                                           "Keep-Alive",
                                           "TE",
                                           "Trailer",
                                           "Upgrade",
                                           "Expect",
                                           "X-Forwarded-For",
                                           "X-Forwarded-Proto",
                                           "X-Forwarded-Host",
                                           "Proxy-"};
    struct config *config = object;
    const char *text = config_scalar(ld, node, "consumer_header");

    if (text == NULL)
        return;
    if (!config_is_token(text) || strlen(text) > 64) {
        config_error(ld, node, "consumer_header: \"%s\" is not a header field name", text);
        return;
    }
    /* Fields the gateway sets or drops itself, or that frame the message. */
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcasecmp(text, reserved[i]) == 0 ||
            (strncasecmp(text, "Proxy-", 6) == 0 && strncasecmp(reserved[i], "Proxy-", 6) == 0)) {
            config_error(ld, node,
                         "consumer_header: %s is a field the gateway sets or drops itself", text);
            return;
        }
    free(config->server.consumer_header);
    config->server.consumer_header = strdup(text);
    if (config->server.consumer_header == NULL)
        config_error(ld, node, "consumer_header: out of memory");
}

static void parse_access_log_client(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"address", "hash", "none"};
    int choice = config_parse_choice(ld, node, "client", names, 3);

    if (choice >= 0)
        ((struct config *)object)->server.access_log_client = (enum config_access_client)choice;
}

static const struct field access_log_fields[] = {
    {"path", CONFIG_STRING, offsetof(struct config, server.access_log), 0, 0, NULL},
    {"client", CONFIG_CUSTOM, 0, 0, 0, parse_access_log_client},
    {NULL, 0, 0, 0, 0, NULL},
};

/* access_log: a path (stdout, off, a file), or {path, client}. */
static void parse_access_log(struct loader *ld, yaml_node_t *node, void *object)
{
    static const struct field as_path = {
        "access_log", CONFIG_STRING, offsetof(struct config, server.access_log), 0, 0, NULL};

    if (node->type == YAML_MAPPING_NODE)
        config_walk_mapping(ld, node, access_log_fields, object, "access_log");
    else
        config_parse_value(ld, &as_path, node, object);
}
static void parse_tls(struct loader *ld, yaml_node_t *node, void *object);

static const struct field server_fields[] = {
    {"listen", CONFIG_ENDPOINT, offsetof(struct config, server.listen), 0, 0, NULL},
    {"admin_listen", CONFIG_ENDPOINT, offsetof(struct config, server.admin_listen), 0, 0, NULL},
    {"admin_token", CONFIG_CUSTOM, 0, 0, 0, config_parse_admin_token},
    {"admin_token_file", CONFIG_CUSTOM, 0, 0, 0, config_parse_admin_token_file},
    {"admin_quota", CONFIG_BOOL, offsetof(struct config, server.admin.quota), 0, 0, NULL},
    {"metrics_need_token", CONFIG_BOOL, offsetof(struct config, server.admin.metrics_need_token), 0,
     0, NULL},
    {"trusted_proxies", CONFIG_CIDRS, offsetof(struct config, server.trusted_proxies), 0, 0, NULL},
    {"max_connections", CONFIG_U32, offsetof(struct config, server.max_connections), 1, 1000000,
     NULL},
    {"max_connections_per_ip", CONFIG_U32, offsetof(struct config, server.max_connections_per_ip),
     0, 1000000, NULL},
    {"client_timeout", CONFIG_DURATION, offsetof(struct config, server.client_timeout_ns), 1, DAY,
     NULL},
    /* Bodies are streamed, never held whole, so the bound is not memory: it catches a slipped
     * unit (10GB for 10MB, a byte count with zeros too many) while leaving room for the largest
     * real uploads (disk images, backups). */
    {"max_body", CONFIG_SIZE, offsetof(struct config, server.max_body), 0, MAX_BODY_BOUND, NULL},
    /* 4KiB: below that, ordinary browser heads with a few cookies get 431. 1MiB: each
     * connection's buffer is sized from it, so max_connections of them must fit in memory. */
    {"max_header_size", CONFIG_SIZE, offsetof(struct config, server.max_header_size), 4 * KIB,
     1024 * KIB, NULL},
    /* An upstream's response head; libmicrohttpd builds it in the same per-connection pool. */
    {"max_response_header_size", CONFIG_SIZE,
     offsetof(struct config, server.max_response_header_size), 4 * KIB, 1024 * KIB, NULL},
    {"drain_timeout", CONFIG_DURATION, offsetof(struct config, server.drain_timeout_ns), 0, DAY,
     NULL},
    /* 0: never. At least 1s otherwise (libmicrohttpd's timeouts, by which a connection is
     * parked, count whole seconds): checked in config_parse_server(). */
    {"park_idle_after", CONFIG_DURATION, offsetof(struct config, server.park_idle_after_ns), 0, DAY,
     NULL},
    {"watch_config", CONFIG_BOOL, offsetof(struct config, server.watch_config), 0, 0, NULL},
    {"access_log", CONFIG_CUSTOM, 0, 0, 0, parse_access_log},
    {"underscores_in_headers", CONFIG_BOOL, offsetof(struct config, server.underscores_in_headers),
     0, 0, NULL},
    /* 1s: shorter would close connections between a client's back-to-back requests. 1h: an
     * idle connection longer than that is almost surely dropped by some NAT or firewall. */
    {"upstream_idle_timeout", CONFIG_DURATION,
     offsetof(struct config, server.upstream_idle_timeout_ns), SECOND, HOUR, NULL},
    /* 65536: each holds a socket (and curl handles); more would outgrow any fd limit. */
    {"upstream_max_idle", CONFIG_U32, offsetof(struct config, server.upstream_max_idle), 1, 65536,
     NULL},
    {"mode", CONFIG_CUSTOM, 0, 0, 0, parse_mode},
    {"workers", CONFIG_U32, offsetof(struct config, server.workers), 1, 256, NULL},
    {"consumer_header", CONFIG_CUSTOM, 0, 0, 0, parse_consumer_header},
    {"headers", CONFIG_CUSTOM, 0, 0, 0, parse_server_headers},
    {"ready_needs_upstreams", CONFIG_BOOL, offsetof(struct config, server.ready_needs_upstreams), 0,
     0, NULL},
    {"proxy_protocol", CONFIG_CUSTOM, 0, 0, 0, parse_proxy_protocol},
    {"proxy_protocol_from", CONFIG_CIDRS, offsetof(struct config, server.proxy_protocol_from), 0, 0,
     NULL},
    {"tls", CONFIG_CUSTOM, 0, 0, 0, parse_tls},
    {NULL, 0, 0, 0, 0, NULL},
};

/* --- server.tls ----------------------------------------------------------------------- */

/* A certificate of server.tls as written: its files and the values that named them. */
struct tls_pair_walk {
    char *cert, *key;
    yaml_node_t *cert_at, *key_at;
};

/* server.tls as walked; `single` (cert: and key:) first, so that its parsers serve both. */
struct tls_walk {
    struct tls_pair_walk single;
    struct config_tls *tls;
    struct tls_pair_walk *items; /* certificates: */
    size_t n_items;
    yaml_node_t *ciphers_at;
};

static void parse_tls_cert(struct loader *ld, yaml_node_t *node, void *object)
{
    struct tls_pair_walk *pair = object;

    pair->cert_at = node;
    config_relative_path(ld, node, "cert", &pair->cert);
}

static void parse_tls_key(struct loader *ld, yaml_node_t *node, void *object)
{
    struct tls_pair_walk *pair = object;

    pair->key_at = node;
    config_relative_path(ld, node, "key", &pair->key);
}

static const struct field tls_pair_fields[] = {
    {"cert", CONFIG_CUSTOM, 0, 0, 0, parse_tls_cert},
    {"key", CONFIG_CUSTOM, 0, 0, 0, parse_tls_key},
    {NULL, 0, 0, 0, 0, NULL},
};

static void parse_tls_min_version(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {[CONFIG_TLS_1_2] = "1.2", [CONFIG_TLS_1_3] = "1.3"};
    int choice = config_parse_choice(ld, node, "min_version", names, 2);

    if (choice >= 0)
        ((struct tls_walk *)object)->tls->min_version = (enum config_tls_version)choice;
}

static void parse_tls_ciphers(struct loader *ld, yaml_node_t *node, void *object)
{
    struct tls_walk *tw = object;
    const char *text = config_scalar(ld, node, "ciphers");

    if (text == NULL)
        return;
    if (text[0] == '\0') {
        config_error(ld, node, "ciphers: empty (leave it out for GnuTLS's NORMAL)");
        return;
    }
    tw->ciphers_at = node;
    free(tw->tls->ciphers);
    tw->tls->ciphers = strdup(text);
    if (tw->tls->ciphers == NULL)
        config_error(ld, node, "ciphers: out of memory");
}

static void parse_tls_certificates(struct loader *ld, yaml_node_t *node, void *object)
{
    struct tls_walk *tw = object;
    size_t n = 0;

    if (node->type != YAML_SEQUENCE_NODE ||
        node->data.sequence.items.top == node->data.sequence.items.start) {
        config_error(ld, node, "certificates: expected a list of {cert, key}");
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    tw->items = calloc(n, sizeof *tw->items);
    if (tw->items == NULL) {
        config_error(ld, node, "certificates: out of memory");
        return;
    }
    tw->n_items = n;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = config_node_at(ld, node->data.sequence.items.start[i]);

        config_walk_mapping(ld, item, tls_pair_fields, &tw->items[i], "certificates");
        if (item->type == YAML_MAPPING_NODE &&
            (tw->items[i].cert_at == NULL || tw->items[i].key_at == NULL))
            config_error(ld, item, "certificates: each needs cert and key");
    }
}

static const struct field tls_fields[] = {
    {"cert", CONFIG_CUSTOM, 0, 0, 0, parse_tls_cert},
    {"key", CONFIG_CUSTOM, 0, 0, 0, parse_tls_key},
    {"min_version", CONFIG_CUSTOM, 0, 0, 0, parse_tls_min_version},
    {"ciphers", CONFIG_CUSTOM, 0, 0, 0, parse_tls_ciphers},
    {"certificates", CONFIG_CUSTOM, 0, 0, 0, parse_tls_certificates},
    {NULL, 0, 0, 0, 0, NULL},
};

/* Checks one certificate's files (tls.h) and takes them into the config's list. */
static void add_tls_cert(struct loader *ld, struct config_tls *tls, struct tls_pair_walk *pair)
{
    struct config_tls_keypair loaded;
    enum config_tls_blame blame;
    char why[512];

    if (pair->cert == NULL || pair->key == NULL)
        return; /* reported where it was read */
    if (config_tls_keypair_load(pair->cert, pair->key, &loaded, &blame, why, sizeof why) != 0) {
        config_error(ld, blame == CONFIG_TLS_BLAME_CERT ? pair->cert_at : pair->key_at, "%s: %s",
                     blame == CONFIG_TLS_BLAME_CERT ? "cert" : "key", why);
        return;
    }
    config_tls_keypair_free(&loaded);
    tls->certs[tls->n_certs++] = (struct config_tls_cert){pair->cert, pair->key};
    pair->cert = pair->key = NULL;
}

/* server.tls: {cert, key, min_version, ciphers, certificates}. cert and key name the first
 * certificate (the one for clients whose server name matches none, or who send none);
 * certificates: lists more, or all of them without cert and key. */
static void parse_tls(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_tls *tls = &((struct config *)object)->server.tls;
    struct tls_walk tw = {.tls = tls};
    gnutls_priority_t priority = NULL;
    const char *bad_at = NULL;

    config_walk_mapping(ld, node, tls_fields, &tw, "tls");
    if (node->type == YAML_MAPPING_NODE &&
        (tw.single.cert_at == NULL) != (tw.single.key_at == NULL))
        config_error(ld, node, "tls: cert and key go together");
    else if (node->type == YAML_MAPPING_NODE && tw.single.cert_at == NULL && tw.n_items == 0 &&
             config_find_value(ld, node, "certificates") == NULL)
        config_error(ld, node, "tls: needs cert and key, or certificates");
    tls->certs = calloc(1 + tw.n_items, sizeof *tls->certs);
    if (tls->certs == NULL) {
        config_error(ld, node, "tls: out of memory");
    } else {
        add_tls_cert(ld, tls, &tw.single);
        for (size_t i = 0; i < tw.n_items; i++)
            add_tls_cert(ld, tls, &tw.items[i]);
    }
    tls->priorities = config_tls_priorities(tls->ciphers, tls->min_version);
    if (tls->priorities == NULL)
        config_error(ld, node, "tls: out of memory");
    else if (gnutls_priority_init(&priority, tls->priorities, &bad_at) < 0)
        /* bad_at points into the whole string: the part the config wrote is quoted. */
        config_error(
            ld, tw.ciphers_at != NULL ? tw.ciphers_at : node,
            "ciphers: \"%s\" is not a GnuTLS priority string (the trouble starts at \"%.*s\")",
            tls->ciphers != NULL ? tls->ciphers : "NORMAL",
            bad_at != NULL ? (int)strcspn(bad_at, ":") : 0, bad_at != NULL ? bad_at : "");
    else
        gnutls_priority_deinit(priority);
    tls->on = true;
    free(tw.single.cert);
    free(tw.single.key);
    for (size_t i = 0; i < tw.n_items; i++) {
        free(tw.items[i].cert);
        free(tw.items[i].key);
    }
    free(tw.items);
}

const struct key_table config_server_keys[] = {
    {"server", server_fields},
    {"server.access_log", access_log_fields},
    {"server.tls", tls_fields},
    {"server.tls.certificates", tls_pair_fields},
    {NULL, NULL},
};

void config_parse_server(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;
    yaml_node_t *from;

    config_walk_mapping_blocks(ld, node, server_fields, object, "server", CONFIG_IN_SERVER,
                               config->server_blocks);
    config_check_admin(ld, node, config);
    if (config->server.park_idle_after_ns > 0 &&
        config->server.park_idle_after_ns < (int64_t)SECOND)
        config_error(ld, config_find_value(ld, node, "park_idle_after"),
                     "park_idle_after: at least 1s, or 0 to never park a connection");
    /* Anyone who may send the header may say they are anyone: it takes a list of peers (one
     * with a bad item is reported as such). */
    from = config_find_value(ld, node, "proxy_protocol_from");
    if (config->server.proxy_protocol != CONFIG_PROXY_PROTOCOL_OFF &&
        (from == NULL || (from->type == YAML_SEQUENCE_NODE &&
                          from->data.sequence.items.start == from->data.sequence.items.top)))
        config_error(
            ld, config_find_value(ld, node, "proxy_protocol"),
            "proxy_protocol: needs server.proxy_protocol_from, the addresses of the proxies "
            "that send it");
}
