#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "respond.h"

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
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Error";
    }
}

/* Appends `text` to `out` as the inside of a JSON string. */
static void json_escape(FILE *out, const char *text)
{
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(out, "\\u%04x", *c);
        else
            fputc(*c, out);
    }
}

char *gw_problem_json(unsigned status, const char *detail, const char *route)
{
    char *body = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&body, &len);

    if (out == NULL)
        return NULL;
    fprintf(out, "{\"type\":\"about:blank\",\"title\":\"%s\",\"status\":%u,\"detail\":\"",
            gw_status_title(status), status);
    json_escape(out, detail);
    fputc('"', out);
    if (route != NULL) {
        fputs(",\"route\":\"", out);
        json_escape(out, route);
        fputc('"', out);
    }
    fputs("}\n", out);
    if (fclose(out) != 0) {
        free(body);
        return NULL;
    }
    return body;
}
