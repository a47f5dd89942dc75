/* What a route changes in the requests it forwards: host:, set_headers:, remove_headers: and
 * upgrades:; see sections.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

/* What a Host field may hold: a name or an IPv4 address, or an IPv6 one in brackets, then an
 * optional :port; 255 bytes at most. */
static bool is_host_field(const char *text)
{
    size_t len = strlen(text), host_len;
    const char *port;
    unsigned char addr[16];
    char v6[64];
    unsigned long number;
    char *end = NULL;

    if (len == 0 || len > 255)
        return false;
    if (text[0] == '[') {
        port = strchr(text, ']');
        host_len = port != NULL ? (size_t)(port - text - 1) : sizeof v6;
        if (host_len >= sizeof v6)
            return false;
        memcpy(v6, text + 1, host_len);
        v6[host_len] = '\0';
        if (inet_pton(AF_INET6, v6, addr) != 1)
            return false;
        port++;
    } else {
        host_len = strcspn(text, ":");
        if (host_len == 0 ||
            strspn(text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") !=
                host_len)
            return false;
        port = text + host_len;
    }
    if (*port == '\0')
        return true;
    if (*port != ':' || !isdigit((unsigned char)port[1]) || strlen(port + 1) > 5)
        return false;
    number = strtoul(port + 1, &end, 10);
    return *end == '\0' && number >= 1 && number <= 65535;
}

/* host: preserve | upstream | NAME, the Host field a route's upstream sees. Not match.host,
 * which says which requests the route takes. */
void config_parse_route_host(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    const char *text = config_scalar(ld, node, "host");

    if (text == NULL)
        return;
    free(route->forwarding.host_name);
    route->forwarding.host_name = NULL;
    if (strcmp(text, "preserve") == 0) {
        route->forwarding.host_mode = CONFIG_HOST_PRESERVE;
        return;
    }
    if (strcmp(text, "upstream") == 0) {
        route->forwarding.host_mode = CONFIG_HOST_UPSTREAM;
        return;
    }
    if (!is_host_field(text)) {
        config_error(ld, node,
                     "host: \"%s\" is not preserve, upstream or a host name (an address, IPv6 in "
                     "brackets; a :port may follow)",
                     text);
        return;
    }
    route->forwarding.host_mode = CONFIG_HOST_NAME;
    route->forwarding.host_name = strdup(text);
    if (route->forwarding.host_name == NULL) {
        config_error(ld, node, "host: out of memory");
        return;
    }
    for (char *c = route->forwarding.host_name; *c != '\0'; c++)
        *c = (char)tolower((unsigned char)*c);
}

#define MAX_HEADER_FIELDS 64   /* in set_headers: and in remove_headers: */
#define MAX_HEADER_VALUE  1024 /* bytes of a set_headers: value */

static const char framing[] = "the gateway frames the body it forwards itself";
static const char hop_by_hop[] = "it is hop-by-hop, about one connection only, never forwarded";

/* Fields a route may not set, and those of them it may not remove either: the gateway's own
 * or hop-by-hop. */
static const struct {
    const char *name;
    bool removable;
    const char *why;
} reserved_fields[] = {
    {"Host", false, "the route's host: says what it is (preserve, upstream or a name)"},
    {"Content-Length", false, framing},
    {"Transfer-Encoding", false, framing},
    {"Trailer", true, framing},
    {"Connection", true, hop_by_hop},
    {"Keep-Alive", true, hop_by_hop},
    {"Upgrade", true, hop_by_hop},
    {"TE", true, hop_by_hop},
    {"Proxy-Connection", true, hop_by_hop},
    {"Expect", true, "the gateway answers it itself"},
    {"X-Forwarded-For", true, "the gateway sets it from the client's address"},
};

/* Whether `name` is a field name set_headers: (`removing` false) or remove_headers: may name;
 * reported at `node` when not. */
static bool check_field_name(struct loader *ld, yaml_node_t *node, const char *key,
                             const char *name, bool removing)
{
    if (!config_is_token(name)) {
        config_error(ld, node, "%s: \"%s\" is not a header field name", key, name);
        return false;
    }
    for (size_t i = 0; i < sizeof reserved_fields / sizeof reserved_fields[0]; i++)
        if (strcasecmp(name, reserved_fields[i].name) == 0 &&
            !(removing && reserved_fields[i].removable)) {
            config_error(ld, node, "%s: %s cannot be %s: %s", key, name,
                         removing ? "removed" : "set", reserved_fields[i].why);
            return false;
        }
    return true;
}

/* Whether each ${request.NAME} in a set_headers: value is one the gateway fills in (loader.c's
 * expand() left them as they are); the first that is not is reported. */
static bool check_request_parts(struct loader *ld, yaml_node_t *node, const char *value)
{
    static const char *const parts[] = {"client_addr", "consumer", "id"};
    static const char prefix[] = "${request.";

    for (const char *p = strstr(value, prefix); p != NULL; p = strstr(p + 1, prefix)) {
        const char *name = p + sizeof prefix - 1;
        size_t len = strcspn(name, "}");
        bool known = false;

        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            known = known || (strlen(parts[i]) == len && strncmp(name, parts[i], len) == 0);
        if (!known) {
            config_error(ld, node,
                         "set_headers: ${request.%.*s} is not one of ${request.client_addr}, "
                         "${request.consumer} or ${request.id}",
                         (int)len, name);
            return false;
        }
    }
    return true;
}

/* set_headers: {NAME: value, ...}, set on every request forwarded. */
void config_parse_set_headers(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    yaml_node_pair_t *pairs;
    size_t n;

    if (node->type != YAML_MAPPING_NODE) {
        config_error(ld, node, "set_headers: expected a mapping of field names to values, found %s",
                     config_kind_name(node));
        return;
    }
    pairs = node->data.mapping.pairs.start;
    n = (size_t)(node->data.mapping.pairs.top - pairs);
    if (n > MAX_HEADER_FIELDS) {
        config_error(ld, config_node_at(ld, pairs[MAX_HEADER_FIELDS].key),
                     "set_headers: at most %d fields; this is field %d", MAX_HEADER_FIELDS,
                     MAX_HEADER_FIELDS + 1);
        n = MAX_HEADER_FIELDS;
    }
    route->forwarding.set_headers = calloc(n + 1, sizeof *route->forwarding.set_headers);
    if (route->forwarding.set_headers == NULL) {
        config_error(ld, node, "set_headers: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *key = config_node_at(ld, pairs[i].key),
                    *value = config_node_at(ld, pairs[i].value);
        struct config_set_header *field =
            &route->forwarding.set_headers[route->forwarding.n_set_headers];
        const char *name, *text;
        bool repeated = false;

        if (key->type != YAML_SCALAR_NODE) {
            config_error(ld, key, "set_headers: keys must be field names, not %s",
                         config_kind_name(key));
            continue;
        }
        name = (const char *)key->data.scalar.value;
        if (!check_field_name(ld, key, "set_headers", name, false))
            continue;
        /* Field names are compared without case, so config_repeated_keys() does not serve; there
         * are at most MAX_HEADER_FIELDS. */
        for (size_t j = 0; j < i && !repeated; j++) {
            const yaml_node_t *earlier = config_node_at(ld, pairs[j].key);

            repeated = earlier->type == YAML_SCALAR_NODE &&
                       strcasecmp((const char *)earlier->data.scalar.value, name) == 0;
            if (repeated)
                config_error(ld, key, "set_headers: %s appears twice (first at line %zu)", name,
                             earlier->start_mark.line + 1);
        }
        text = repeated ? NULL : config_scalar(ld, value, "set_headers");
        if (text == NULL)
            continue;
        if (strlen(text) > MAX_HEADER_VALUE || strpbrk(text, "\r\n") != NULL) {
            config_error(ld, value,
                         "set_headers: the value of %s must be one line of at most %d bytes", name,
                         MAX_HEADER_VALUE);
            continue;
        }
        if (!check_request_parts(ld, value, text))
            continue;
        field->name = strdup(name);
        field->value = strdup(text);
        route->forwarding.n_set_headers++;
        if (field->name == NULL || field->value == NULL)
            config_error(ld, value, "set_headers: out of memory");
    }
}

/* upgrades: [TOKEN, ...], the protocols a request may upgrade its connection to. */
void config_parse_upgrades(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    size_t n;

    route->forwarding.n_upgrades = 0;
    if (node->type != YAML_SEQUENCE_NODE) {
        config_error(ld, node, "upgrades: expected a list of protocol names, found %s",
                     config_kind_name(node));
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    if (n > CONFIG_MAX_UPGRADES) {
        config_error(ld, config_node_at(ld, node->data.sequence.items.start[CONFIG_MAX_UPGRADES]),
                     "upgrades: at most %d protocols; this is protocol %d", CONFIG_MAX_UPGRADES,
                     CONFIG_MAX_UPGRADES + 1);
        n = CONFIG_MAX_UPGRADES;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = config_node_at(ld, node->data.sequence.items.start[i]);
        const char *text = config_scalar(ld, item, "upgrades");
        char *token;
        bool valid;

        if (text == NULL)
            continue;
        valid = config_is_token(text) && strlen(text) < CONFIG_UPGRADE_LEN;
        if (!valid) {
            config_error(ld, item,
                         "upgrades: \"%s\" is not a protocol name (a token of at most %d bytes)",
                         text, CONFIG_UPGRADE_LEN - 1);
            continue;
        }
        if (strcasecmp(text, "h2c") == 0) {
            config_error(ld, item,
                         "upgrades: h2c is refused: it would carry HTTP/2 requests past the "
                         "limiter");
            continue;
        }
        token = route->forwarding.upgrades[route->forwarding.n_upgrades];
        for (size_t k = 0; text[k] != '\0'; k++)
            token[k] = (char)tolower((unsigned char)text[k]);
        token[strlen(text)] = '\0';
        for (size_t j = 0; j < route->forwarding.n_upgrades; j++)
            if (strcmp(route->forwarding.upgrades[j], token) == 0) {
                config_error(ld, item, "upgrades: %s appears twice", text);
                token = NULL;
                break;
            }
        if (token != NULL)
            route->forwarding.n_upgrades++;
    }
}

/* remove_headers: [NAME, ...], dropped from every request forwarded. */
void config_parse_remove_headers(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_route *route = object;
    size_t n;

    if (node->type != YAML_SEQUENCE_NODE) {
        config_error(ld, node, "remove_headers: expected a list of field names, found %s",
                     config_kind_name(node));
        return;
    }
    n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    if (n == 0) {
        config_error(ld, node, "remove_headers: an empty list removes nothing; leave it out");
        return;
    }
    if (n > MAX_HEADER_FIELDS) {
        config_error(ld, config_node_at(ld, node->data.sequence.items.start[MAX_HEADER_FIELDS]),
                     "remove_headers: at most %d fields; this is field %d", MAX_HEADER_FIELDS,
                     MAX_HEADER_FIELDS + 1);
        n = MAX_HEADER_FIELDS;
    }
    route->forwarding.remove_headers = calloc(n + 1, sizeof *route->forwarding.remove_headers);
    if (route->forwarding.remove_headers == NULL) {
        config_error(ld, node, "remove_headers: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = config_node_at(ld, node->data.sequence.items.start[i]);
        const char *text = config_scalar(ld, item, "remove_headers");
        bool repeated = false;

        if (text == NULL || !check_field_name(ld, item, "remove_headers", text, true))
            continue;
        for (size_t j = 0; j < route->forwarding.n_remove_headers && !repeated; j++)
            repeated = strcasecmp(route->forwarding.remove_headers[j], text) == 0;
        if (repeated) {
            config_error(ld, item, "remove_headers: %s appears twice", text);
            continue;
        }
        route->forwarding.remove_headers[route->forwarding.n_remove_headers] = strdup(text);
        if (route->forwarding.remove_headers[route->forwarding.n_remove_headers] == NULL)
            config_error(ld, item, "remove_headers: out of memory");
        else
            route->forwarding.n_remove_headers++;
    }
}
