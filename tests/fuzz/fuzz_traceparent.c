/* libFuzzer: traceparent and request-id checks (trace.h) on any value. A traceparent that
 * parses has a lower-case hex trace-id that is not all zeros and two hex flags, and written
 * back as version 00 (with a span id) it parses again to the same trace; a sane request id
 * is 1 to 128 bytes of its charset. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/trace.h"

static bool lower_hex(const char *text, size_t len)
{
    return strlen(text) == len && strspn(text, "0123456789abcdef") == len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), written[GW_TRACEPARENT_LEN];
    struct gw_trace t = {.span_id = "0123456789abcdef"}, again = {0};

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (gw_traceparent_parse(text, &t) == 0) {
        if (!lower_hex(t.trace_id, 32) || strspn(t.trace_id, "0") == 32 || !lower_hex(t.flags, 2))
            abort();
        gw_traceparent_format(&t, written);
        if (strlen(written) != 55 || gw_traceparent_parse(written, &again) != 0 ||
            strcmp(again.trace_id, t.trace_id) != 0 || strcmp(again.flags, t.flags) != 0)
            abort();
    }
    /* A sane id needs no escaping in a header, a log line or JSON. */
    if (gw_request_id_is_sane(text)) {
        if (strlen(text) < 1 || strlen(text) > GW_REQUEST_ID_MAX ||
            strpbrk(text, "\"\\,;<>") != NULL)
            abort();
        for (const char *p = text; *p != '\0'; p++)
            if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
                abort();
    }
    free(text);
    return 0;
}
