#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "access_log.h"
#include "log.h"
#include "respond.h"

/* The time as "2026-11-30T10:00:00", formatted once a second per thread. */
static const char *utc_seconds(time_t now)
{
    static _Thread_local time_t formatted_for = -1;
    static _Thread_local char text[24];
    struct tm tm;

    if (now != formatted_for) {
        gmtime_r(&now, &tm);
        strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
        formatted_for = now;
    }
    return text;
}

/* Milliseconds from nanoseconds with three decimals, without floating point. */
#define MS_PARTS(ns) (long long)((ns) / 1000000), (long long)((ns) / 1000 % 1000)

void gw_access_log_write(int fd, const struct gw_access_entry *e)
{
    char line[2048], path[1024], route[160], method[48], client[17] = "";
    unsigned char digest[8];
    struct timespec now;
    int len;

    if (fd < 0)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gw_json_escape(path, sizeof path, e->target, strcspn(e->target, "?"));
    gw_json_escape(route, sizeof route, e->route ? e->route : "", SIZE_MAX);
    gw_json_escape(method, sizeof method, e->method, SIZE_MAX);
    if (e->client_key != NULL) {
        crypto_generichash(digest, sizeof digest, (const unsigned char *)e->client_key,
                           strlen(e->client_key), NULL, 0);
        sodium_bin2hex(client, sizeof client, digest, sizeof digest);
    }
    len = snprintf(line, sizeof line,
                   "{\"time\":\"%s.%03ldZ\",\"route\":\"%s\",\"method\":\"%s\",\"path\":\"%s\","
                   "\"status\":%u,\"decision\":\"%s\",\"upstream_status\":%ld,"
                   "\"upstream_ms\":%lld.%03lld,\"duration_ms\":%lld.%03lld,\"bytes\":%llu,"
                   "\"client\":\"%s\",\"dropped_headers\":%u}\n",
                   utc_seconds(now.tv_sec), now.tv_nsec / 1000000, route, method, path, e->status,
                   e->decision, e->upstream_status, MS_PARTS(e->upstream_ns), MS_PARTS(e->duration_ns),
                   (unsigned long long)e->bytes, client, e->dropped_headers);
    if (len < 0 || (size_t)len >= sizeof line)
        return; /* cannot happen with the sizes above; never write half a line */
    gw_log_line(GW_LOG_ACCESS, fd, line, (size_t)len);
}
