#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/respond.h"
#include "gateway/common/text.h"

static int64_t ceil_seconds(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

uint64_t gw_quota(const struct limiter_params *params, int64_t *window)
{
    bool bucket = limiter_algorithm_takes_burst(params->algorithm_id);
    uint64_t quota = bucket && params->burst > 0 ? params->burst : params->requests;
    /* burst * per / requests in ms; both at most LIMITER_MAX_REQUESTS and per at most a
     * year or so, so this stays well inside 128 bits. */
    unsigned __int128 ms =
        (unsigned __int128)quota * (uint64_t)(params->per_ns / 1000000) / params->requests;

    *window = ceil_seconds(ms > INT64_MAX ? INT64_MAX : (int64_t)ms);
    if (*window < 1)
        *window = 1;
    return quota;
}

/* `"name";KEY=value;w=seconds` (policy) or `"name";KEY=value;t=seconds` into `out`. */
static void format_field(char out[GW_FIELD_LEN], const char *name, const char *first,
                         uint64_t value, const char *second, uint64_t seconds)
{
    struct gw_text t = gw_text_on(out, GW_FIELD_LEN - 1);

    gw_text_put(&t, "\"", 1);
    gw_text_str(&t, name);
    gw_text_str(&t, first);
    gw_text_number(&t, value, 1);
    gw_text_str(&t, second);
    gw_text_number(&t, seconds, 1);
    gw_text_finish(&t);
}

void gw_format_policy(char out[GW_FIELD_LEN], const char *name, const struct limiter_params *params)
{
    int64_t window;
    uint64_t quota = gw_quota(params, &window);
    struct gw_text t;

    if (params->algorithm_id != LIMITER_CONCURRENCY) {
        format_field(out, name, "\";q=", quota, ";w=", (uint64_t)window); /* at least 1 */
        return;
    }
    /* A cap on requests in flight has no window: its unit says what q counts. */
    t = gw_text_on(out, GW_FIELD_LEN - 1);
    gw_text_put(&t, "\"", 1);
    gw_text_str(&t, name);
    gw_text_str(&t, "\";q=");
    gw_text_number(&t, quota, 1);
    gw_text_str(&t, ";qu=\"concurrent-requests\"");
    gw_text_finish(&t);
}

int64_t gw_reset_seconds(const struct limiter_params *params,
                         const struct limiter_decision *decision)
{
    int64_t window, reset = ceil_seconds(decision->reset_ms);

    gw_quota(params, &window);
    return reset < window ? reset : window;
}

void gw_format_ratelimit(char out[GW_FIELD_LEN], const char *name,
                         const struct limiter_params *params,
                         const struct limiter_decision *decision)
{
    format_field(out, name, "\";r=", decision->remaining,
                 ";t=", gw_reset_seconds(params, decision));
}

int64_t gw_retry_after_seconds(int64_t retry_after_ms)
{
    int64_t s = ceil_seconds(retry_after_ms);

    return s > 0 ? s : 1;
}

const char *gw_status_title(unsigned status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

/* The length of the well-formed UTF-8 character at `s` (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), of at most `len` bytes; 0 when there is none. */
static size_t utf8_character(const unsigned char *s, size_t len)
{
    unsigned char low = 0x80, high = 0xbf; /* the second byte's range */
    size_t n;

    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (s[0] == 0xe0)
        low = 0xa0;
    else if (s[0] == 0xed)
        high = 0x9f;
    else if (s[0] == 0xf0)
        low = 0x90;
    else if (s[0] == 0xf4)
        high = 0x8f;
    if (len < n || s[1] < low || s[1] > high)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

size_t gw_json_escape(char *out, size_t cap, const char *text, size_t text_len)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = 0, end = strnlen(text, text_len);

    for (size_t i = 0; i < end;) {
        const unsigned char *c = (const unsigned char *)text + i;
        char piece[6];
        size_t n = 0, taken = 1, plain = 0;

        /* A run of printable ASCII other than '"' and '\\' is copied whole. */
        while (i + plain < end && c[plain] >= 0x20 && c[plain] < 0x7f && c[plain] != '"' &&
               c[plain] != '\\')
            plain++;
        if (plain > 0) {
            size_t room = cap > len + 1 ? cap - 1 - len : 0;

            memcpy(out + len, c, plain < room ? plain : room);
            len += plain < room ? plain : room;
            if (plain > room)
                break;
            i += plain;
            continue;
        }
        if (*c == '"' || *c == '\\') {
            piece[n++] = '\\';
            piece[n++] = (char)*c;
        } else if (*c < 0x20 || *c == 0x7f) {
            memcpy(piece, "\\u00", 4);
            piece[4] = hex[*c >> 4];
            piece[5] = hex[*c & 15];
            n = 6;
        } else if ((taken = utf8_character(c, end - i)) > 0) {
            memcpy(piece, c, taken);
            n = taken;
        } else {
            memcpy(piece, "\\ufffd", 6);
            n = 6;
            taken = 1;
        }
        if (len + n >= cap)
            break;
        memcpy(out + len, piece, n);
        len += n;
        i += taken;
    }
    if (cap > 0)
        out[len] = '\0';
    return len;
}

void gw_text_json(struct gw_text *t, const char *text, size_t len, size_t max)
{
    size_t room = (size_t)(t->end - t->at);

    /* gw_json_escape() writes a NUL after what it writes, so it gets no more than the room. */
    t->at += gw_json_escape(t->at, max < room ? max : room, text, len);
}

char *gw_problem_json(unsigned status, const char *detail, const char *route,
                      const char *request_id)
{
    /* The escaped detail, route and id are cut at 511, 255 and 255 bytes: room for all. */
    char text[1280];
    struct gw_text t = gw_text_on(text, sizeof text - 1);
    char *body;
    size_t len;

    gw_text_str(&t, "{\"type\":\"about:blank\",\"title\":\"");
    gw_text_str(&t, gw_status_title(status));
    gw_text_str(&t, "\",\"status\":");
    gw_text_number(&t, status, 1);
    gw_text_str(&t, ",\"detail\":\"");
    gw_text_json(&t, detail, SIZE_MAX, 512);
    gw_text_str(&t, "\"");
    if (route != NULL) {
        gw_text_str(&t, ",\"route\":\"");
        gw_text_json(&t, route, SIZE_MAX, 256);
        gw_text_str(&t, "\"");
    }
    if (request_id != NULL) {
        gw_text_str(&t, ",\"request_id\":\"");
        gw_text_json(&t, request_id, SIZE_MAX, 256);
        gw_text_str(&t, "\"");
    }
    gw_text_str(&t, "}\n");
    len = (size_t)(t.at - text);
    body = malloc(len + 1);
    if (body != NULL) {
        memcpy(body, text, len);
        body[len] = '\0';
    }
    return body;
}
