/*
 * config: sluice's YAML file to a validated, immutable `struct config`.
 *
 * config_load() parses the whole file with libyaml's document API, walks it against tables of
 * known keys (one table per section), fills in defaults and checks every value, collecting each
 * problem as "FILE:LINE:COL: message" rather than stopping at the first. A config is either
 * wholly valid or not returned at all, so the gateway never runs half a file. Durations are
 * kept in nanoseconds, sizes in bytes. Nothing here opens a socket.
 *
 *   server:   listen, admin_listen, trusted_proxies, max_connections, max_connections_per_ip,
 *             client_timeout, max_body, max_header_size, max_response_header_size,
 *             drain_timeout, park_idle_after, watch_config,
 *             access_log {path, client}, underscores_in_headers, upstream_idle_timeout,
 *             upstream_max_idle, mode, workers, consumer_header, headers,
 *             ready_needs_upstreams, proxy_protocol, proxy_protocol_from,
 *             tls {cert, key, min_version, ciphers, certificates [{cert, key}]}
 *   log:      format, level
 *   limiter:  max_clients, store, redis {address, password, db, timeout, prefix, lease,
 *             refusal_cache}, replicas,
 *             on_store_error, max_memory
 *   routes:   name, match {path_prefix, methods, host}, upstream (a URL, the name of one of
 *             upstreams:, or {servers, balance, max_fails, fail_window, fail_timeout, fail_on,
 *             health_check {path, interval, timeout, healthy, unhealthy, expect_status}}),
 *             retries {attempts, on, budget}, strip_prefix, host, set_headers, remove_headers,
 *             timeout, connect_timeout, key, ipv6_prefix, limit {algorithm, requests, per,
 *             burst, key, cost, count, delay {max, queue}} (or a list of such limits, each
 *             with a name), store,
 *             tls_verify, proxy, plan, plans, unknown_key, headers, on_limit {status,
 *             body_file, content_type}
 *   upstreams: NAME: an upstream as a route's upstream: (a URL, or {servers, ...})
 *   plans:    NAME: a limit as a route's limit: (one mapping, or a list of named ones)
 *   consumers: a list of {name, key, plan}
 *   consumers_file: a YAML file holding `consumers:` and such a list, and nothing else: up to
 *             CONFIG_MAX_CONSUMERS of them in CONFIG_MAX_CONSUMERS_FILE bytes, read as a
 *             stream (no ${VAR} there: give keys as sha256:), watched like the config itself
 *   tracing:  sample
 *
 * and the keys the gateway's modules own (blocks.h), read into each module's block of a route
 * or of server:: server.deny and a route's deny (the access module), a route's exempt and
 * dry_run (the limit module).
 *
 * Request ids and tracing (gateway/common/trace.h). tracing.sample (a number from 0 to 1,
 * default 0) is the chance that a request arriving without a valid W3C traceparent starts a
 * new trace (sent upstream as traceparent, sampled); 0 starts none, 1 one per request. A valid
 * traceparent is always continued. It takes effect on reload like everything else.
 *
 * Consumers and plans. A plan is a named set of limits; a route takes one as its limits with
 * `plan: NAME` instead of `limit:`, and may give its own version of any plan (`plans: {gold:
 * [...]}`). A consumer is a client known by its API key, the value of the route's key
 * (header:NAME or query:NAME): `{name: acme, key: "${ACME_KEY}", plan: gold}`, or `key:
 * "sha256:<64 hex digits>"` so that the file need not hold the key itself. Only the SHA-256
 * digest of a key is kept. With consumers configured, a route keyed by a header or query
 * parameter counts a known key's requests under the consumer's name and the route's version
 * of its plan; a key no consumer holds, or none, is answered 401 (unknown_key: reject, the
 * default then) or counted by its address under the route's version of the plan named
 * "anonymous", or the route's own limits without one (unknown_key: anonymous). Without
 * consumers, a key is counted by its value as before. server.consumer_header (unset: none)
 * names a field sent upstream with the consumer's name; what a client sends in that field is
 * never forwarded.
 *
 * A key (ip | header:NAME | query:NAME) says whom a request is counted for. The route's key is
 * the default for each of its limits; a limit that names its own counts under that instead,
 * so one route can hold each API key to 100 a minute and each address to 300 whatever keys
 * it sends. Every limit ends up with its key filled in.
 *
 * server.underscores_in_headers (default false): the gateway drops request header fields
 * whose name holds '_' before forwarding, as nginx does, because CGI and WSGI upstreams read
 * X_API_Key and X-API-Key as the same variable and a client could pass one off as the other.
 * true forwards them. While false, a key header:NAME with '_' in NAME is an error, since that
 * header is one the gateway does not trust.
 *
 * log: {format: text | json, level: debug | info | warn | error} (defaults text, info): the
 * process log on stderr; both take effect on reload, from the next line.
 * server.access_log: stdout (default) | off | FILE, or {path: the same, client: address |
 * hash | none} (defaults stdout, address): what the access log's `client` field holds.
 *
 * server.mode: thread_per_connection (default) or event; server.workers: the event loops in
 * event mode (default: one per online core, 1 to 256). See gateway/front/server.h.
 *
 * server.proxy_protocol: off (default), v1, v2 or any. When on, every connection to the
 * listener must open with a PROXY protocol header of that version (any: either), sent by a
 * peer in server.proxy_protocol_from (CIDRs; required then); the address it carries is the
 * client's from then on. See gateway/front/listener.h.
 *
 * Any scalar value may use ${VAR} or ${VAR:-default} (the default also when VAR is empty);
 * a variable that is unset and has no default is an error at its position. ${request.NAME} is
 * no variable: it is left as written, for set_headers: (below); elsewhere the value's own
 * checks refuse it.
 *
 * Upstreams. A route's upstream: is a URL, one server, or {servers: [...], ...}: 1 to
 * CONFIG_MAX_SERVERS servers, each a URL or {url, weight} (weight 1 to 1000, default 1), no
 * URL twice. A URL is http(s)://host[:port][/base] and nothing more; the host is kept in lower
 * case, the base path without trailing slashes. balance: round_robin (default, by weight),
 * least_request or random_two. Passive health: a server that fails in a way fail_on names
 * (connect_failure, timeout, reset, 502, 503, 504; default the first three; [] none) max_fails
 * times (default 3, 0 to 1000; 0: never) within fail_window (default 10s, 1s to 1h) is skipped
 * for fail_timeout (default 10s, 1s to 1h). Active health, only with health_check: {path}:
 * GET path on each server every interval (default 5s, 100ms to 1h), each within timeout
 * (default 2s, 10ms to 1h, at most the interval); an answer in expect_status (default [200],
 * 1 to 32 codes) is healthy, anything else not, and healthy (default 2) or unhealthy (default
 * 3) results in a row (1 to 100) flip a server. These defaults hold for a URL upstream too.
 * The top-level upstreams: {NAME: upstream} are shared: a route with `upstream: NAME` (a plain
 * name, never a URL, since a URL holds ':') uses that one, and every route naming it shares
 * one health state per server (one active check, one count of passive failures), which holds
 * only if they reach its servers alike: the routes naming one must agree on proxy and
 * tls_verify (its checks use the first one's). An upstream no route names is a warning.
 * retries: {attempts (tries in all: default 2, 1 to 10), on (as fail_on; default
 * [connect_failure, reset]), budget (default 20%, 0 to 100)}; without retries:, one attempt.
 * strip_prefix: true (default false) takes the matched path_prefix off the forwarded path.
 * upgrades: [TOKEN, ...] (default [websocket]; [] for none; at most CONFIG_MAX_UPGRADES, each a
 * token of at most 31 bytes, kept in lower case; h2c is refused, since it would carry HTTP/2
 * requests past the limiter) names the Upgrade protocols a request may switch its connection
 * to; tunnel_idle_timeout (default 1h, 1s to 1 day) closes a tunnel that passed no byte
 * that long.
 * host: the Host the upstream sees: preserve (the client's; default), upstream (the server's
 * authority: its host, and :port unless the scheme's own) or NAME[:port] (kept in lower case;
 * not match.host, which chooses requests). set_headers: {NAME: value} (at most 64) sets fields
 * on forwarded requests, each value one line of at most 1024 bytes that may hold
 * ${request.client_addr}, ${request.consumer} and ${request.id}, filled in per request;
 * remove_headers: [NAME, ...] (1 to 64) drops fields from them. Neither may name Host (host:
 * says it), Content-Length or Transfer-Encoding; set_headers: not Connection, Keep-Alive,
 * Upgrade, TE, Trailer, Proxy-Connection, Expect or X-Forwarded-For either (hop-by-hop, or the
 * gateway's own). server.ready_needs_upstreams (default true): /readyz answers 503 while some
 * route has no server believed healthy.
 *
 * Upstream connections: a request head larger than server.max_header_size (default 16KiB,
 * 4KiB to 1MiB) is answered 431, an upstream's response head larger than
 * server.max_response_header_size (default 16KiB, 4KiB to 1MiB) 502. Idle upstream
 * connections are kept for reuse, at most server.upstream_max_idle per upstream (default 64, 1 to
 * 65536), each closed once idle longer than
 * server.upstream_idle_timeout (default 60s, 1s to 1h). A route's proxy: (http://, https:// or
 * socks5://host:port, nothing else in the URL) sends its upstream requests through that
 * forward proxy; without one, or with proxy: "" (say "${PROXY:-}"), the route uses no proxy
 * at all, whatever http_proxy, HTTPS_PROXY or ALL_PROXY say. (Its URL is checked with
 * libcurl's URL parser, the one that will use it: the one place config/ uses libcurl.)
 *
 * server.tls (unset: plain HTTP): the listener speaks only TLS. cert and key (together) name
 * the first certificate, certificates: [{cert, key}, ...] (at least one) more, or all of them
 * without cert/key; paths relative to the config file's directory. Each file must exist and
 * parse (PEM) and each key match its certificate (config/tls.h, read with GnuTLS: the one
 * place config/ uses it), else an error at the line naming the file; with neither cert/key nor
 * certificates, an error at tls:. min_version: "1.2" (default) or "1.3". ciphers (default
 * unset, "NORMAL"): a GnuTLS priority string used as the base, to which the versions are
 * appended; one gnutls_priority_init() refuses is an error at its line.
 *
 * What newcomers get wrong is named where it is. A route's methods: are RFC 9110's (GET,
 * HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE) and PATCH, in any case, kept in capitals;
 * any other is an error listing them, as is one a cost: names (in capitals there). A limit lacking
 * algorithm, requests or per is told which; per is 1ms to 366d. server.max_body is at most 64GiB:
 * bodies are streamed, so the bound is no memory's but catches a slipped unit. limiter.max_memory
 * (default 256MiB, 1MiB to 1TiB) bounds what one sliding_window_log limit may need at worst,
 * requests x 8 B x limiter.max_clients; over it, the error gives the figure and suggests the
 * sliding window counter. An unknown key that differs from a known one of its section only in case,
 * or by at most two edits (and is nearer to it than to any other), gets "did you mean". What is
 * legal but surely unintended is a warning, config->warnings, which does not make the config
 * invalid: a route that an earlier one shadows (the same path_prefix, a superset of its
 * methods or any, its host or any: gateway/routing/routes.c takes the longest prefix, the
 * first of equals), naming both lines.
 *
 * The file is untrusted input as far as cost goes (a reload runs on the signal thread), so
 * every dimension is bounded and checked before anything is built: at most CONFIG_MAX_FILE
 * bytes; collections nested at most CONFIG_MAX_DEPTH deep; at most CONFIG_MAX_ITEMS keys in one
 * mapping or items in one list; at most CONFIG_MAX_SCALAR bytes in a key or value (also once
 * ${VAR} is expanded), and no NUL in one; at most CONFIG_MAX_ROUTES routes and
 * LIMITER_MAX_PER_REQUEST limits per route. YAML aliases (*name) are refused: libyaml's
 * document shares an aliased node wherever it is named (and an anchor is registered before its
 * own children, so `&a [*a]` is a cycle), which lets a few hundred KiB expand to gigabytes of
 * config, and sluice's schema has no use for them (unknown keys are errors). YAML 1.1's merge
 * key (<<: *defaults), which libyaml leaves as a plain key, is refused at its << with the way
 * to share settings instead (plans:): merging would copy a mapping once per use, the same
 * expansion again. The shape is checked on libyaml's event stream first, which stops at the first
 * collection nested too deep, since libyaml's scanner costs time quadratic in the nesting depth;
 * a file with any shape problem is not walked further. Otherwise the walk visits each node a
 * bounded number of times, and repeated keys are found by sorting (n log n), so a load costs
 * time and memory linear in the file up to a log factor: about 0.1 s and 35 MB for the worst
 * 1 MiB file, most of it libyaml reading the text twice.
 * Errors are collected, but only the first CONFIG_MAX_ERRORS are listed, followed by a count
 * of the rest.
 */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limiter/limiter.h"

/* An address block such as 10.0.0.0/8 or 2001:db8::/32. IPv4 is kept as 4 bytes. */
struct config_cidr {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    unsigned prefix_len;
};

struct config_cidrs {
    struct config_cidr *items;
    size_t n;
};

/* host:port, host being a name, an IPv4 address or an IPv6 address without brackets. */
struct config_endpoint {
    char *host;
    uint16_t port;
};

enum config_key_kind { CONFIG_KEY_IP, CONFIG_KEY_HEADER, CONFIG_KEY_QUERY };

/* Where client states live: in this process, or shared by every replica in Redis. */
enum config_store { CONFIG_STORE_MEMORY, CONFIG_STORE_REDIS };

/* What a route in Redis does while Redis is down or slow. */
enum config_mode {
    CONFIG_MODE_THREAD_PER_CONNECTION, /* a thread per client connection (default) */
    CONFIG_MODE_EVENT,                 /* server.workers event loops */
};

/* server.proxy_protocol: which PROXY protocol header versions the listener reads. */
enum config_proxy_protocol {
    CONFIG_PROXY_PROTOCOL_OFF, /* none: connections start with HTTP (default) */
    CONFIG_PROXY_PROTOCOL_V1,  /* the text header, "PROXY TCP4 ..." */
    CONFIG_PROXY_PROTOCOL_V2,  /* the binary header */
    CONFIG_PROXY_PROTOCOL_ANY, /* either */
};

/* log.format: how the process log (stderr) writes a line. */
enum config_log_format {
    CONFIG_LOG_TEXT, /* "TIME LEVEL message" (default) */
    CONFIG_LOG_JSON, /* {"time":...,"level":...,"msg":...} */
};

/* log.level: the least severe lines written; in this order. */
enum config_log_level { CONFIG_LOG_DEBUG, CONFIG_LOG_INFO, CONFIG_LOG_WARN, CONFIG_LOG_ERROR };

/* server.access_log.client: what the access log's `client` field holds. */
enum config_access_client {
    CONFIG_ACCESS_CLIENT_ADDRESS, /* the client's address as keys see it (default) */
    CONFIG_ACCESS_CLIENT_HASH,    /* a 64-bit digest of the client key */
    CONFIG_ACCESS_CLIENT_NONE,    /* "" */
};

enum config_store_error {
    CONFIG_ON_STORE_ERROR_LOCAL, /* limit in this process, quota divided by replicas */
    CONFIG_ON_STORE_ERROR_ALLOW,
    CONFIG_ON_STORE_ERROR_DENY,
};

/* What a request of one method costs a limit (cost:). */
struct config_cost {
    char *method; /* upper case */
    uint64_t units;
};

/* count: which answers a limit's charge stands for; the others are given back
 * (limiter_refund()) once the answer's status is known. Bit (status - 100) of `bits` is set
 * for each status from 100 to 599 that counts. Not `set`: every answer counts. */
struct config_count {
    bool set;
    uint64_t bits[8];
};

/* Whether an answer of `status` counts under `count`: always without a count:, and for no
 * status (0: no answer came, so the charge is kept). */
bool config_count_holds(const struct config_count *count, unsigned status);

/* One named limit of a route. `limit:` as a single mapping gives one limit named after the
 * route; as a list, each item names itself. */
/* delay: {max, queue}: a request this limit (with the others of its set) would deny, but
 * would allow within `max`, waits for its turn rather than being denied, its place kept at
 * once (limiter_reserve_all()); at most `queue` wait at once for this limit, beyond which
 * requests are denied as without it. Only the buckets keep places, and every limit of a set
 * with a delay must be one (config refuses others). */
#define CONFIG_DEFAULT_DELAY_QUEUE 100
struct config_delay {
    bool set;
    int64_t max_ns; /* 1 ms to 60 s */
    uint32_t queue; /* 1 to 100,000; default 100 */
};

struct config_limit {
    char *name;
    struct limiter_params params;  /* params.algorithm is owned by the config */
    enum config_key_kind key_kind; /* its own key:, or else the route's */
    char *key_name; /* the header or query parameter, owned by the config; NULL for ip */
    bool key_set;   /* it names its own key */
    /* It counts a client under its route's key (on a route that names consumers, under the
     * consumer's name): its key is the route's, inherited or named alike (config_same_key()).
     * Set at load, for the route's own limits and its version of each plan. */
    bool route_key;
    /* cost: {POST: 5, default: 1}: the units a request of each method takes of this limit
     * (limiter_decide_all_cost()), from 1 to what the limit lets through at once. */
    struct config_cost *costs;
    size_t n_costs;
    uint64_t default_cost; /* every other method's; 1 unless cost: says default */
    struct config_count count;
    struct config_delay delay;
};

/* A named set of limits: one of the top-level plans:, or a route's own version of one. */
struct config_plan {
    char *name;
    struct config_limit *limits;
    size_t n_limits;
};

/* A client known by its API key. Only the key's SHA-256 digest is kept. */
struct config_consumer {
    char *name;
    char *plan; /* one of config->plans */
    unsigned char key_sha256[32];
};

/* Which rate-limit fields answers carry (gateway/common/respond.h). */
enum config_headers {
    CONFIG_HEADERS_IETF,        /* RateLimit-Policy and RateLimit (default) */
    CONFIG_HEADERS_X_RATELIMIT, /* X-RateLimit-Limit, -Remaining, -Reset */
    CONFIG_HEADERS_BOTH,
    CONFIG_HEADERS_NONE, /* Retry-After alone, on a 429 */
};

/* What a route does with a key that no consumer holds (or no key at all). */
enum config_unknown_key {
    CONFIG_UNKNOWN_KEY_ANONYMOUS, /* count it by its address, under the anonymous plan */
    CONFIG_UNKNOWN_KEY_REJECT,    /* answer 401 */
};

/* One server of a route's upstream. */
struct config_server {
    char *url;       /* scheme://host:port/base as normalised: the `server` label and logs */
    char *origin;    /* scheme://host:port, no trailing slash */
    char *base_path; /* "" or "/base", prepended to every forwarded path */
    char *authority; /* host[:port] as a Host field names it (the port left out when it is
                      * the scheme's default); host: upstream sends this */
    uint32_t weight; /* 1 to 1000; 1 unless the server says */
};

/* upstream.balance: how a request's server is chosen among those believed healthy. */
enum config_balance {
    CONFIG_BALANCE_ROUND_ROBIN,   /* in turn, by weight, interleaved (default) */
    CONFIG_BALANCE_LEAST_REQUEST, /* two drawn at random, the fewer in flight per weight */
    CONFIG_BALANCE_RANDOM_TWO,    /* two drawn at random by weight, the fewer in flight */
};

#define CONFIG_MAX_SENTINELS 8  /* in limiter.redis.sentinels */
#define CONFIG_MAX_UPGRADES  8  /* protocols in a route's upgrades: */
#define CONFIG_UPGRADE_LEN   32 /* a protocol name, with its NUL */

/* Upstream outcomes, as upstream.fail_on and retries.on name them. */
#define CONFIG_FAIL_CONNECT (1u << 0) /* connect_failure: dns, refused, connect timeout, tls */
#define CONFIG_FAIL_TIMEOUT (1u << 1) /* timeout: no response head in time */
#define CONFIG_FAIL_RESET   (1u << 2) /* reset: the connection dropped before a head came */
#define CONFIG_FAIL_502     (1u << 3)
#define CONFIG_FAIL_503     (1u << 4)
#define CONFIG_FAIL_504     (1u << 5)

/* route.host: the Host field the upstream sees. */
enum config_host_mode {
    CONFIG_HOST_PRESERVE, /* the client's (default) */
    CONFIG_HOST_UPSTREAM, /* the chosen server's authority; TLS SNI follows */
    CONFIG_HOST_NAME,     /* config_route.forwarding.host_name */
};

/* A field set on forwarded requests: `value` may hold ${request.client_addr},
 * ${request.consumer} and ${request.id}, filled in per request. */
struct config_set_header {
    char *name;
    char *value;
};

/* How a route's requests are forwarded (config/forward.c). */
struct config_forwarding {
    bool strip_prefix; /* the matched path_prefix is taken off before the base path goes on */
    enum config_host_mode host_mode;
    char *host_name; /* host: NAME */
    struct config_set_header *set_headers;
    size_t n_set_headers;
    char **remove_headers; /* field names, dropped from forwarded requests */
    size_t n_remove_headers;
    /* upgrades: the Upgrade protocols proxied as tunnels (lower case; default websocket), and
     * how long a tunnel may pass no byte before it is closed. */
    char upgrades[CONFIG_MAX_UPGRADES][CONFIG_UPGRADE_LEN];
    size_t n_upgrades;
    int64_t tunnel_idle_timeout_ns;
};

/* An upstream: its servers, how one is chosen, and how their health is judged. A route's
 * own, or one of the top-level upstreams: that routes name and share. */
struct config_upstream {
    char *name; /* upstreams: NAME; NULL for a route's own */
    /* Named: the first route that names it (the one whose settings its health checks use);
     * SIZE_MAX while none does. */
    size_t first_route;
    struct config_server *servers;
    size_t n_servers; /* 1 to CONFIG_MAX_SERVERS */
    enum config_balance balance;
    /* Passive health: a server failing (fail_on) max_fails times within fail_window is skipped
     * for fail_timeout, then given one request. max_fails 0: never skipped. */
    struct {
        uint32_t max_fails;
        int64_t fail_window_ns, fail_timeout_ns;
        unsigned fail_on; /* CONFIG_FAIL_* */
    } passive;
    /* Active health: GET path on each server every interval (off unless health_check:). */
    struct {
        bool enabled;
        char *path;
        int64_t interval_ns, timeout_ns;
        uint32_t healthy, unhealthy; /* consecutive results that flip a server */
        unsigned *expect_status;     /* default {200} */
        size_t n_expect_status;
    } health_check;
};

/* The blocks of keys the gateway's modules may register (blocks.h). */
#define CONFIG_BLOCKS_MAX 16

struct config_route {
    char *name;
    char *path_prefix;
    char **methods; /* upper case; NULL-terminated; NULL when any method matches */
    char *host;     /* lower case, no port; NULL when any host matches */
    /* upstream: a URL (one server), {servers: [...], ...}, or the name of one of upstreams:
     * (then a copy of it, its name kept). */
    struct config_upstream upstream;
    /* retries: at most `attempts` tries in all (1: no retry) of an idempotent request, on
     * another server when there is one, for the outcomes in `on`, while retries stay within
     * budget_percent of the route's requests. */
    struct {
        uint32_t attempts;
        unsigned on; /* CONFIG_FAIL_* */
        uint32_t budget_percent;
    } retries;
    int64_t timeout_ns;
    int64_t connect_timeout_ns;
    struct config_forwarding forwarding;
    enum config_key_kind key_kind; /* the default for limits that name no key */
    char *key_name;                /* the header or query parameter; NULL for ip */
    uint32_t ipv6_prefix_len;
    struct config_limit *limits; /* all must allow a request; NULL when unlimited */
    size_t n_limits;
    enum config_store store; /* limiter.store unless the route sets its own */
    bool store_set;
    bool tls_verify;
    char *proxy; /* scheme://host:port of a forward proxy; NULL: none, not even from the
                  * environment */
    char *plan;  /* plan: the plan `limits` were copied from; NULL for an inline limit: */
    /* One per config->plans, in that order: the route's own version where it has one, else
     * the top-level plan, each limit's key filled in as for `limits`. NULL with no plans. */
    struct config_plan *plans;
    size_t n_plans;            /* entries in `plans`: while loading, the route's own plans: */
    bool identifies_consumers; /* consumers are configured and its key is a header or query */
    enum config_unknown_key unknown_key;
    bool unknown_key_set;
    int anonymous_plan;          /* unknown keys count under plans[anonymous_plan]; -1: `limits` */
    enum config_headers headers; /* its own headers:, or else server.headers */
    bool headers_set;
    /* on_limit: what a denied request is answered: 429 (default) or 503, and the body of
     * body_file (read at load) with its content_type; NULL body: the problem+json one. */
    struct {
        unsigned status;
        char *body;
        size_t body_len;
        char *content_type;
    } on_limit;
    void *blocks[CONFIG_BLOCKS_MAX]; /* the modules' own keys (blocks.h), by slot */
};

/* server.tls: the lowest TLS version accepted (1.0 and 1.1 never are). */
enum config_tls_version { CONFIG_TLS_1_2, CONFIG_TLS_1_3 };

/* One certificate of server.tls: file paths, relative ones made relative to the config's
 * directory. */
struct config_tls_cert {
    char *cert, *key;
};

struct config_tls {
    bool on;                       /* server.tls is set: the listener speaks only TLS */
    struct config_tls_cert *certs; /* cert/key first when given, then certificates: in order */
    size_t n_certs;
    enum config_tls_version min_version;
    char *ciphers;    /* the priority string's base as written, or NULL for "NORMAL" */
    char *priorities; /* the whole GnuTLS priority string (config/tls.h); NULL when off */
};

/* The admin listener's credential: a bearer token, from server.admin_token (where ${VAR} reads
 * it from the environment) or server.admin_token_file (its first line), read at start and on
 * every reload; 16 to 4096 characters of RFC 6750's b64token. The quota endpoints need it,
 * and are off without it (admin_quota: on with a token unless written false); /metrics needs it
 * too when metrics_need_token is set. admin_quota written true with no token is refused on an
 * admin_listen that is not a loopback address. */
struct config_admin {
    char *token;      /* NULL: none */
    char *token_file; /* admin_token_file's path, watched with the config; or NULL */
    bool quota;       /* GET/DELETE /quota and POST /quota/grant answer */
    bool metrics_need_token;
};

struct config {
    char *path;
    struct {
        struct config_endpoint listen;
        struct config_endpoint admin_listen; /* host NULL when not set */
        struct config_admin admin;
        struct config_cidrs trusted_proxies;
        enum config_headers headers; /* the rate-limit fields of routes that name none */
        uint32_t max_connections;
        uint32_t max_connections_per_ip; /* 0: no cap */
        int64_t client_timeout_ns;
        uint64_t max_body;
        uint64_t max_header_size;          /* the largest request head; 431 beyond */
        uint64_t max_response_header_size; /* the largest upstream response head; 502 beyond */
        int64_t drain_timeout_ns;
        int64_t
            park_idle_after_ns; /* event mode: an idle connection leaves libmicrohttpd (0: never) */
        bool watch_config;
        char *access_log; /* "stdout", "off", or a file path */
        enum config_access_client access_log_client;
        bool underscores_in_headers;      /* forward header names with '_' (default: drop them) */
        int64_t upstream_idle_timeout_ns; /* an idle upstream connection is closed after this */
        uint32_t upstream_max_idle;       /* idle upstream connections kept, per upstream */
        enum config_mode mode;            /* needs a restart to change */
        uint32_t workers;      /* event loops in event mode; 0 until loaded: one per core */
        char *consumer_header; /* the field that names a request's consumer upstream, or NULL */
        /* /readyz answers 503 while some route has no server believed healthy (default
         * true); false: upstream health does not change readiness. */
        bool ready_needs_upstreams;
        /* The PROXY protocol header every connection must open with (off: none); only peers
         * in proxy_protocol_from may connect then. Needs a restart to change. */
        enum config_proxy_protocol proxy_protocol;
        struct config_cidrs proxy_protocol_from;
        struct config_tls tls; /* off unless server.tls is set */
    } server;
    void *server_blocks[CONFIG_BLOCKS_MAX]; /* the modules' own keys of server: (blocks.h) */
    struct {
        enum config_log_format format;
        enum config_log_level level; /* default info */
    } log;
    uint32_t max_clients;
    uint64_t max_memory; /* bytes a sliding_window_log limit may need at worst (limiter.h) */
    enum config_store store;
    struct {
        struct config_endpoint address;
        /* Sentinel: the sentinels asked for the address of the master they call `master`,
         * instead of `address` (at most CONFIG_MAX_SENTINELS; NULL, 0: none), and the
         * password they need (NULL: none). */
        struct config_endpoint *sentinels;
        size_t n_sentinels;
        char *master, *sentinel_password;
        char *password; /* NULL when none */
        uint32_t db;
        int64_t timeout_ns;
        char *prefix;
        int64_t lease_ns; /* a concurrency slot's lease in Redis (default 10 s) */
        /* The longest this replica answers a refusal of Redis's itself (default 1 s; 0:
         * never): gateway/modules/limit/refusals.h. */
        int64_t refusal_cache_ns;
    } redis;
    uint32_t replicas;  /* gateways sharing the limits; 1 with replicas_auto */
    bool replicas_auto; /* replicas: auto: those that announce themselves in Redis count */
    enum config_store_error on_store_error;
    struct config_route *routes;
    size_t n_routes;
    struct config_upstream *upstreams; /* upstreams:, in the file's order */
    size_t n_upstreams;
    struct config_plan *plans;
    size_t n_plans;
    struct config_consumer *consumers; /* consumers:, then those of consumers_file */
    size_t n_consumers;
    char *consumers_file; /* consumers_file:, relative to the config's directory; or NULL */
    struct {
        double sample; /* the chance a request without a trace starts one: 0 (default) to 1 */
    } tracing;
    /* What is legal but surely unintended (a route that can never match): one "FILE:LINE:COL:
     * warning: ..." line each, for the caller to log; NULL when none. */
    char *warnings;
};

/* Loads and validates `path`. Returns the config, freed with config_free(); or NULL with
 * `*errors` set to one "FILE:LINE:COL: message" line per problem (the caller frees it). */
struct config *config_load(const char *path, char **errors);

/* The same for `len` bytes of YAML in memory, reported as coming from `name`. */
struct config *config_parse(const char *name, const char *text, size_t len, char **errors);

/* The parser's bounds; see the top of this file. */
#define CONFIG_MAX_FILE           (1024 * 1024) /* bytes */
#define CONFIG_MAX_DEPTH          32            /* mappings and lists nested in one another */
#define CONFIG_MAX_ITEMS          4096          /* keys in one mapping, items in one list */
#define CONFIG_MAX_SCALAR         4096 /* bytes in one key or value, also once ${VAR} is expanded */
#define CONFIG_MAX_ROUTES         1024
#define CONFIG_MAX_ERRORS         100 /* problems listed; any more are counted on one more line */
#define CONFIG_MAX_CONSUMERS_FILE (64 * 1024 * 1024) /* bytes of consumers_file */
#define CONFIG_MAX_CONSUMERS      1000000            /* consumers in consumers_file */
#define CONFIG_MAX_BODY_FILE      (64 * 1024)        /* bytes of an on_limit body_file */
#define CONFIG_MAX_SERVERS        64                 /* servers of one route's upstream */

void config_free(struct config *config);

/* Whether route `i` shows its upstream's servers (health checks, per-server metrics): its own
 * upstream, or a shared one it is the first to name. */
bool config_route_owns_upstream(const struct config *config, size_t i);

/* The versions of libyaml and GnuTLS this process runs with (static), for sluice_build_info. */
const char *config_yaml_version(void);
const char *config_tls_library_version(void);

/* Calls `each` with every key the loader knows, the keys of the blocks registered (blocks.h)
 * among them: its section ("" for the top level, "server", "routes.limit", ...; a list's items
 * are named by the list) and its name, both static. */
void config_known_keys(void (*each)(const char *section, const char *key, void *cls), void *cls);

/* Reads the regular file `path`, of at most `max` bytes, into `*text` (NUL-terminated, its
 * length in `*len`; the caller frees it). 0, or -1 with a sentence in `why`. */
int config_read_file(const char *path, size_t max, char **text, size_t *len, char why[128]);

/* Whether two keys (a kind and, for header and query, a name) count by the same thing:
 * header names compare without case, query parameter names with it. */
bool config_same_key(enum config_key_kind a_kind, const char *a_name, enum config_key_kind b_kind,
                     const char *b_name);

/* Parses a duration: 250ms, 10s, 1m, 2h, 1d, or a bare number of seconds. 0 or -1. */
int config_parse_duration(const char *text, int64_t *ns);

/* Parses a size: 512, 64KiB, 10MiB, 1GiB (also kB, MB, GB as powers of 1000). 0 or -1. */
int config_parse_size(const char *text, uint64_t *bytes);

/* Writes `ns` into `out` (`cap` bytes) in the largest unit that holds it whole (90s as 90s,
 * 3600s as 1h), as config_parse_duration() reads it; returns `out`. Less than a whole number
 * of milliseconds comes out in ns, which that parser does not read. */
const char *config_format_duration(int64_t ns, char *out, size_t cap);

/* Writes `bytes` into `out` (`cap` bytes) in the largest binary unit that holds it whole
 * (4096 as 4KiB, 1000 as 1000), as config_parse_size() reads it; returns `out`. */
const char *config_format_size(uint64_t bytes, char *out, size_t cap);

/* Parses 10.0.0.0/8, 2001:db8::/32, or a single address (a full-length prefix). An
 * IPv4-mapped block (::ffff:10.0.0.0/104) is kept as the IPv4 block (10.0.0.0/8); one shorter
 * than /96 is refused. 0 or -1. */
int config_parse_cidr(const char *text, struct config_cidr *out);

/* Parses "host:port" or "[v6]:port" into `out` (out->host allocated). 0 or -1. */
int config_parse_endpoint(const char *text, struct config_endpoint *out);

#endif
