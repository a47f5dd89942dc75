/* The small value syntaxes of the config file: durations, sizes, address blocks, endpoints. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/config.h"

/* A whole number at the start of `text`, its end in `*end`. 0 or -1 (no digits, overflow,
 * a sign). */
static int leading_number(const char *text, uint64_t *value, const char **end)
{
    char *stop;

    if (!isdigit((unsigned char)text[0]))
        return -1;
    errno = 0;
    *value = strtoull(text, &stop, 10);
    if (errno != 0)
        return -1;
    *end = stop;
    return 0;
}

struct unit {
    const char *suffix;
    uint64_t scale;
};

/* number * scale of the suffix that ends `text`; 0 or -1 on an unknown suffix or overflow. */
static int scaled(const char *text, const struct unit *units, uint64_t *out)
{
    uint64_t n;
    const char *suffix;

    if (leading_number(text, &n, &suffix) != 0)
        return -1;
    for (const struct unit *u = units; u->suffix != NULL; u++)
        if (strcmp(suffix, u->suffix) == 0)
            return __builtin_mul_overflow(n, u->scale, out) ? -1 : 0;
    return -1;
}

int config_parse_duration(const char *text, int64_t *ns)
{
    static const struct unit units[] = {
        {"ms", 1000000ULL},
        {"s", 1000000000ULL},
        {"", 1000000000ULL},
        {"m", 60 * 1000000000ULL},
        {"h", 3600 * 1000000000ULL},
        {"d", 86400 * 1000000000ULL},
        {NULL, 0},
    };
    uint64_t v;

    if (scaled(text, units, &v) != 0 || v > INT64_MAX)
        return -1;
    *ns = (int64_t)v;
    return 0;
}

int config_parse_size(const char *text, uint64_t *bytes)
{
    static const struct unit units[] = {
        {"", 1},      {"B", 1},     {"KiB", 1ULL << 10}, {"MiB", 1ULL << 20}, {"GiB", 1ULL << 30},
        {"kB", 1000}, {"KB", 1000}, {"MB", 1000000},     {"GB", 1000000000},  {NULL, 0},
    };

    return scaled(text, units, bytes);
}

/* `value` in the largest of `units` (largest first) that holds it whole, the last of them
 * being 1. */
static const char *format_scaled(uint64_t value, const struct unit *units, char *out, size_t cap)
{
    const struct unit *u = units;

    while (u->scale > 1 && (value == 0 || value % u->scale != 0))
        u++;
    snprintf(out, cap, "%llu%s", (unsigned long long)(value / u->scale), u->suffix);
    return out;
}

const char *config_format_duration(int64_t ns, char *out, size_t cap)
{
    static const struct unit units[] = {
        {"d", 86400 * 1000000000ULL}, {"h", 3600 * 1000000000ULL}, {"m", 60 * 1000000000ULL},
        {"s", 1000000000ULL},         {"ms", 1000000ULL},          {"ns", 1},
    };

    return format_scaled(ns < 0 ? 0 : (uint64_t)ns, units, out, cap);
}

const char *config_format_size(uint64_t bytes, char *out, size_t cap)
{
    static const struct unit units[] = {
        {"GiB", 1ULL << 30},
        {"MiB", 1ULL << 20},
        {"KiB", 1ULL << 10},
        {"", 1},
    };

    return format_scaled(bytes, units, out, cap);
}

bool config_same_key(enum config_key_kind a_kind, const char *a_name, enum config_key_kind b_kind,
                     const char *b_name)
{
    if (a_kind != b_kind)
        return false;
    if (a_kind == CONFIG_KEY_IP)
        return true;
    if (a_kind == CONFIG_KEY_HEADER)
        return strcasecmp(a_name, b_name) == 0;
    return strcmp(a_name, b_name) == 0;
}

int config_parse_cidr(const char *text, struct config_cidr *out)
{
    static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char addr[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t len = slash ? (size_t)(slash - text) : strlen(text);
    unsigned max_len;

    if (len == 0 || len >= sizeof addr)
        return -1;
    memcpy(addr, text, len);
    addr[len] = '\0';
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, addr, out->addr) == 1) {
        out->family = AF_INET;
        max_len = 32;
    } else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
        out->family = AF_INET6;
        max_len = 128;
    } else {
        return -1;
    }
    out->prefix_len = max_len;
    if (slash != NULL) {
        uint64_t n;
        const char *end;

        if (leading_number(slash + 1, &n, &end) != 0 || *end != '\0' || n > max_len)
            return -1;
        out->prefix_len = (unsigned)n;
    }
    /* Addresses are compared with ::ffff:10.1.2.3 already made 10.1.2.3 (gateway/identity/keys.h),
     * so a mapped block is kept as the IPv4 block it names, or it would match nothing. Shorter than
     * /96 it would reach past ::ffff:0:0/96 into IPv6 proper, both families in one block: no one
     * means that, so it is refused. */
    if (out->family == AF_INET6 && memcmp(out->addr, v4_mapped, sizeof v4_mapped) == 0) {
        if (out->prefix_len < 96)
            return -1;
        out->family = AF_INET;
        memmove(out->addr, out->addr + 12, 4);
        memset(out->addr + 4, 0, sizeof out->addr - 4);
        out->prefix_len -= 96;
        max_len = 32;
    }
    /* Host bits must be zero: 10.1.2.3/8 is more likely a typo than a wish. */
    for (unsigned bit = out->prefix_len; bit < max_len; bit++)
        if (out->addr[bit / 8] & (0x80 >> (bit % 8)))
            return -1;
    return 0;
}

int config_parse_endpoint(const char *text, struct config_endpoint *out)
{
    const char *host = text, *colon;
    size_t host_len;
    uint64_t port;
    const char *end;
    unsigned char probe[16];

    if (text[0] == '[') {
        const char *close = strchr(text, ']');

        if (close == NULL || close[1] != ':')
            return -1;
        host = text + 1;
        host_len = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL || memchr(text, ':', (size_t)(colon - text)) != NULL)
            return -1; /* an IPv6 address needs brackets */
        host_len = (size_t)(colon - text);
    }
    if (host_len == 0 || leading_number(colon + 1, &port, &end) != 0 || *end != '\0' ||
        port > 65535)
        return -1;
    out->host = strndup(host, host_len);
    if (out->host == NULL)
        return -1;
    if (text[0] == '[' && inet_pton(AF_INET6, out->host, probe) != 1) {
        free(out->host);
        out->host = NULL;
        return -1;
    }
    out->port = (uint16_t)port;
    return 0;
}
