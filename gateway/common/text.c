/* Appending text to a fixed buffer; design in text.h. */
#include <string.h>

#include "text.h"

void gw_text_put(struct gw_text *t, const char *text, size_t len)
{
    if (len > (size_t)(t->end - t->at))
        len = (size_t)(t->end - t->at);
    memcpy(t->at, text, len);
    t->at += len;
}

void gw_text_str(struct gw_text *t, const char *text)
{
    gw_text_put(t, text, strlen(text));
}

void gw_text_number(struct gw_text *t, unsigned long long n, int min_digits)
{
    char digits[24];
    int i = sizeof digits;

    do {
        digits[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0 || (int)sizeof digits - i < min_digits);
    gw_text_put(t, digits + i, sizeof digits - (size_t)i);
}

void gw_text_signed(struct gw_text *t, long long n)
{
    if (n < 0) {
        gw_text_put(t, "-", 1);
        gw_text_number(t, 0ULL - (unsigned long long)n, 1);
    } else {
        gw_text_number(t, (unsigned long long)n, 1);
    }
}
