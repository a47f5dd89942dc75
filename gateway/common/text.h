/*
 * text: building a line, a field or a body by appending to a fixed buffer, not with printf.
 * On the hot path formatting was a good part of what a request cost (printf's machinery was
 * 8% of a denied request's CPU). Appending never writes past `end`: what does not fit is cut
 * off, and a caller that must not send a cut text checks gw_text_full(). Nothing is
 * terminated; gw_text_finish() writes the NUL.
 *
 *   char field[64];
 *   struct gw_text t = gw_text_on(field, sizeof field - 1);
 *   gw_text_str(&t, "r=");
 *   gw_text_number(&t, 42, 1);
 *   gw_text_finish(&t);                  // field: "r=42"
 */
#ifndef SLUICE_GATEWAY_TEXT_H
#define SLUICE_GATEWAY_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct gw_text {
    char *at, *end;
};

/* Appending to the `cap` bytes at `buf`. */
static inline struct gw_text gw_text_on(char *buf, size_t cap)
{
    return (struct gw_text){buf, buf + cap};
}

/* Whether `t` has no room left (so what was last appended may have been cut). */
static inline bool gw_text_full(const struct gw_text *t)
{
    return t->at == t->end;
}

/* The first `len` bytes of `text`. Inline, as the next: most texts appended are literals, whose
 * length and copy the compiler then works out in place. */
static inline void gw_text_put(struct gw_text *t, const char *text, size_t len)
{
    if (len > (size_t)(t->end - t->at))
        len = (size_t)(t->end - t->at);
    memcpy(t->at, text, len);
    t->at += len;
}

/* The string `text`. */
static inline void gw_text_str(struct gw_text *t, const char *text)
{
    gw_text_put(t, text, strlen(text));
}

/* `n` in decimal, with leading zeros to at least `min_digits` digits. */
void gw_text_number(struct gw_text *t, unsigned long long n, int min_digits);

/* An IP address as inet_ntop() writes it: `bytes` holds 4 (AF_INET) or 16 (AF_INET6) bytes.
 * IPv4's dotted quad is written here, without inet_ntop()'s sprintf per byte (a tenth of the
 * instructions, and a proxied request writes two or three). */
void gw_text_address(struct gw_text *t, int family, const unsigned char *bytes);

/* Writes a NUL at the end of what was appended; the caller left a byte for it beyond `end`. */
static inline void gw_text_finish(struct gw_text *t)
{
    *t->at = '\0';
}

#endif
