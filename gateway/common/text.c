/* Appending text to a fixed buffer; design in text.h. */
#include <arpa/inet.h>
#include <string.h>

#include "gateway/common/text.h"

void gw_text_number(struct gw_text *t, unsigned long long n, int min_digits)
{
    char digits[24];
    int i = sizeof digits;

    if (min_digits > (int)sizeof digits)
        min_digits = sizeof digits;
    do {
        digits[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0 || (int)sizeof digits - i < min_digits);
    gw_text_put(t, digits + i, sizeof digits - (size_t)i);
}

void gw_text_address(struct gw_text *t, int family, const unsigned char *bytes)
{
    char text[INET6_ADDRSTRLEN];

    if (family != AF_INET) {
        gw_text_str(t, inet_ntop(AF_INET6, bytes, text, sizeof text) != NULL ? text : "");
        return;
    }
    for (int i = 0; i < 4; i++) {
        if (i > 0)
            gw_text_put(t, ".", 1);
        gw_text_number(t, bytes[i], 1);
    }
}
