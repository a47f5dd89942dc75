/*
 * chars: the character classes of HTTP (RFC 9110) and URIs (RFC 3986) that sluice's readers
 * share. ASCII only: the C library's classes follow the locale, and the protocol's do not.
 */
#ifndef SLUICE_GATEWAY_CHARS_H
#define SLUICE_GATEWAY_CHARS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define GW_PORT_MAX_DIGITS 5

static inline bool gw_is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static inline bool gw_is_alnum(int c)
{
    return gw_is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A token character (RFC 9110 section 5.6.2): what methods and field names are made of. */
static inline bool gw_is_tchar(int c)
{
    return gw_is_alnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The value of a hex digit, or -1. */
static inline int gw_hex_value(int c)
{
    if (gw_is_digit(c))
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

/* A control character (what a value and a decoded path may not hold, tab aside). */
static inline bool gw_is_control(int c)
{
    return c < 0x20 || c == 0x7f;
}

/* The byte that %XX at `p` stands for, or -1 when `p` is not '%' and two hex digits (the
 * string must be NUL-terminated, or hold two bytes after a '%'). */
static inline int gw_percent_byte(const char *p)
{
    int high = p[0] == '%' ? gw_hex_value((unsigned char)p[1]) : -1;
    int low = high >= 0 ? gw_hex_value((unsigned char)p[2]) : -1;

    return low >= 0 ? high * 16 + low : -1;
}

/* A port: 1 to 5 digits, at most 65535. */
static inline bool gw_port_valid(const char *text, size_t len)
{
    unsigned long port = 0;

    if (len == 0 || len > GW_PORT_MAX_DIGITS)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (!gw_is_digit((unsigned char)text[i]))
            return false;
        port = port * 10 + (unsigned long)(text[i] - '0');
    }
    return port <= 65535;
}

#endif
