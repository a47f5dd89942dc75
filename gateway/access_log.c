#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "access_log.h"
#include "respond.h"

void gw_access_log_write(int fd, const struct gw_access_entry *e)
{
    char line[4096], path[2048], route[256], method[64], when[32], client[17] = "";
    unsigned char digest[8];
    struct timespec now;
    struct tm tm;
    size_t path_len = strcspn(e->target, "?");
    char raw_path[2048];
    int len;

    if (fd < 0)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(raw_path, sizeof raw_path, "%.*s", (int)path_len, e->target);
    gw_json_escape(path, sizeof path, raw_path);
    gw_json_escape(route, sizeof route, e->route ? e->route : "");
    gw_json_escape(method, sizeof method, e->method);
    if (e->client_key != NULL) {
        crypto_generichash(digest, sizeof digest, (const unsigned char *)e->client_key,
                           strlen(e->client_key), NULL, 0);
        sodium_bin2hex(client, sizeof client, digest, sizeof digest);
    }
    len = snprintf(line, sizeof line,
                   "{\"time\":\"%s.%03ldZ\",\"route\":\"%s\",\"method\":\"%s\",\"path\":\"%s\","
                   "\"status\":%u,\"decision\":\"%s\",\"upstream_status\":%ld,"
                   "\"upstream_ms\":%.3f,\"duration_ms\":%.3f,\"bytes\":%llu,\"client\":\"%s\"}\n",
                   when, now.tv_nsec / 1000000, route, method, path, e->status, e->decision,
                   e->upstream_status, e->upstream_ms < 0 ? 0 : e->upstream_ms, e->duration_ms,
                   (unsigned long long)e->bytes, client);
    if (len < 0 || (size_t)len >= sizeof line)
        return; /* cannot happen with the sizes above; never write half a line */
    if (write(fd, line, (size_t)len) < 0)
        return; /* a full disk must not stop the gateway */
}
