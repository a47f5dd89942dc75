/* libFuzzer: the X-Forwarded-For walk, single entries (ports, brackets, IPv4-mapped), client
 * keys, and Host syntax and matching, on any header value. The peer is a trusted proxy, so the
 * walk always runs. */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/identity/keys.h"
#include "gateway/routing/routes.h"

static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static bool same_addr(const struct gw_addr *a, const struct gw_addr *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}

/* What gw_addr_parse gives must be an address it gives back from its own text, bracketed
 * and with a port too: an entry means one address whichever way a proxy writes it. */
static void check_entry(const struct gw_addr *a)
{
    char text[INET6_ADDRSTRLEN], entry[INET6_ADDRSTRLEN + 16];
    struct gw_addr again;

    if (a->family == AF_INET6 && memcmp(a->bytes, v4_mapped, sizeof v4_mapped) == 0)
        abort(); /* a mapped address must have become IPv4 */
    if (a->family == AF_INET) {
        for (size_t i = 4; i < sizeof a->bytes; i++)
            if (a->bytes[i] != 0)
                abort();
    } else if (a->family != AF_INET6) {
        abort();
    }
    if (inet_ntop(a->family, a->bytes, text, sizeof text) == NULL)
        abort();
    if (gw_addr_parse(text, strlen(text), &again) != 0 || !same_addr(a, &again))
        abort();
    snprintf(entry, sizeof entry, a->family == AF_INET ? "%s:65535" : "[%s]:1", text);
    if (gw_addr_parse(entry, strlen(entry), &again) != 0 || !same_addr(a, &again))
        abort();
    if (a->family == AF_INET) {
        snprintf(entry, sizeof entry, "::ffff:%s", text);
        if (gw_addr_parse(entry, strlen(entry), &again) != 0 || !same_addr(a, &again))
            abort();
    }
}

/* A Host that passes gw_host_is_valid has nothing a parser could split on, and matches a
 * route for its own name however it is spelt. */
static void check_host(const char *host)
{
    static char *any[] = {"GET", NULL};
    struct config_route route = {.name = "h", .path_prefix = "/", .methods = any};
    struct config config = {.routes = &route, .n_routes = 1};
    char name[256];
    size_t start = 0, len = strlen(host);

    if (!gw_host_is_valid(host)) {
        route.host = "example.com";
        gw_route_match(&config, "HEAD", "/", host);
        return;
    }
    if (strpbrk(host, "@,;/?#\\\"'<>{}|^`!$&()*+=\r\n") != NULL)
        abort();
    while (start < len && (host[start] == ' ' || host[start] == '\t'))
        start++;
    while (len > start && (host[len - 1] == ' ' || host[len - 1] == '\t'))
        len--;
    for (size_t i = start; i < len; i++)
        if ((unsigned char)host[i] <= ' ' || (unsigned char)host[i] >= 0x7f)
            abort();
    /* The name alone, lower case, as the config would hold it: it must route here. */
    if (len > start && host[start] != '[') {
        size_t n = 0;

        for (size_t i = start; i < len && host[i] != ':' && n + 1 < sizeof name; i++, n++)
            name[n] = (char)((host[i] >= 'A' && host[i] <= 'Z') ? host[i] + 32 : host[i]);
        name[n] = '\0';
        if (n + 1 < sizeof name) {
            route.host = name;
            if (gw_route_match(&config, "HEAD", "/", host) != 0)
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct config_cidr trusted_items[2];
    static struct config_cidrs trusted = {trusted_items, 2};
    struct gw_addr peer = {.family = AF_INET, .bytes = {10, 0, 0, 1}}, client, entry;
    char key[GW_KEY_LEN], *value;

    if (size == 0)
        return 0;
    config_parse_cidr("10.0.0.0/8", &trusted_items[0]);
    config_parse_cidr("fd00::/8", &trusted_items[1]);
    value = malloc(size);
    if (value == NULL)
        return 0;
    memcpy(value, data + 1, size - 1);
    value[size - 1] = '\0';
    client = gw_client_addr(&peer, value, &trusted);
    check_entry(&client);
    gw_ip_key(&client, 1 + data[0] % 128, key);
    if (strlen(key) >= GW_KEY_LEN)
        abort();
    gw_value_key("header", value, key);
    if (gw_addr_parse(value, strlen(value), &entry) == 0)
        check_entry(&entry);
    check_host(value);
    free(value);
    return 0;
}
