/* Request ids and trace context; design in trace.h. */
#include <sodium.h>
#include <string.h>

#include "gateway/common/random.h"
#include "gateway/common/trace.h"

#define TRACEPARENT_V00_LEN 55

static const char id_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                               "._:/+=-";

bool gw_request_id_is_sane(const char *value)
{
    size_t len = strlen(value);

    return len >= 1 && len <= GW_REQUEST_ID_MAX && strspn(value, id_chars) == len;
}

void gw_request_id_new(char out[GW_REQUEST_ID_LEN])
{
    unsigned char random[16];

    gw_random_bytes(random, sizeof random);
    sodium_bin2hex(out, GW_REQUEST_ID_LEN, random, sizeof random);
}

/* Whether the `len` characters at `text` are lower-case hex digits, and not all '0' when
 * `nonzero`. */
static bool lower_hex(const char *text, size_t len, bool nonzero)
{
    bool zero = true;

    for (size_t i = 0; i < len; i++) {
        if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f')))
            return false;
        zero &= text[i] == '0';
    }
    return !(nonzero && zero);
}

int gw_traceparent_parse(const char *value, struct gw_trace *t)
{
    size_t len = strlen(value);

    /* version "-" trace-id "-" parent-id "-" flags: dashes at 2, 35 and 52. */
    if (len < TRACEPARENT_V00_LEN || !lower_hex(value, 2, false) || strncmp(value, "ff", 2) == 0 ||
        value[2] != '-' || value[35] != '-' || value[52] != '-' ||
        !lower_hex(value + 3, 32, true) || !lower_hex(value + 36, 16, true) ||
        !lower_hex(value + 53, 2, false))
        return -1;
    /* Version 00 is exactly that long; a later one may add fields after a '-'. */
    if (strncmp(value, "00", 2) == 0 ? len != TRACEPARENT_V00_LEN
                                     : len > TRACEPARENT_V00_LEN && value[55] != '-')
        return -1;
    memcpy(t->trace_id, value + 3, 32);
    t->trace_id[32] = '\0';
    memcpy(t->flags, value + 53, 2);
    t->flags[2] = '\0';
    return 0;
}

void gw_traceparent_format(const struct gw_trace *t, char out[GW_TRACEPARENT_LEN])
{
    memcpy(out, "00-", 3);
    memcpy(out + 3, t->trace_id, 32);
    out[35] = '-';
    memcpy(out + 36, t->span_id, 16);
    out[52] = '-';
    memcpy(out + 53, t->flags, 2);
    out[55] = '\0';
}

bool gw_trace_sampled(double sample, uint32_t draw)
{
    /* draw / 2^32 is uniform in [0, 1): below 1 always, below 0 never. */
    return (double)draw < sample * 4294967296.0;
}

void gw_trace_begin(struct gw_trace *t, const char *traceparent, double sample)
{
    unsigned char random[16];

    memset(t, 0, sizeof *t);
    if (traceparent != NULL && gw_traceparent_parse(traceparent, t) == 0) {
        t->continued = true;
    } else if (gw_trace_sampled(sample, gw_random_u32())) {
        /* A trace-id of all zeros is invalid; 2^-128 is no risk worth a loop. */
        gw_random_bytes(random, sizeof random);
        sodium_bin2hex(t->trace_id, sizeof t->trace_id, random, sizeof random);
        memcpy(t->flags, "01", 3);
    } else {
        return;
    }
    gw_random_bytes(random, 8);
    sodium_bin2hex(t->span_id, sizeof t->span_id, random, 8);
}
