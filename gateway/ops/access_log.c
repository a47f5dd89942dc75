#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "access_log.h"
#include "keys.h"
#include "log.h"
#include "respond.h"
#include "trace.h"

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

/* The line is built by appending, not printf: formatting was a good part of what a line
 * cost. `cap` always leaves room for what a line can hold (see gw_access_log_write()). */
struct line {
    char *at, *end;
};

static void put(struct line *l, const char *text, size_t len)
{
    if (len > (size_t)(l->end - l->at))
        len = (size_t)(l->end - l->at);
    memcpy(l->at, text, len);
    l->at += len;
}

static void put_text(struct line *l, const char *text)
{
    put(l, text, strlen(text));
}

static void put_escaped(struct line *l, const char *text, size_t len, size_t max)
{
    l->at += gw_json_escape(l->at, max < (size_t)(l->end - l->at) ? max : (size_t)(l->end - l->at),
                            text, len);
}

static void put_number(struct line *l, unsigned long long n, int min_digits)
{
    char digits[24];
    int i = sizeof digits;

    do {
        digits[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0 || (int)sizeof digits - i < min_digits);
    put(l, digits + i, sizeof digits - (size_t)i);
}

/* Milliseconds with three decimals, without floating point. */
static void put_ms(struct line *l, int64_t ns)
{
    put_number(l, (unsigned long long)(ns / 1000000), 1);
    put(l, ".", 1);
    put_number(l, (unsigned long long)(ns / 1000 % 1000), 3);
}

/* `len`, less the bytes of a UTF-8 character that a cut at `len` split. */
static size_t utf8_boundary(const char *text, size_t len)
{
    size_t lead = len, need;
    unsigned char c;

    while (lead > 0 && len - lead < 3 && ((unsigned char)text[lead - 1] & 0xc0) == 0x80)
        lead--;
    if (lead == 0)
        return len;
    c = (unsigned char)text[lead - 1];
    need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return len - (lead - 1) < need ? lead - 1 : len;
}

void gw_access_key_hash(const char *key, char out[17])
{
    unsigned char digest[8];

    crypto_generichash(digest, sizeof digest, (const unsigned char *)key, strlen(key), NULL, 0);
    sodium_bin2hex(out, 17, digest, sizeof digest);
}

/* The client field, as `how` says: the address as given, or the key's hash made in `hash`. */
static const char *client_field(enum config_access_client how, const struct gw_access_entry *e,
                                char hash[17])
{
    if (how == CONFIG_ACCESS_CLIENT_ADDRESS && e->client != NULL)
        return e->client;
    if (how != CONFIG_ACCESS_CLIENT_HASH || e->client_key == NULL)
        return "";
    gw_access_key_hash(e->client_key, hash);
    return hash;
}

/* "keys":{source:hash,...}, each source once (the first key given for it). */
static void put_keys(struct line *l, const struct gw_access_entry *e)
{
    char hash[17];

    put_text(l, ",\"keys\":{");
    for (size_t i = 0; i < e->n_keys; i++) {
        size_t seen = 0;

        while (seen < i && strcmp(e->keys[seen].source, e->keys[i].source) != 0)
            seen++;
        if (seen < i)
            continue;
        if (i > 0)
            put(l, ",", 1);
        put(l, "\"", 1);
        put_escaped(l, e->keys[i].source, SIZE_MAX, GW_KEY_SOURCE_LEN);
        put_text(l, "\":\"");
        gw_access_key_hash(e->keys[i].key, hash);
        put_text(l, hash);
        put(l, "\"", 1);
    }
    put(l, "}", 1);
}

void gw_access_log_write(int fd, enum config_access_client how, const struct gw_access_entry *e)
{
    char text[4096], hash[17], agent[GW_ACCESS_AGENT_MAX + 1], host[GW_ACCESS_HOST_MAX + 1];
    struct line l = {text, text + sizeof text};
    struct timespec now;
    size_t agent_len, host_len;

    if (fd < 0)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    agent_len = gw_json_escape(agent, sizeof agent, e->user_agent ? e->user_agent : "", SIZE_MAX);
    host_len = gw_json_escape(host, sizeof host, e->host ? e->host : "", SIZE_MAX);
    /* Each escaped field is bounded (path 1 KiB, route 160, method 48, consumer, plan and limit
     * 64, server 512, user_agent 256, request id 128, trace id 32, host 128, keys 10 sources
     * of 48 and their hashes; client is an address or a hash), so the line fits (about
     * 3.8 KiB at most). */
    put_text(&l, "{\"time\":\"");
    put_text(&l, utc_seconds(now.tv_sec));
    put(&l, ".", 1);
    put_number(&l, (unsigned long long)(now.tv_nsec / 1000000), 3);
    put_text(&l, "Z\",\"request_id\":\"");
    put_escaped(&l, e->request_id, SIZE_MAX, GW_REQUEST_ID_LEN);
    put_text(&l, "\",\"trace_id\":\"");
    put_text(&l, e->trace_id);
    put_text(&l, "\",\"route\":\"");
    put_escaped(&l, e->route ? e->route : "", SIZE_MAX, 160);
    put_text(&l, "\",\"method\":\"");
    put_escaped(&l, e->method, SIZE_MAX, 48);
    put_text(&l, "\",\"path\":\"");
    put_escaped(&l, e->target, strcspn(e->target, "?"), 1024);
    put_text(&l, "\",\"status\":");
    put_number(&l, e->status, 1);
    put_text(&l, ",\"decision\":\"");
    put_text(&l, e->decision);
    put_text(&l, "\",\"upstream_status\":");
    put_number(&l, (unsigned long long)(e->upstream_status > 0 ? e->upstream_status : 0), 1);
    put_text(&l, ",\"upstream_ms\":");
    put_ms(&l, e->upstream_ns);
    put_text(&l, ",\"duration_ms\":");
    put_ms(&l, e->duration_ns);
    put_text(&l, ",\"bytes\":");
    put_number(&l, (unsigned long long)e->bytes, 1);
    put_text(&l, ",\"client\":\"");
    put_text(&l, client_field(how, e, hash));
    put_text(&l, "\",\"consumer\":\"");
    put_escaped(&l, e->consumer ? e->consumer : "", SIZE_MAX, 64);
    put_text(&l, "\",\"plan\":\"");
    put_escaped(&l, e->plan ? e->plan : "", SIZE_MAX, 64);
    put_text(&l, "\",\"dropped_headers\":");
    put_number(&l, e->dropped_headers, 1);
    put_text(&l, ",\"upstream_error\":\"");
    put_text(&l, e->upstream_error ? e->upstream_error : "");
    put_text(&l, "\",\"upstream_server\":\"");
    put_escaped(&l, e->upstream_server ? e->upstream_server : "", SIZE_MAX, 512);
    put_text(&l, "\",\"limit\":\"");
    put_escaped(&l, e->limit ? e->limit : "", SIZE_MAX, 65);
    put_text(&l, "\",\"user_agent\":\"");
    put(&l, agent, utf8_boundary(agent, agent_len));
    put_text(&l, "\",\"host\":\"");
    put(&l, host, utf8_boundary(host, host_len));
    put_text(&l, "\",\"decided_ns\":");
    put_number(&l, (unsigned long long)(e->decided_ns > 0 ? e->decided_ns : 0), 1);
    put_keys(&l, e);
    put_text(&l, "}\n");
    if (l.at == l.end)
        return; /* cannot happen with the bounds above; never write half a line */
    gw_log_line(GW_LOG_ACCESS, fd, text, (size_t)(l.at - text));
}
