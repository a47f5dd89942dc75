/*
 * The access log: one JSON object per line per finished request. The line is formatted on the
 * request's thread and handed to the access log's queue (log.h), whose writer thread writes it
 * whole: a reader that stops reading costs log lines (sluice_log_dropped_total{log="access"}),
 * never a request. The query string is left out of the path, and the client key appears at
 * most as a short hash, so no API key ever reaches the log.
 *
 * {"time":"2026-11-30T10:00:00.123Z","request_id":"5f0c6d3e9a1b4c7d8e2f0a1b2c3d4e5f",
 *  "trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","route":"api","method":"GET","path":"/api/items",
 *  "status":200,"decision":"allowed","upstream_status":200,"upstream_ms":1.8,
 *  "duration_ms":2.1,"bytes":512,"client":"203.0.113.7","consumer":"acme","plan":"gold",
 *  "dropped_headers":0,"upstream_error":"","upstream_server":"http://10.0.0.5:8080",
 *  "limit":"","user_agent":"curl/7.88.1","host":"api.example.com",
 *  "decided_ns":1795946400121456789,"keys":{"ip":"9f2c4e1a7b3d5f60","header:x-api-key":"0d1e2f3a4b5c6d7e"},
 *  "tls":"TLS1.3","protocol":"HTTP/1.1"}
 *
 * client is what server.access_log.client says: the client's address as its keys see it
 * (behind a trusted proxy, the X-Forwarded-For address; "" when the connection has no IP
 * peer), a 64-bit BLAKE2b digest of the client key in hex ("" when none was worked out), or
 * "". limit is the name of the limit that denied the request (or, on a dry_run route, would
 * have: decision dry_run_denied), "" otherwise. user_agent is the User-Agent field
 * JSON-escaped, at most GW_ACCESS_AGENT_MAX bytes of it, cut where no UTF-8 character is
 * split; "" when there is none. In every string a byte that is not well-formed UTF-8 is
 * written \ufffd (gw_json_escape()), so that a line is valid JSON whatever a client sent.
 *
 * upstream_error is the last attempt's failure ("dns", "refused", "connect_timeout", "tls",
 * "reset", "timeout", "cut", "too_large", "invalid", "other"), "" when it had none or the
 * gateway gave it up itself (the client gone, a 413 midway, a stop: the forward module);
 * upstream_server the server of that attempt, "" when the request was not forwarded.
 * consumer and plan are "" unless the route's key named a consumer (config.h); "plan" is then
 * the consumer's. request_id is the id the client and the upstream saw in X-Request-Id, and
 * trace_id the W3C trace the request joined or started, "" for none (trace.h).
 *
 * What `sluice simulate` (simulate.h) needs to decide the request again, offline: host is
 * the Host field as sent (at most GW_ACCESS_HOST_MAX bytes escaped; "" when none),
 * decided_ns the limiter clock (ns since the epoch, limiter_now_ns()) at which the limits
 * decided it (0 when they did not: refused earlier, or no IP peer), and keys, for each key
 * source the request was counted under or could be ("ip" always, the route's key, each
 * limit's own: "ip", "header:NAME" with NAME lower case, "query:NAME", "consumer"; see
 * gw_key_source()), the same 64-bit BLAKE2b digest of the key that client's hash mode
 * writes. Never the key itself, whatever server.access_log.client says; {} when no key was
 * worked out. The cost of each limit follows from the method.
 */
#ifndef SLUICE_GATEWAY_ACCESS_LOG_H
#define SLUICE_GATEWAY_ACCESS_LOG_H

#include <stdint.h>

#include "config/config.h"
#include "limiter/limiter.h"

#define GW_ACCESS_AGENT_MAX 256                           /* bytes of user_agent, escaped */
#define GW_ACCESS_HOST_MAX  128                           /* bytes of host, escaped */
#define GW_ACCESS_KEYS_MAX  (LIMITER_MAX_PER_REQUEST + 2) /* ip, the route's, each limit's */

/* The buffer a line is formatted in. A line that does not fit it is not written, so no line
 * of the access log is longer than GW_ACCESS_LINE_CAP - 1 bytes, its newline included. */
#define GW_ACCESS_LINE_CAP 4096

/* One key a request was counted under: its source (gw_key_source()) and the key. */
struct gw_access_key {
    const char *source;
    const char *key;
};

/* A connection's digest of its address key ("ip:..."), made for its first line and reused
 * for the lines after while the key stays the same, instead of a BLAKE2b per line: every
 * line logs the "ip" key, and on one connection it is mostly one address (a trusted proxy's
 * X-Forwarded-For can change it, which is why the key is kept to compare). Zeroed when the
 * connection starts; touched by one thread at a time, as a connection's requests are. */
struct gw_access_memo {
    char key[64]; /* the address key the digest is of, "" until one is made */
    char hash[17];
    char tls[16]; /* the connection's TLS version ("TLS1.3"), "" for plain HTTP */
};

struct gw_access_entry {
    const char *route; /* NULL when no route matched */
    const char *method;
    const char *target; /* the raw request target; the query is dropped here */
    unsigned status;
    const char *decision;
    long upstream_status; /* 0 when the upstream was not asked or did not answer */
    int64_t upstream_ns;  /* time to the upstream's response head; 0 when none */
    int64_t duration_ns;
    uint64_t bytes;             /* body bytes sent to the client */
    const char *client_key;     /* NULL when none was worked out */
    const char *client;         /* its address as keys see it, as text; NULL: unknown, not logged */
    const char *limit;          /* the limit that denied it, or NULL */
    const char *user_agent;     /* the User-Agent field, or NULL */
    const char *consumer;       /* NULL when the key named no consumer */
    const char *plan;           /* the consumer's plan, or NULL */
    unsigned dropped_headers;   /* request fields not forwarded ('_' in the name); 0 if none */
    const char *upstream_error; /* proxy.h's fault name; "" when none */
    const char *upstream_server; /* the last attempt's server URL; "" when none */
    const char *request_id;      /* trace.h: sane, so written as it is */
    const char *trace_id;        /* 32 hex digits; "" when the request has no trace */
    const char *host;            /* the Host field, or NULL */
    int64_t decided_ns;          /* when the limits decided; 0 when they did not */
    int64_t waited_ns;           /* how long it waited for its turn (delay:); 0 when it did not */
    struct gw_access_key keys[GW_ACCESS_KEYS_MAX]; /* a source given twice is logged once */
    size_t n_keys;
    struct gw_access_memo *memo; /* the connection's, or NULL */
    const char *protocol;        /* "HTTP/1.1" or "HTTP/1.0"; "" for a head not read */
};

/* The access log's 16-hex-digit digest of `key` (a 64-bit BLAKE2b) into `out`. */
void gw_access_key_hash(const char *key, char out[17]);

/* Queues the line of `entry` for `fd` (-1: the log is off), its client field as `client`
 * says; never waits on `fd`, which need only stay open for the call. */
void gw_access_log_write(int fd, enum config_access_client client,
                         const struct gw_access_entry *entry);

#endif
