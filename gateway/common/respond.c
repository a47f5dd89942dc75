#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "respond.h"

#define PROBLEM_FORMAT \
    "{\"type\":\"about:blank\",\"title\":\"%s\",\"status\":%u,\"detail\":\"%s\"%s%s%s}\n"

static int64_t ceil_seconds(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

void gw_format_policy(char out[GW_FIELD_LEN], const char *route,
                      const struct limiter_params *params)
{
    int64_t window = ceil_seconds(params->per_ns / 1000000);

    snprintf(out, GW_FIELD_LEN, "\"%s\";q=%llu;w=%lld", route,
             (unsigned long long)params->requests, (long long)(window > 0 ? window : 1));
}

void gw_format_ratelimit(char out[GW_FIELD_LEN], const char *route,
                         const struct limiter_decision *decision)
{
    snprintf(out, GW_FIELD_LEN, "\"%s\";r=%llu;t=%lld", route,
             (unsigned long long)decision->remaining,
             (long long)ceil_seconds(decision->reset_ms));
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

size_t gw_json_escape(char *out, size_t cap, const char *text, size_t text_len)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = 0;

    for (size_t i = 0; i < text_len && text[i] != '\0'; i++) {
        unsigned char c = (unsigned char)text[i];
        char piece[6];
        size_t n = 0;

        if (c == '"' || c == '\\') {
            piece[n++] = '\\';
            piece[n++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(piece, "\\u00", 4);
            piece[4] = hex[c >> 4];
            piece[5] = hex[c & 15];
            n = 6;
        } else {
            piece[n++] = (char)c;
        }
        if (len + n >= cap)
            break;
        memcpy(out + len, piece, n);
        len += n;
    }
    if (cap > 0)
        out[len] = '\0';
    return len;
}

char *gw_problem_json(unsigned status, const char *detail, const char *route)
{
    char detail_json[512], route_json[256];
    char *body = NULL;
    size_t len;

    gw_json_escape(detail_json, sizeof detail_json, detail, SIZE_MAX);
    gw_json_escape(route_json, sizeof route_json, route ? route : "", SIZE_MAX);
    len = (size_t)snprintf(NULL, 0, PROBLEM_FORMAT, gw_status_title(status), status, detail_json,
                           route ? ",\"route\":\"" : "", route_json, route ? "\"" : "") + 1;
    body = malloc(len);
    if (body != NULL)
        snprintf(body, len, PROBLEM_FORMAT, gw_status_title(status), status, detail_json,
                 route ? ",\"route\":\"" : "", route_json, route ? "\"" : "");
    return body;
}
