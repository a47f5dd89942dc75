#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gateway/common/log.h"
#include "gateway/common/respond.h"
#include "gateway/common/text.h"
#include "gateway/common/trace.h"
#include "gateway/identity/keys.h"
#include "gateway/ops/access_log.h"

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

/* Milliseconds with three decimals, without floating point. */
static void put_ms(struct gw_text *l, int64_t ns)
{
    gw_text_number(l, (unsigned long long)(ns / 1000000), 1);
    gw_text_put(l, ".", 1);
    gw_text_number(l, (unsigned long long)(ns / 1000 % 1000), 3);
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

/* The digest of `key` (gw_access_key_hash()): the connection's memo when it holds `key`, else
 * made in `out`, and kept in the memo when `key` is an address key. */
static const char *key_hash(const struct gw_access_entry *e, const char *key, char out[17])
{
    struct gw_access_memo *memo = e->memo;
    size_t len;

    if (memo != NULL && memo->key[0] != '\0' && strcmp(memo->key, key) == 0)
        return memo->hash;
    gw_access_key_hash(key, out);
    len = strlen(key);
    if (memo != NULL && strncmp(key, "ip:", 3) == 0 && len < sizeof memo->key) {
        memcpy(memo->key, key, len + 1);
        memcpy(memo->hash, out, sizeof memo->hash);
    }
    return out;
}

/* The client field, as `how` says: the address as given, or the key's hash made in `hash`. */
static const char *client_field(enum config_access_client how, const struct gw_access_entry *e,
                                char hash[17])
{
    if (how == CONFIG_ACCESS_CLIENT_ADDRESS && e->client != NULL)
        return e->client;
    if (how != CONFIG_ACCESS_CLIENT_HASH || e->client_key == NULL)
        return "";
    return key_hash(e, e->client_key, hash);
}

/* "keys":{source:hash,...}, each source once (the first key given for it). */
static void put_keys(struct gw_text *l, const struct gw_access_entry *e)
{
    char hash[17];

    gw_text_str(l, ",\"keys\":{");
    for (size_t i = 0; i < e->n_keys; i++) {
        size_t seen = 0;

        while (seen < i && strcmp(e->keys[seen].source, e->keys[i].source) != 0)
            seen++;
        if (seen < i)
            continue;
        if (i > 0)
            gw_text_put(l, ",", 1);
        gw_text_put(l, "\"", 1);
        gw_text_json(l, e->keys[i].source, SIZE_MAX, GW_KEY_SOURCE_LEN);
        gw_text_str(l, "\":\"");
        gw_text_str(l, key_hash(e, e->keys[i].key, hash));
        gw_text_put(l, "\"", 1);
    }
    gw_text_put(l, "}", 1);
}

void gw_access_log_write(int fd, enum config_access_client how, const struct gw_access_entry *e)
{
    char text[GW_ACCESS_LINE_CAP], hash[17], agent[GW_ACCESS_AGENT_MAX + 1],
        host[GW_ACCESS_HOST_MAX + 1];
    struct gw_text l = gw_text_on(text, sizeof text);
    struct timespec now;
    size_t agent_len, host_len;

    if (fd < 0)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    agent_len = gw_json_escape(agent, sizeof agent, e->user_agent ? e->user_agent : "", SIZE_MAX);
    host_len = gw_json_escape(host, sizeof host, e->host ? e->host : "", SIZE_MAX);
    /* Each escaped field is bounded (path 1 KiB, route 160, method 48, consumer, plan and limit
     * 64, server 512, user_agent 256, request id 128, trace id 32, host 128, keys 10 sources
     * of 48 and their hashes; client is an address or a hash; tls and protocol 15 and 8), so
     * the line fits (about 3.8 KiB at most). */
    gw_text_str(&l, "{\"time\":\"");
    gw_text_str(&l, utc_seconds(now.tv_sec));
    gw_text_put(&l, ".", 1);
    gw_text_number(&l, (unsigned long long)(now.tv_nsec / 1000000), 3);
    gw_text_str(&l, "Z\",\"request_id\":\"");
    gw_text_json(&l, e->request_id, SIZE_MAX, GW_REQUEST_ID_LEN);
    gw_text_str(&l, "\",\"trace_id\":\"");
    gw_text_str(&l, e->trace_id);
    gw_text_str(&l, "\",\"route\":\"");
    gw_text_json(&l, e->route ? e->route : "", SIZE_MAX, 160);
    gw_text_str(&l, "\",\"method\":\"");
    gw_text_json(&l, e->method, SIZE_MAX, 48);
    gw_text_str(&l, "\",\"path\":\"");
    gw_text_json(&l, e->target, strcspn(e->target, "?"), 1024);
    gw_text_str(&l, "\",\"status\":");
    gw_text_number(&l, e->status, 1);
    gw_text_str(&l, ",\"decision\":\"");
    gw_text_str(&l, e->decision);
    gw_text_str(&l, "\",\"upstream_status\":");
    gw_text_number(&l, (unsigned long long)(e->upstream_status > 0 ? e->upstream_status : 0), 1);
    gw_text_str(&l, ",\"upstream_ms\":");
    put_ms(&l, e->upstream_ns);
    gw_text_str(&l, ",\"duration_ms\":");
    put_ms(&l, e->duration_ns);
    gw_text_str(&l, ",\"bytes\":");
    gw_text_number(&l, (unsigned long long)e->bytes, 1);
    gw_text_str(&l, ",\"client\":\"");
    gw_text_str(&l, client_field(how, e, hash));
    gw_text_str(&l, "\",\"consumer\":\"");
    gw_text_json(&l, e->consumer ? e->consumer : "", SIZE_MAX, 64);
    gw_text_str(&l, "\",\"plan\":\"");
    gw_text_json(&l, e->plan ? e->plan : "", SIZE_MAX, 64);
    gw_text_str(&l, "\",\"dropped_headers\":");
    gw_text_number(&l, e->dropped_headers, 1);
    gw_text_str(&l, ",\"upstream_error\":\"");
    gw_text_str(&l, e->upstream_error ? e->upstream_error : "");
    gw_text_str(&l, "\",\"upstream_server\":\"");
    gw_text_json(&l, e->upstream_server ? e->upstream_server : "", SIZE_MAX, 512);
    gw_text_str(&l, "\",\"limit\":\"");
    gw_text_json(&l, e->limit ? e->limit : "", SIZE_MAX, 65);
    gw_text_str(&l, "\",\"user_agent\":\"");
    gw_text_put(&l, agent, utf8_boundary(agent, agent_len));
    gw_text_str(&l, "\",\"host\":\"");
    gw_text_put(&l, host, utf8_boundary(host, host_len));
    gw_text_str(&l, "\",\"decided_ns\":");
    gw_text_number(&l, (unsigned long long)(e->decided_ns > 0 ? e->decided_ns : 0), 1);
    gw_text_str(&l, ",\"waited_ms\":");
    put_ms(&l, e->waited_ns);
    put_keys(&l, e);
    gw_text_str(&l, ",\"tls\":\"");
    gw_text_str(&l, e->memo != NULL ? e->memo->tls : "");
    gw_text_str(&l, "\",\"protocol\":\"");
    gw_text_str(&l, e->protocol != NULL ? e->protocol : "");
    gw_text_str(&l, "\"}\n");
    if (gw_text_full(&l))
        return; /* cannot happen with the bounds above; never write half a line */
    gw_log_line(GW_LOG_ACCESS, fd, text, (size_t)(l.at - text));
}
