#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <sodium.h>
#include <string.h>

#include "gateway/common/chars.h"
#include "gateway/common/text.h"
#include "gateway/identity/keys.h"

/* ::ffff:a.b.c.d, an IPv4 address as a dual-stack socket or a proxy writes it. It is made
 * the IPv4 address itself, so that one client has one key and IPv4 exemptions and
 * trusted_proxies apply to it whichever way it was written. */
static void unmap_ipv4(struct gw_addr *addr)
{
    static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (addr->family == AF_INET6 && memcmp(addr->bytes, v4_mapped, sizeof v4_mapped) == 0) {
        addr->family = AF_INET;
        memmove(addr->bytes, addr->bytes + 12, 4);
        memset(addr->bytes + 4, 0, sizeof addr->bytes - 4);
    }
}

int gw_addr_from_sockaddr(const struct sockaddr *sa, struct gw_addr *out)
{
    memset(out, 0, sizeof *out);
    if (sa == NULL)
        return -1;
    if (sa->sa_family == AF_INET) {
        out->family = AF_INET;
        memcpy(out->bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        out->family = AF_INET6;
        memcpy(out->bytes, ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr, 16);
        unmap_ipv4(out);
        return 0;
    }
    return -1;
}

/* `len` bytes of `text` as an IPv4 address, or also as an IPv6 one when `ipv6_allowed`. */
static int parse_ip(const char *text, size_t len, bool ipv6_allowed, struct gw_addr *out)
{
    char buf[INET6_ADDRSTRLEN];

    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, buf, out->bytes) == 1)
        out->family = AF_INET;
    else if (ipv6_allowed && inet_pton(AF_INET6, buf, out->bytes) == 1)
        out->family = AF_INET6;
    else
        return -1;
    unmap_ipv4(out);
    return 0;
}

int gw_addr_parse(const char *text, size_t len, struct gw_addr *out)
{
    const char *colon;

    memset(out, 0, sizeof *out);
    while (len > 0 && isspace((unsigned char)*text)) {
        text++;
        len--;
    }
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        len--;
    if (len > 0 && text[0] == '[') {
        const char *close = memchr(text, ']', len);
        size_t inner_len, rest_len;

        if (close == NULL)
            return -1;
        inner_len = (size_t)(close - text - 1);
        rest_len = len - inner_len - 2;
        if (rest_len > 0 && (close[1] != ':' || !gw_port_valid(close + 2, rest_len - 1)))
            return -1;
        return parse_ip(text + 1, inner_len, true, out);
    }
    if (parse_ip(text, len, true, out) == 0)
        return 0;
    /* Some load balancers write "203.0.113.7:4711". Only after an IPv4 address: in an
     * unbracketed IPv6 address a last ":4711" is a group, and inet_pton above has had it. */
    colon = memrchr(text, ':', len);
    if (colon == NULL || !gw_port_valid(colon + 1, (size_t)(text + len - colon - 1)))
        return -1;
    return parse_ip(text, (size_t)(colon - text), false, out);
}

static bool prefix_equal(const unsigned char *a, const unsigned char *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;

    if (memcmp(a, b, whole) != 0)
        return false;
    return rest == 0 || ((a[whole] ^ b[whole]) & (0xff << (8 - rest))) == 0;
}

bool gw_cidrs_contain(const struct config_cidrs *cidrs, const struct gw_addr *addr)
{
    for (size_t i = 0; i < cidrs->n; i++)
        if (cidrs->items[i].family == addr->family &&
            prefix_equal(cidrs->items[i].addr, addr->bytes, cidrs->items[i].prefix_len))
            return true;
    return false;
}

struct gw_addr gw_client_addr(const struct gw_addr *peer, const char *forwarded_for,
                              const struct config_cidrs *trusted)
{
    struct gw_addr client = *peer, hop;
    size_t end;

    if (forwarded_for == NULL || !gw_cidrs_contain(trusted, peer))
        return client;
    /* Right to left: each trusted hop vouches for the entry before it. Stop at the first
     * untrusted address (the client), or at an entry no proxy of ours could have written. */
    end = strlen(forwarded_for);
    while (end > 0) {
        size_t start = end;

        while (start > 0 && forwarded_for[start - 1] != ',')
            start--;
        if (gw_addr_parse(forwarded_for + start, end - start, &hop) != 0)
            break;
        client = hop;
        if (!gw_cidrs_contain(trusted, &hop))
            break;
        end = start > 0 ? start - 1 : 0;
    }
    return client;
}

void gw_ip_key(const struct gw_addr *addr, unsigned ipv6_prefix_len, char out[GW_KEY_LEN])
{
    struct gw_text t = gw_text_on(out, GW_KEY_LEN - 1);
    unsigned char masked[16];

    gw_text_str(&t, "ip:");
    if (addr->family == AF_INET) {
        gw_text_address(&t, AF_INET, addr->bytes);
        gw_text_finish(&t);
        return;
    }
    memset(masked, 0, sizeof masked);
    memcpy(masked, addr->bytes, ipv6_prefix_len / 8);
    if (ipv6_prefix_len % 8)
        masked[ipv6_prefix_len / 8] =
            addr->bytes[ipv6_prefix_len / 8] & (unsigned char)(0xff << (8 - ipv6_prefix_len % 8));
    gw_text_address(&t, AF_INET6, masked);
    gw_text_put(&t, "/", 1);
    gw_text_number(&t, ipv6_prefix_len, 1);
    gw_text_finish(&t);
}

void gw_value_key(const char *kind, const char *value, char out[GW_KEY_LEN])
{
    struct gw_text t = gw_text_on(out, GW_KEY_LEN - 1);
    unsigned char digest[32];
    char hex[2 * sizeof digest + 1];
    size_t len = strlen(value);

    gw_text_str(&t, kind);
    if (len <= GW_KEY_MAX_VALUE) {
        gw_text_put(&t, ":", 1);
        gw_text_put(&t, value, len);
    } else {
        crypto_generichash(digest, sizeof digest, (const unsigned char *)value, len, NULL, 0);
        sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
        gw_text_put(&t, "#", 1);
        gw_text_str(&t, hex);
    }
    gw_text_finish(&t);
}

void gw_key_source(enum config_key_kind kind, const char *name, bool consumer,
                   char out[GW_KEY_SOURCE_LEN])
{
    struct gw_text t = gw_text_on(out, GW_KEY_SOURCE_LEN - 1);

    if (consumer) {
        gw_text_str(&t, "consumer");
    } else if (kind == CONFIG_KEY_HEADER) {
        gw_text_str(&t, "header:");
        for (const char *c = name; *c != '\0'; c++) {
            char lower = (char)tolower((unsigned char)*c);

            gw_text_put(&t, &lower, 1);
        }
    } else if (kind == CONFIG_KEY_QUERY) {
        gw_text_str(&t, "query:");
        gw_text_str(&t, name);
    } else {
        gw_text_str(&t, "ip");
    }
    gw_text_finish(&t);
}
