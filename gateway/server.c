/* The HTTP front: request lifecycle on libmicrohttpd; design in server.h. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>

#include "headers.h"
#include "keys.h"
#include "log.h"
#include "proxy.h"
#include "respond.h"
#include "routes.h"
#include "server.h"

#define RESPONSE_BLOCK (32 * 1024)
#define TOO_LARGE      "the request body is larger than this gateway accepts"

struct gw_server {
    const struct config *config;
    struct limiter **limiters; /* per route; NULL where a route has no limit */
    struct MHD_Daemon *daemon;
    atomic_uint in_flight;
    uint16_t port;
};

/* One client connection: the upstream handles its requests reuse. */
struct gw_connection {
    struct gw_upstream *upstream;
};

struct gw_request {
    struct gw_server *server;
    struct gw_connection *connection;
    char *raw_uri; /* as the client sent it, forwarded byte for byte */
    bool started;
    int route; /* index into config->routes, or -1 */
    bool limited; /* a limiter decided: the RateLimit fields go out */
    struct limiter_decision decision;
    unsigned refusal; /* a status sluice answers itself instead of forwarding; 0 if none */
    const char *refusal_detail;
    bool has_body;
    char *body;
    size_t body_len, body_cap;
    struct curl_slist *upstream_headers;
    char *upstream_url;
    bool forwarding;
};

static const struct config_route *route_of(const struct gw_request *rq)
{
    return rq->route >= 0 ? &rq->server->config->routes[rq->route] : NULL;
}

/* --- answers of our own ---------------------------------------------------------------- */

static void add_limit_headers(const struct gw_request *rq, struct MHD_Response *response)
{
    const struct config_route *route = route_of(rq);
    char field[GW_FIELD_LEN];

    if (!rq->limited)
        return;
    gw_format_policy(field, route->name, limiter_get_params(rq->server->limiters[rq->route]));
    MHD_add_response_header(response, "RateLimit-Policy", field);
    gw_format_ratelimit(field, route->name, &rq->decision);
    MHD_add_response_header(response, "RateLimit", field);
}

static enum MHD_Result respond_problem(struct gw_request *rq, struct MHD_Connection *c,
                                       unsigned status, const char *detail)
{
    const struct config_route *route = route_of(rq);
    char *body = gw_problem_json(status, detail, route ? route->name : NULL);
    struct MHD_Response *response;
    enum MHD_Result ret;

    if (body == NULL)
        return MHD_NO;
    response = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (response == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(response, "Content-Type", "application/problem+json");
    add_limit_headers(rq, response);
    if (status == MHD_HTTP_TOO_MANY_REQUESTS) {
        char seconds[24];

        snprintf(seconds, sizeof seconds, "%lld",
                 (long long)gw_retry_after_seconds(rq->decision.retry_after_ms));
        MHD_add_response_header(response, "Retry-After", seconds);
    }
    ret = MHD_queue_response(c, status, response);
    MHD_destroy_response(response);
    return ret;
}

/* --- reading the request --------------------------------------------------------------- */

struct joined {
    const char *name;
    char *value; /* every field of that name, joined with "," */
};

static enum MHD_Result join_field(void *cls, enum MHD_ValueKind kind, const char *name,
                                  const char *value)
{
    struct joined *j = cls;
    size_t old_len = j->value ? strlen(j->value) : 0;
    char *grown;

    (void)kind;
    if (strcasecmp(name, j->name) != 0 || value == NULL)
        return MHD_YES;
    grown = realloc(j->value, old_len + strlen(value) + 2);
    if (grown == NULL)
        return MHD_NO;
    if (old_len > 0)
        grown[old_len++] = ',';
    memcpy(grown + old_len, value, strlen(value) + 1);
    j->value = grown;
    return MHD_YES;
}

/* Every `name` header of the request joined with ",", or NULL; the caller frees it. */
static char *joined_header(struct MHD_Connection *c, const char *name)
{
    struct joined j = {name, NULL};

    MHD_get_connection_values(c, MHD_HEADER_KIND, join_field, &j);
    return j.value;
}

static int peer_addr(struct MHD_Connection *c, struct gw_addr *peer)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

    return gw_addr_from_sockaddr(info ? info->client_addr : NULL, peer);
}

/* Asks the route's limiter; false when the request is to be refused. */
static bool decide(struct gw_request *rq, struct MHD_Connection *c)
{
    const struct config_route *route = route_of(rq);
    struct limiter *limiter = rq->server->limiters[rq->route];
    struct gw_addr peer, client;
    char key[GW_KEY_LEN];
    const char *value = NULL;
    char *forwarded_for;

    if (limiter == NULL || peer_addr(c, &peer) != 0)
        return true;
    forwarded_for = joined_header(c, "X-Forwarded-For");
    client = gw_client_addr(&peer, forwarded_for, &rq->server->config->server.trusted_proxies);
    free(forwarded_for);
    if (gw_cidrs_contain(&route->exempt, &client))
        return true;

    if (route->key_kind == CONFIG_KEY_HEADER)
        value = MHD_lookup_connection_value(c, MHD_HEADER_KIND, route->key_name);
    else if (route->key_kind == CONFIG_KEY_QUERY)
        value = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, route->key_name);
    if (value != NULL && value[0] != '\0')
        gw_value_key(route->key_kind == CONFIG_KEY_HEADER ? "header" : "query", value, key);
    else
        gw_ip_key(&client, route->ipv6_prefix_len, key);

    rq->limited = true;
    if (limiter_decide(limiter, key, limiter_now_ns(), &rq->decision) != 0)
        rq->decision.allowed = false; /* out of memory for this client's state: refuse */
    return rq->decision.allowed || route->dry_run;
}

static void refuse(struct gw_request *rq, unsigned status, const char *detail)
{
    if (rq->refusal == 0) {
        rq->refusal = status;
        rq->refusal_detail = detail;
    }
}

/* The first call for a request: its headers are in, its body not yet. Decides whether it
 * will be forwarded or refused. */
static void begin(struct gw_request *rq, struct MHD_Connection *c, const char *path,
                  const char *method)
{
    const struct config *config = rq->server->config;
    const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");

    rq->has_body = length != NULL ||
                   MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding") != NULL;
    rq->route = gw_route_match(config, method, path,
                               MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"));
    if (rq->route < 0)
        refuse(rq, MHD_HTTP_NOT_FOUND, "no route matches this request");
    else if (rq->raw_uri == NULL || rq->raw_uri[0] != '/')
        refuse(rq, MHD_HTTP_BAD_REQUEST, "the request target must be a path (origin-form)");
    else if (length != NULL && strtoull(length, NULL, 10) > config->server.max_body)
        refuse(rq, MHD_HTTP_CONTENT_TOO_LARGE, TOO_LARGE);
    else if (!decide(rq, c))
        refuse(rq, MHD_HTTP_TOO_MANY_REQUESTS,
               "rate limit exceeded; retry after the time in Retry-After");
}

static void take_body(struct gw_request *rq, const char *data, size_t len)
{
    size_t max = rq->server->config->server.max_body;

    if (rq->refusal != 0)
        return;
    if (rq->body_len + len > max) {
        refuse(rq, MHD_HTTP_CONTENT_TOO_LARGE, TOO_LARGE);
        return;
    }
    if (rq->body_len + len > rq->body_cap) {
        size_t cap = rq->body_cap ? rq->body_cap : 16 * 1024;
        char *grown;

        while (cap < rq->body_len + len)
            cap *= 2;
        grown = realloc(rq->body, cap);
        if (grown == NULL) {
            refuse(rq, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory for the request body");
            return;
        }
        rq->body = grown;
        rq->body_cap = cap;
    }
    memcpy(rq->body + rq->body_len, data, len);
    rq->body_len += len;
}

/* --- forwarding ------------------------------------------------------------------------ */

struct header_walk {
    struct curl_slist *list;
    const char *connection;
    bool failed, has_accept, has_content_type;
};

static void append_field(struct header_walk *w, const char *name, const char *value)
{
    size_t len = strlen(name) + strlen(value) + 3;
    char *line = malloc(len);
    struct curl_slist *list;

    if (line == NULL) {
        w->failed = true;
        return;
    }
    /* "Name;" is how libcurl sends a field with an empty value ("Name:" removes it). */
    snprintf(line, len, value[0] ? "%s: %s" : "%s;", name, value);
    list = curl_slist_append(w->list, line);
    free(line);
    if (list == NULL)
        w->failed = true;
    else
        w->list = list;
}

/* Fields the gateway itself sets, or that libcurl derives from the body. */
static bool replaced_by_gateway(const char *name)
{
    static const char *const replaced[] = {"Host", "Content-Length", "Expect",
                                           "X-Forwarded-For", "X-Forwarded-Proto",
                                           "X-Forwarded-Host"};

    for (size_t i = 0; i < sizeof replaced / sizeof replaced[0]; i++)
        if (strcasecmp(name, replaced[i]) == 0)
            return true;
    return false;
}

static enum MHD_Result copy_request_field(void *cls, enum MHD_ValueKind kind, const char *name,
                                          const char *value)
{
    struct header_walk *w = cls;

    (void)kind;
    if (value == NULL || gw_header_is_hop_by_hop(name, w->connection) ||
        replaced_by_gateway(name))
        return MHD_YES;
    w->has_accept |= strcasecmp(name, "Accept") == 0;
    w->has_content_type |= strcasecmp(name, "Content-Type") == 0;
    append_field(w, name, value);
    return w->failed ? MHD_NO : MHD_YES;
}

/* The header list sent upstream: the client's end-to-end fields as they came, Host kept,
 * X-Forwarded-* set, and libcurl kept from adding fields of its own. */
static struct curl_slist *upstream_headers(struct MHD_Connection *c)
{
    char *connection = joined_header(c, "Connection");
    char *forwarded_for = joined_header(c, "X-Forwarded-For");
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    struct header_walk w = {NULL, connection, false, false, false};
    struct gw_addr peer;
    char peer_text[64] = "unknown", *xff;
    size_t xff_len;

    MHD_get_connection_values(c, MHD_HEADER_KIND, copy_request_field, &w);
    if (host != NULL)
        append_field(&w, "Host", host);
    if (peer_addr(c, &peer) == 0)
        inet_ntop(peer.family, peer.bytes, peer_text, sizeof peer_text);
    xff_len = (forwarded_for ? strlen(forwarded_for) : 0) + strlen(peer_text) + 3;
    xff = malloc(xff_len);
    if (xff != NULL) {
        snprintf(xff, xff_len, "%s%s%s", forwarded_for ? forwarded_for : "",
                 forwarded_for ? ", " : "", peer_text);
        append_field(&w, "X-Forwarded-For", xff);
    }
    append_field(&w, "X-Forwarded-Proto", "http");
    if (host != NULL)
        append_field(&w, "X-Forwarded-Host", host);
    w.list = curl_slist_append(w.list, "Expect:");
    if (!w.has_accept)
        w.list = curl_slist_append(w.list, "Accept:");
    if (!w.has_content_type)
        w.list = curl_slist_append(w.list, "Content-Type:");
    free(xff);
    free(connection);
    free(forwarded_for);
    if (xff == NULL || w.failed) {
        curl_slist_free_all(w.list);
        return NULL;
    }
    return w.list;
}

static ssize_t read_upstream_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct gw_request *rq = cls;
    ssize_t n = gw_upstream_read(rq->connection->upstream, buf, max);

    (void)pos;
    if (n > 0)
        return n;
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    gw_warn("route %s: upstream body cut short after %llu bytes; client connection closed",
            route_of(rq)->name, (unsigned long long)pos);
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

static enum MHD_Result forward(struct gw_request *rq, struct MHD_Connection *c,
                               const char *method)
{
    const struct config_route *route = route_of(rq);
    struct gw_upstream *upstream;
    struct gw_forward fw;
    struct MHD_Response *response;
    enum gw_upstream_error error;
    char *connection = NULL;
    const char *name, *value;
    size_t cursor = 0, url_len;
    int64_t length;
    enum MHD_Result ret;

    if (rq->connection == NULL)
        return MHD_NO;
    if (rq->connection->upstream == NULL)
        rq->connection->upstream = gw_upstream_new();
    upstream = rq->connection->upstream;
    url_len = strlen(route->upstream) + strlen(route->upstream_base_path) + strlen(rq->raw_uri) + 1;
    rq->upstream_url = malloc(url_len);
    rq->upstream_headers = upstream_headers(c);
    if (upstream == NULL || rq->upstream_url == NULL || rq->upstream_headers == NULL)
        return respond_problem(rq, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    snprintf(rq->upstream_url, url_len, "%s%s%s", route->upstream, route->upstream_base_path,
             rq->raw_uri);

    fw = (struct gw_forward){
        .method = method,
        .url = rq->upstream_url,
        .headers = rq->upstream_headers,
        .body = rq->has_body ? (rq->body ? rq->body : "") : NULL,
        .body_len = rq->body_len,
        .timeout_ns = route->timeout_ns,
        .connect_timeout_ns = route->connect_timeout_ns,
        .tls_verify = route->tls_verify,
    };
    rq->forwarding = true;
    error = gw_upstream_start(upstream, &fw);
    if (error == GW_UPSTREAM_TIMEOUT)
        return respond_problem(rq, c, MHD_HTTP_GATEWAY_TIMEOUT,
                               "the upstream did not answer in time");
    if (error == GW_UPSTREAM_CONNECT)
        return respond_problem(rq, c, MHD_HTTP_BAD_GATEWAY,
                               "the upstream refused the connection or could not be reached");
    if (error != GW_UPSTREAM_OK)
        return respond_problem(rq, c, MHD_HTTP_BAD_GATEWAY,
                               "the upstream's answer could not be read");

    length = gw_upstream_content_length(upstream);
    response = MHD_create_response_from_callback(length >= 0 ? (uint64_t)length : MHD_SIZE_UNKNOWN,
                                                 RESPONSE_BLOCK, read_upstream_body, rq, NULL);
    if (response == NULL)
        return MHD_NO;
    /* The upstream's Connection field names more fields that stop here. */
    while (gw_upstream_next_header(upstream, &cursor, &name, &value))
        if (strcasecmp(name, "Connection") == 0 && connection == NULL)
            connection = strdup(value);
    cursor = 0;
    while (gw_upstream_next_header(upstream, &cursor, &name, &value))
        if (!gw_header_is_hop_by_hop(name, connection) && strcasecmp(name, "Content-Length") != 0)
            MHD_add_response_header(response, name, value);
    free(connection);
    add_limit_headers(rq, response);
    ret = MHD_queue_response(c, (unsigned)gw_upstream_status(upstream), response);
    MHD_destroy_response(response);
    return ret;
}

/* --- libmicrohttpd callbacks ----------------------------------------------------------- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct gw_request *rq = calloc(1, sizeof *rq);
    const union MHD_ConnectionInfo *info;

    if (rq == NULL)
        return NULL;
    rq->server = cls;
    rq->raw_uri = strdup(uri);
    rq->route = -1;
    info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    rq->connection = info ? info->socket_context : NULL;
    atomic_fetch_add(&rq->server->in_flight, 1);
    return rq;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    struct gw_request *rq = *req_cls;

    (void)cls, (void)version;
    if (rq == NULL)
        return MHD_NO;
    if (!rq->started) {
        rq->started = true;
        begin(rq, c, url, method);
        /* Answering now makes libmicrohttpd close the connection after the answer; worth it
         * only to avoid reading a body that is refused anyway. Otherwise answer at the final
         * call, and the connection stays open. */
        if (rq->refusal != 0 && rq->has_body)
            return respond_problem(rq, c, rq->refusal, rq->refusal_detail);
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        take_body(rq, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rq->refusal != 0)
        return respond_problem(rq, c, rq->refusal, rq->refusal_detail);
    return forward(rq, c, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode why)
{
    struct gw_request *rq = *req_cls;

    (void)cls, (void)c, (void)why;
    if (rq == NULL)
        return;
    if (rq->forwarding && rq->connection != NULL && rq->connection->upstream != NULL)
        gw_upstream_finish(rq->connection->upstream);
    atomic_fetch_sub(&rq->server->in_flight, 1);
    curl_slist_free_all(rq->upstream_headers);
    free(rq->upstream_url);
    free(rq->body);
    free(rq->raw_uri);
    free(rq);
    *req_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct gw_connection *conn = *socket_context;

    (void)cls, (void)c;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = calloc(1, sizeof(struct gw_connection));
        return;
    }
    if (conn != NULL) {
        gw_upstream_free(conn->upstream);
        free(conn);
    }
    *socket_context = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char message[512];
    size_t len;

    (void)cls;
    vsnprintf(message, sizeof message, fmt, ap);
    len = strlen(message);
    while (len > 0 && message[len - 1] == '\n')
        message[--len] = '\0';
    gw_warn("http: %s", message);
}

/* --- life cycle ------------------------------------------------------------------------ */

static void free_server(struct gw_server *s)
{
    for (size_t i = 0; s->limiters != NULL && i < s->config->n_routes; i++)
        limiter_free(s->limiters[i]);
    free(s->limiters);
    free(s);
}

static int build_limiters(struct gw_server *s, char err[GW_ERR_LEN])
{
    const struct config *config = s->config;

    s->limiters = calloc(config->n_routes, sizeof *s->limiters);
    if (s->limiters == NULL) {
        snprintf(err, GW_ERR_LEN, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < config->n_routes; i++) {
        struct limiter_params params = config->routes[i].limit;
        char why[LIMITER_ERR_LEN];

        if (!config->routes[i].has_limit)
            continue;
        params.max_clients = config->max_clients;
        s->limiters[i] = limiter_create(&params, why);
        if (s->limiters[i] == NULL) {
            snprintf(err, GW_ERR_LEN, "route %.200s: %s", config->routes[i].name, why);
            return -1;
        }
    }
    return 0;
}

struct gw_server *gw_server_start(const struct config *config, char err[GW_ERR_LEN])
{
    struct gw_server *s = calloc(1, sizeof *s);
    const struct config_endpoint *listen = &config->server.listen;
    struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM}, *addr = NULL;
    char port[8];
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    unsigned timeout_s = (unsigned)((config->server.client_timeout_ns + 999999999) / 1000000000);
    const union MHD_DaemonInfo *info;

    if (s == NULL) {
        snprintf(err, GW_ERR_LEN, "out of memory");
        return NULL;
    }
    s->config = config;
    if (build_limiters(s, err) != 0)
        goto fail;
    snprintf(port, sizeof port, "%u", listen->port);
    if (getaddrinfo(listen->host, port, &hints, &addr) != 0 || addr == NULL) {
        snprintf(err, GW_ERR_LEN, "cannot resolve listen address %s", listen->host);
        goto fail;
    }
    if (addr->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(
        flags, listen->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, addr->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)config->server.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    freeaddrinfo(addr);
    if (s->daemon == NULL) {
        snprintf(err, GW_ERR_LEN, "cannot listen on %s:%u (in use, or not an address here)",
                 listen->host, listen->port);
        goto fail;
    }
    info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : listen->port;
    return s;

fail:
    free_server(s);
    return NULL;
}

uint16_t gw_server_port(const struct gw_server *s)
{
    return s->port;
}

unsigned gw_server_drain(struct gw_server *s, int64_t timeout_ns)
{
    MHD_socket listener = MHD_quiesce_daemon(s->daemon);
    struct timespec pause = {0, 10 * 1000000};

    if (listener != MHD_INVALID_SOCKET)
        close(listener);
    for (int64_t waited = 0; atomic_load(&s->in_flight) > 0 && waited < timeout_ns;
         waited += pause.tv_nsec)
        nanosleep(&pause, NULL);
    return atomic_load(&s->in_flight);
}

void gw_server_stop(struct gw_server *s)
{
    if (s == NULL)
        return;
    MHD_stop_daemon(s->daemon);
    free_server(s);
}
