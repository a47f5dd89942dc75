#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "respond.h"

#define PROBLEM_FORMAT                                                                             \
    "{\"type\":\"about:blank\",\"title\":\"%s\",\"status\":%u,\"detail\":\"%s\"%s%s}\n"

static int64_t ceil_seconds(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

uint64_t gw_quota(const struct limiter_params *params, int64_t *window)
{
    bool bucket =
        strcmp(params->algorithm, "token_bucket") == 0 || strcmp(params->algorithm, "gcra") == 0;
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

void gw_format_policy(char out[GW_FIELD_LEN], const char *name, const struct limiter_params *params)
{
    int64_t window;
    uint64_t quota = gw_quota(params, &window);

    snprintf(out, GW_FIELD_LEN, "\"%s\";q=%llu;w=%lld", name, (unsigned long long)quota,
             (long long)window);
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
    snprintf(out, GW_FIELD_LEN, "\"%s\";r=%llu;t=%lld", name,
             (unsigned long long)decision->remaining,
             (long long)gw_reset_seconds(params, decision));
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
        size_t n = 0, taken = 1;

        if (*c == '"' || *c == '\\') {
            piece[n++] = '\\';
            piece[n++] = (char)*c;
        } else if (*c < 0x20 || *c == 0x7f) {
            memcpy(piece, "\\u00", 4);
            piece[4] = hex[*c >> 4];
            piece[5] = hex[*c & 15];
            n = 6;
        } else if (*c < 0x80) {
            piece[n++] = (char)*c;
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

char *gw_problem_json(unsigned status, const char *detail, const char *route,
                      const char *request_id)
{
    char detail_json[512], json[256], route_part[288] = "", id_part[288] = "";
    char *body = NULL;
    size_t len;

    gw_json_escape(detail_json, sizeof detail_json, detail, SIZE_MAX);
    if (route != NULL) {
        gw_json_escape(json, sizeof json, route, SIZE_MAX);
        snprintf(route_part, sizeof route_part, ",\"route\":\"%s\"", json);
    }
    if (request_id != NULL) {
        gw_json_escape(json, sizeof json, request_id, SIZE_MAX);
        snprintf(id_part, sizeof id_part, ",\"request_id\":\"%s\"", json);
    }
    len = (size_t)snprintf(NULL, 0, PROBLEM_FORMAT, gw_status_title(status), status, detail_json,
                           route_part, id_part) +
          1;
    body = malloc(len);
    if (body != NULL)
        snprintf(body, len, PROBLEM_FORMAT, gw_status_title(status), status, detail_json,
                 route_part, id_part);
    return body;
}
