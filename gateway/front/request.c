/* One request's life; design in request.h. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "gateway/common/headers.h"
#include "gateway/common/log.h"
#include "gateway/common/target.h"
#include "gateway/common/text.h"
#include "gateway/common/trace.h"
#include "gateway/front/head.h"
#include "gateway/front/loop.h"
#include "gateway/front/offload.h"
#include "gateway/front/request.h"
#include "gateway/front/wire.h"
#include "gateway/identity/keys.h"
#include "gateway/limits/decide.h"
#include "gateway/ops/access_log.h"
#include "gateway/routing/routes.h"
#include "gateway/upstream/proxy.h"
#include "gateway/upstream/tunnel.h"
#include "gateway/upstream/upgrade.h"

#define RESPONSE_BLOCK (32 * 1024)
#define TOO_LARGE      "the request body is larger than this gateway accepts"

struct gw_request {
    struct gw_offload_job upgrade_job; /* event mode: an upgrade's connection made off the loop */
    struct gw_runtime *runtime;
    char *raw_uri; /* as the client sent it, forwarded byte for byte */
    char *path;    /* what it is routed by (target.h), or NULL before that */
    const char *method;
    const struct gw_head *head;  /* the connection's strict reading (head.h) */
    struct gw_access_memo *memo; /* the connection's digest of its address key (access_log.h) */
    uint32_t index;             /* this request's place on its connection, from 0 */
    int64_t start_ns;
    bool started;
    bool in_flight; /* not yet finish()ed: counted in sluice_requests_in_flight */
    int route; /* index into the runtime's routes, or -1 */

    /* What the request says of its client, read once by begin() (read_client()). */
    bool has_peer, trusted_peer; /* an IP peer; one in server.trusted_proxies */
    struct gw_addr peer;
    const char *host;    /* the Host field, or NULL; libmicrohttpd's until the request ends */
    const char *user_agent; /* the User-Agent field, or NULL; likewise */
    char *connection;    /* every Connection field joined, or NULL */
    char *forwarded_for; /* every X-Forwarded-For field joined, or NULL */

    unsigned refusal; /* a status sluice answers itself instead of forwarding; 0 if none */
    const char *refusal_detail;
    unsigned dropped_headers; /* fields not forwarded for a '_' in their name */
    bool limited; /* the route's limits decided: the RateLimit fields go out */
    const struct gw_limit_set *set; /* the limits it is held to: the route's, or a plan's */
    const char *consumer;           /* the consumer its key belongs to (the config's), or NULL */
    const char *consumer_plan;      /* that consumer's plan (the config's), or NULL */
    struct gw_limits_selection selection; /* which limits, each one's key and cost (decide.h) */
    struct gw_limits_decision verdict;    /* what they answered; verdict.decided_ns: 0 if not */
    enum gw_decision decision;
    char key[GW_KEY_LEN];
    char ip_key[GW_KEY_LEN]; /* the client's ip key, for the access log (simulate.h) */
    const char *ids[LIMITER_MAX_PER_REQUEST];             /* each limit's key: `key` or below */
    char limit_keys[LIMITER_MAX_PER_REQUEST][GW_KEY_LEN]; /* limits that name their own key */
    bool store_pending; /* event mode: the store is to be asked, or its answer is awaited */
    enum gw_store_result store_result;

    bool has_body;
    bool empty_body; /* Content-Length: 0, nothing else: no body to leave unread */
    struct gw_body body; /* on its way upstream (body.h) */
    uint64_t body_read;  /* bytes of body read from the client, forwarded or not */
    bool body_dropped;   /* the rest of the body is read and let go (answered already) */
    enum gw_upstream_error upstream_error; /* an attempt failed mid-body: the final answer */

    /* An upgrade (upgrade.h): the protocol of the route's upgrades: the client asks for, the
     * client's Upgrade field, and the upstream's side once made; `upgrade_failed` when that
     * failed (its fault in `up`). */
    const char *upgrade;
    char *upgrade_field;
    struct gw_upgrade up;
    bool upgrade_asked, upgrade_failed;
    bool http11;                  /* HTTP/1.1: an upgrade is possible (not in 1.0) */
    struct gw_forward upgrade_fw; /* what gw_upgrade_connect() sends, from the offload thread */
    struct gw_tunnels *tunnels;

    struct gw_loop *loop;          /* the event loop it runs on, or NULL (thread_per_connection) */
    struct gw_offload *offload;    /* with a loop: where an upgrade's connection is made */
    struct MHD_Connection *client; /* for resuming it */
    bool suspended;                /* while waiting on a loop for the upstream's next step */
    struct gw_upstream *upstream; /* from the pool while forwarding, or NULL */
    /* The attempts (backends.h): the server of the current one, open while `backend` is set;
     * the servers tried (bit per server); the last attempt's fault and libcurl's words. */
    size_t server;
    struct gw_backend *backend;
    bool reported; /* the open attempt's outcome has been reported */
    bool probe;    /* the open attempt is its server's probe (backends.h) */
    uint64_t tried;
    unsigned attempts;
    enum gw_fault fault;
    char request_id[GW_REQUEST_ID_LEN];  /* made as it starts (name_request()); ${request.id} */
    struct gw_trace trace;               /* its trace context (trace.h) */
    struct curl_slist *upstream_headers; /* one array of nodes (upstream_headers()) */
    char *upstream_header_text;
    char *upstream_url;
    int64_t upstream_head_ns; /* when the response head came; 0 if it did not */
    long upstream_status;
    unsigned status;
    uint64_t bytes;
};

static const struct config_route *route_of(const struct gw_request *rq)
{
    return rq->route >= 0 ? &rq->runtime->config->routes[rq->route] : NULL;
}

static const struct gw_route_runtime *route_runtime_of(const struct gw_request *rq)
{
    return &rq->runtime->routes[rq->route];
}

/* The route's servers: their state changes as requests go (atomics, backends.h). */
static struct gw_backend_set *backends_of(const struct gw_request *rq)
{
    return &rq->runtime->routes[rq->route].backends;
}

struct gw_request *gw_request_new(struct gw_runtime *runtime, const char *raw_uri,
                                  const struct gw_head *head, struct gw_access_memo *memo,
                                  uint32_t index, struct gw_loop *loop, struct gw_offload *offload,
                                  struct gw_tunnels *tunnels)
{
    struct gw_request *rq = calloc(1, sizeof *rq);

    if (rq == NULL || (rq->raw_uri = strdup(raw_uri)) == NULL) {
        free(rq);
        gw_runtime_release(runtime);
        return NULL;
    }
    rq->runtime = runtime;
    rq->head = head;
    rq->memo = memo;
    rq->index = index;
    rq->loop = loop;
    rq->offload = offload;
    rq->tunnels = tunnels;
    rq->up.fd = -1;
    rq->route = -1;
    rq->start_ns = limiter_now_ns();
    rq->in_flight = true;
    gw_metrics_in_flight(runtime->metrics, 1);
    return rq;
}

/* --- answers of our own ---------------------------------------------------------------- */

/* Whether the upstream's field `name` is one that add_limit_headers() sets for this request:
 * the client gets the gateway's figures only, never two sets. */
static bool limit_field(const struct gw_request *rq, const char *name)
{
    enum config_headers mode = route_of(rq)->headers;

    if (!rq->limited)
        return false;
    if ((mode == CONFIG_HEADERS_IETF || mode == CONFIG_HEADERS_BOTH) &&
        (strcasecmp(name, "RateLimit") == 0 || strcasecmp(name, "RateLimit-Policy") == 0))
        return true;
    return (mode == CONFIG_HEADERS_X_RATELIMIT || mode == CONFIG_HEADERS_BOTH) &&
           (strcasecmp(name, "X-RateLimit-Limit") == 0 ||
            strcasecmp(name, "X-RateLimit-Remaining") == 0 ||
            strcasecmp(name, "X-RateLimit-Reset") == 0);
}

/* The field `name: n`. */
static void add_number(struct MHD_Response *response, const char *name, uint64_t n)
{
    char value[24];
    struct gw_text t = gw_text_on(value, sizeof value - 1);

    gw_text_number(&t, n, 1);
    gw_text_finish(&t);
    MHD_add_response_header(response, name, value);
}

/* The rate-limit fields of the route's headers: mode (respond.h), for the limit that binds. */
static void add_limit_headers(const struct gw_request *rq, struct MHD_Response *response)
{
    const struct gw_limit_set *set = rq->set;
    const struct limiter_params *params;
    const struct limiter_decision *decision = &rq->verdict.each[rq->verdict.binding];
    enum config_headers mode;
    char field[GW_FIELD_LEN];
    int64_t window;

    if (!rq->limited)
        return;
    mode = route_of(rq)->headers;
    params = &set->config[rq->verdict.binding].params;
    if (mode == CONFIG_HEADERS_IETF || mode == CONFIG_HEADERS_BOTH) {
        MHD_add_response_header(response, "RateLimit-Policy", set->policy);
        gw_format_ratelimit(field, set->limits[rq->verdict.binding]->name, params, decision);
        MHD_add_response_header(response, "RateLimit", field);
    }
    if (mode == CONFIG_HEADERS_X_RATELIMIT || mode == CONFIG_HEADERS_BOTH) {
        add_number(response, "X-RateLimit-Limit", gw_quota(params, &window));
        add_number(response, "X-RateLimit-Remaining", decision->remaining);
        add_number(response, "X-RateLimit-Reset", (uint64_t)gw_reset_seconds(params, decision));
    }
}

/* Every answer, the gateway's own or the upstream's, carries the request's id. */
static enum MHD_Result queue(struct gw_request *rq, struct MHD_Connection *c, unsigned status,
                             struct MHD_Response *response)
{
    enum MHD_Result ret;

    MHD_add_response_header(response, "X-Request-Id", rq->request_id);
    ret = MHD_queue_response(c, status, response);
    rq->status = status;
    MHD_destroy_response(response);
    return ret;
}

/* A refusal other than 401, 403, 404 or 429 ends the connection: a request sluice will not
 * read one way is not followed, since what comes after it could be anything. */
static bool closes_connection(const struct gw_request *rq)
{
    switch (rq->refusal) {
    case 0:
    case MHD_HTTP_UNAUTHORIZED:
    case MHD_HTTP_FORBIDDEN:
    case MHD_HTTP_NOT_FOUND:
    case MHD_HTTP_TOO_MANY_REQUESTS:
        return false;
    default:
        return true;
    }
}

static enum MHD_Result respond_problem(struct gw_request *rq, struct MHD_Connection *c,
                                       unsigned status, const char *detail)
{
    const struct config_route *route = route_of(rq);
    const char *type = "application/problem+json";
    bool denied = status == MHD_HTTP_TOO_MANY_REQUESTS;
    const struct limiter_decision *binding = &rq->verdict.each[rq->verdict.binding];
    struct MHD_Response *response;
    char *body;
    size_t len;

    if (denied)
        status = route->on_limit.status;
    if (denied && route->on_limit.body != NULL) {
        /* on_limit's body never changes: read once per config, and it lives as long as this
         * request holds the runtime. */
        type = route->on_limit.content_type;
        len = route->on_limit.body_len;
        response =
            MHD_create_response_from_buffer(len, route->on_limit.body, MHD_RESPMEM_PERSISTENT);
    } else {
        /* Made per request, for its id; a denial's status is on_limit's (429 or 503). */
        body = gw_problem_json(status, detail, route ? route->name : NULL, rq->request_id);
        if (body == NULL)
            return MHD_NO;
        len = strlen(body);
        response = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (response == NULL)
            free(body);
    }
    if (response == NULL)
        return MHD_NO;
    MHD_add_response_header(response, "Content-Type", type);
    if (closes_connection(rq))
        MHD_add_response_header(response, "Connection", "close");
    add_limit_headers(rq, response);
    if (denied)
        add_number(response, "Retry-After",
                   (uint64_t)gw_retry_after_seconds(binding->retry_after_ms));
    rq->bytes = len;
    return queue(rq, c, status, response);
}

/* --- reading the request --------------------------------------------------------------- */

struct joined {
    const char *name;
    char *value; /* every field of that name, joined with "," */
};

/* Appends `value` to the comma-separated `*list` (NULL when empty), as several fields of one
 * name combine. 0, or -1 when memory is short (the list stays as it was). */
static int append_list(char **list, const char *value)
{
    size_t old_len = *list ? strlen(*list) : 0;
    char *grown = realloc(*list, old_len + strlen(value) + 2);

    if (grown == NULL)
        return -1;
    if (old_len > 0)
        grown[old_len++] = ',';
    memcpy(grown + old_len, value, strlen(value) + 1);
    *list = grown;
    return 0;
}

static enum MHD_Result join_field(void *cls, enum MHD_ValueKind kind, const char *name,
                                  const char *value)
{
    struct joined *j = cls;

    (void)kind;
    if (strcasecmp(name, j->name) != 0 || value == NULL)
        return MHD_YES;
    return append_list(&j->value, value) == 0 ? MHD_YES : MHD_NO;
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

static void refuse(struct gw_request *rq, unsigned status, const char *detail)
{
    if (rq->refusal == 0) {
        rq->refusal = status;
        rq->refusal_detail = detail;
    }
}

struct field_count {
    const char *name;
    unsigned n;
    const char *first; /* the first one's value */
};

static enum MHD_Result count_field(void *cls, enum MHD_ValueKind kind, const char *name,
                                   const char *value)
{
    struct field_count *count = cls;

    (void)kind;
    if (strcasecmp(name, count->name) == 0 && count->n++ == 0)
        count->first = value;
    return MHD_YES;
}

/* The value of a key header or query parameter into `*value` (NULL when absent; `*decoded`,
 * to be freed, holds a query parameter's). 0, or -1 when the request is refused: it is given
 * more than once, or reads two ways. */
static int key_value(struct gw_request *rq, struct MHD_Connection *c, enum config_key_kind kind,
                     const char *name, const char **value_out, char **decoded_out)
{
    const char *value = NULL, *reason = NULL;
    char *decoded = NULL;
    int found;

    if (kind == CONFIG_KEY_HEADER) {
        struct field_count count = {name, 0, NULL};
        /* A key header that Connection names is dropped before the upstream: the upstream
         * would serve as anonymous a request counted under a key of the client's choice. */
        bool dropped = rq->connection != NULL && gw_header_is_hop_by_hop(name, rq->connection) &&
                       !gw_header_is_hop_by_hop(name, NULL);

        MHD_get_connection_values(c, MHD_HEADER_KIND, count_field, &count);
        if (count.n > 1 || dropped) {
            refuse(rq, MHD_HTTP_BAD_REQUEST,
                   dropped ? "the Connection field names the key header, which would not reach "
                             "the upstream"
                           : "the key header is given more than once");
            return -1;
        }
        value = count.first;
    } else if (kind == CONFIG_KEY_QUERY) {
        decoded = malloc(strlen(rq->raw_uri) + 1);
        if (decoded == NULL) {
            refuse(rq, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory");
            return -1;
        }
        found = gw_target_query_value(rq->raw_uri, name, decoded, &reason);
        if (found < 0) {
            free(decoded);
            refuse(rq, MHD_HTTP_BAD_REQUEST, reason);
            return -1;
        }
        value = found > 0 ? decoded : NULL; /* absent: nothing was written there */
    }
    *value_out = value;
    *decoded_out = decoded;
    return 0;
}

/* The key a limit counts this request under (keys.h), into `out`. 0, or -1 when the request
 * is refused (key_value()). */
static int client_key(struct gw_request *rq, struct MHD_Connection *c, enum config_key_kind kind,
                      const char *name, const struct gw_addr *client, char out[GW_KEY_LEN])
{
    const char *value = NULL;
    char *decoded = NULL;

    if (key_value(rq, c, kind, name, &value, &decoded) != 0)
        return -1;
    if (value != NULL && value[0] != '\0')
        gw_value_key(kind == CONFIG_KEY_HEADER ? "header" : "query", value, out);
    else
        gw_ip_key(client, route_of(rq)->ipv6_prefix_len, out);
    free(decoded);
    return 0;
}

/* Where the route's key names a consumer (config.h, "Consumers and plans"): the consumer
 * holding its key, or NULL, into `*out`. 0, or -1 when the request is refused for its key's
 * spelling (key_value()). */
static int identify_consumer(struct gw_request *rq, struct MHD_Connection *c,
                             const struct gw_consumer **out)
{
    const struct config_route *route = route_of(rq);
    const struct gw_consumer *consumer = NULL;
    const char *value = NULL;
    char *decoded = NULL;

    if (key_value(rq, c, route->key_kind, route->key_name, &value, &decoded) != 0)
        return -1;
    if (value != NULL && value[0] != '\0')
        consumer = gw_consumers_find(rq->runtime->consumers, value, strlen(value));
    free(decoded);
    if (consumer != NULL) {
        rq->consumer = consumer->name;
        rq->consumer_plan = rq->runtime->config->plans[consumer->plan].name;
    }
    *out = consumer;
    return 0;
}

/* The route's limits answered (rq->verdict): the fields to report, each refusing limit
 * counted, and a 429 unless the route only tries its limits (dry_run). False when the request
 * is refused. */
static bool conclude(struct gw_request *rq)
{
    const struct config_route *route = route_of(rq);
    const struct gw_limits_decision *verdict = &rq->verdict;

    if (verdict->outcome == GW_LIMITS_FAILED_OPEN) {
        rq->limited = false; /* no shared count to report */
        return true;
    }
    for (size_t i = 0; verdict->outcome == GW_LIMITS_DENIED && i < rq->set->n_limits; i++)
        if (!verdict->each[i].allowed)
            gw_metrics_count_denial(rq->set->denials[i]);
    if (verdict->outcome == GW_LIMITS_ALLOWED)
        return true;
    rq->decision = route->dry_run ? GW_DRY_RUN_DENIED : GW_DENIED;
    if (!route->dry_run)
        refuse(rq, MHD_HTTP_TOO_MANY_REQUESTS, GW_DENIED_DETAIL);
    return route->dry_run;
}

/* Asks the route's limits in this process. */
static bool decide_here(struct gw_request *rq)
{
    gw_limits_decide_local(&rq->verdict, rq->set->limiters, rq->ids, &rq->selection,
                           limiter_now_ns());
    return conclude(rq);
}

/* Decides with the shared store's answer (in rq->verdict.each), or, when it failed, by
 * limiter.on_store_error. */
static bool decide_shared(struct gw_request *rq, enum gw_store_result result)
{
    gw_limits_decide_shared(&rq->verdict, result, rq->runtime->config->on_store_error,
                            rq->set->limiters, rq->ids, &rq->selection, limiter_now_ns());
    return conclude(rq);
}

static enum gw_store_result ask_store(struct gw_request *rq)
{
    const struct gw_limit_set *set = rq->set;

    return gw_store_decide(rq->runtime->store, route_of(rq)->name, set->limit_names,
                           set->shared_param_ptrs, rq->selection.costs, set->n_limits, rq->ids,
                           rq->verdict.each);
}

/* Event mode: the connection waits, suspended, while another thread works for it (the store's,
 * or an offload thread for an upgrade); that thread hands it back with back_to_loop(), and
 * libmicrohttpd calls the handler again. */
static void set_aside(struct gw_request *rq, struct MHD_Connection *c)
{
    rq->client = c;
    rq->suspended = true;
    MHD_suspend_connection(c);
}

static void back_to_loop(struct gw_request *rq)
{
    /* Once resumed, the loop may finish the request and free it before this thread goes on:
     * nothing of it is read after the resumption. */
    struct gw_loop *loop = rq->loop;

    rq->suspended = false;
    MHD_resume_connection(rq->client);
    gw_loop_wake(loop); /* libmicrohttpd tells only its own threads of a resumption */
}

/* On one of the store's threads (event mode): the store's answer is in rq->verdict.each. */
static void store_answered(void *arg, enum gw_store_result result)
{
    struct gw_request *rq = arg;

    rq->store_result = result;
    back_to_loop(rq);
}

/* Event mode: asks the store without waiting for it. True when the request waits for the
 * answer (set aside); false when the store is not to be asked now and on_store_error has
 * decided. */
static bool send_to_store(struct gw_request *rq, struct MHD_Connection *c)
{
    const struct gw_limit_set *set = rq->set;
    struct gw_store_call *call =
        gw_store_prepare(rq->runtime->store, route_of(rq)->name, set->limit_names,
                         set->shared_param_ptrs, rq->selection.costs, set->n_limits, rq->ids);

    if (call == NULL) {
        rq->store_pending = false;
        decide_shared(rq, GW_STORE_FAILED);
        return false;
    }
    set_aside(rq, c);
    gw_store_send(rq->runtime->store, call, rq->verdict.each, store_answered, rq);
    return true;
}

/* The limits `client` is held to (decide.h) and the key each counts it under: the route's key
 * (a consumer's name, or for an unknown key the client's address), or the limit's own. 0, or
 * -1 when the request is refused: 401 for an unknown key (unless `exempt`), or for a key's
 * spelling (key_value()). */
static int select_limits(struct gw_request *rq, struct MHD_Connection *c,
                         const struct gw_addr *client, bool exempt)
{
    const struct config_route *route = route_of(rq);
    const struct gw_route_runtime *r = route_runtime_of(rq);
    const struct gw_consumer *consumer = NULL;
    const struct config_limit *limits;

    if (route->identifies_consumers && identify_consumer(rq, c, &consumer) != 0)
        return -1;
    if (gw_limits_select(route, consumer, exempt, rq->method, &rq->selection) != 0) {
        refuse(rq, MHD_HTTP_UNAUTHORIZED, r->unknown_key_detail);
        return -1;
    }
    rq->set = rq->selection.plan == GW_LIMITS_OWN ? &r->own : &r->plans[rq->selection.plan];
    if (consumer != NULL)
        snprintf(rq->key, sizeof rq->key, "consumer:%s", consumer->name);
    else if (route->identifies_consumers)
        gw_ip_key(client, route->ipv6_prefix_len, rq->key);
    else if (client_key(rq, c, route->key_kind, route->key_name, client, rq->key) != 0)
        return -1;
    limits = rq->selection.limits;
    for (size_t i = 0; i < rq->selection.n_limits; i++) {
        if (rq->selection.route_key[i])
            rq->ids[i] = rq->key; /* most limits count under the route's key */
        else if (client_key(rq, c, limits[i].key_kind, limits[i].key_name, client,
                            rq->limit_keys[i]) != 0)
            return -1;
        else
            rq->ids[i] = rq->limit_keys[i];
    }
    return 0;
}

/* Works out the client's keys and asks the route's limits; false when the request is to be
 * refused (then with its status set). In event mode a shared store is asked off the loop:
 * then `store_pending` is set and the answer comes later (gw_request_handle()). */
static bool decide(struct gw_request *rq, struct MHD_Connection *c)
{
    const struct config_route *route = route_of(rq);
    const struct gw_route_runtime *r = route_runtime_of(rq);
    struct gw_addr client;
    bool exempt;

    rq->decision = GW_ALLOWED;
    rq->set = &r->own;
    if (!rq->has_peer)
        return true; /* not an IP connection: nothing to count it by */
    client =
        gw_client_addr(&rq->peer, rq->forwarded_for, &rq->runtime->config->server.trusted_proxies);
    if (gw_cidrs_contain(&rq->runtime->config->server.deny, &client) ||
        gw_cidrs_contain(&route->deny, &client)) {
        rq->decision = GW_BLOCKED;
        refuse(rq, MHD_HTTP_FORBIDDEN, "the client's address is not allowed here");
        return false;
    }
    exempt = gw_cidrs_contain(&route->exempt, &client);
    gw_ip_key(&client, route->ipv6_prefix_len, rq->ip_key);
    if (select_limits(rq, c, &client, exempt) != 0)
        return false;
    if (exempt) {
        rq->decision = GW_EXEMPT;
        return true;
    }
    if (rq->set->n_limits == 0) {
        /* decided: by no limit, which a log replay can vary */
        rq->verdict.decided_ns = limiter_now_ns();
        return true;
    }
    rq->limited = true;
    if (r->shared && rq->loop != NULL) {
        rq->store_pending = true;
        return true;
    }
    if (r->shared)
        return decide_shared(rq, ask_store(rq));
    return decide_here(rq);
}

/* Refuses the request when sluice's own reading of the connection (head.h) refused it, or
 * did not see it where libmicrohttpd did: its head (or, with `whole`, its body too) should
 * have been read by now. True when refused. */
static bool refuse_misread(struct gw_request *rq, bool whole)
{
    const struct gw_head *h = rq->head;

    if (h->fault != 0 && h->fault_at == rq->index)
        refuse(rq, h->fault, h->reason);
    else if ((whole ? h->messages : h->heads) <= rq->index)
        refuse(rq, MHD_HTTP_BAD_REQUEST,
               "the request was read two ways; it is refused rather than guessed");
    return rq->refusal != 0;
}

/* A standard method spelled in another case (`get`): methods are case-sensitive, but some
 * upstreams fold them, and would run what sluice routed as another method. */
static bool is_misspelled_method(const char *method)
{
    static const char *const standard[] = {"GET",     "HEAD",    "POST",  "PUT",  "DELETE",
                                           "CONNECT", "OPTIONS", "TRACE", "PATCH"};

    for (size_t i = 0; i < sizeof standard / sizeof standard[0]; i++)
        if (strcasecmp(method, standard[i]) == 0)
            return strcmp(method, standard[i]) != 0;
    return false;
}

/* The route of the request, or -1. Every reading an upstream could make of the request must
 * pick the same one: with the path's case folded (ASP.NET and IIS match paths so), without its
 * path parameters (Java servlet containers), and by a trusted proxy's X-Forwarded-Host (which
 * frameworks can be told to believe over Host). When they differ the request is refused, and
 * -1 returned. */
static int pick_route(struct gw_request *rq, struct MHD_Connection *c, const char *host)
{
    const struct config *config = rq->runtime->config;
    int route = gw_route_match(config, rq->method, rq->path, host);
    char *forwarded_host = NULL, *stripped;

    if (gw_route_match_any_case(config, rq->method, rq->path, host) != route) {
        refuse(rq, MHD_HTTP_BAD_REQUEST,
               "the path names another route when its case is folded, as some upstreams do");
        return -1;
    }
    if (strchr(rq->path, ';') != NULL) {
        stripped = malloc(strlen(rq->path) + 1);
        if (stripped != NULL)
            gw_target_strip_params(rq->path, stripped);
        if (stripped == NULL || gw_route_match(config, rq->method, stripped, host) != route)
            refuse(rq, MHD_HTTP_BAD_REQUEST,
                   "the path names another route without its ;parameters, as some upstreams "
                   "read it");
        free(stripped);
        if (rq->refusal != 0)
            return -1;
    }
    if (rq->trusted_peer)
        forwarded_host = joined_header(c, "X-Forwarded-Host");
    for (char *entry = forwarded_host; entry != NULL && rq->refusal == 0;) {
        char *comma = strchr(entry, ',');

        if (comma != NULL)
            *comma = '\0';
        if (!gw_host_is_valid(entry) ||
            gw_route_match(config, rq->method, rq->path, entry) != route)
            refuse(rq, MHD_HTTP_BAD_REQUEST,
                   "X-Forwarded-Host names another route than Host; it is refused rather than "
                   "guessed");
        entry = comma != NULL ? comma + 1 : NULL;
    }
    free(forwarded_host);
    return rq->refusal != 0 ? -1 : route;
}

/* Reads once what the request says of its client: the peer and whether it is trusted, Host,
 * and the fields that several steps read (Connection, X-Forwarded-For). */
static void read_client(struct gw_request *rq, struct MHD_Connection *c)
{
    rq->has_peer = peer_addr(c, &rq->peer) == 0;
    rq->trusted_peer =
        rq->has_peer && gw_cidrs_contain(&rq->runtime->config->server.trusted_proxies, &rq->peer);
    rq->host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    rq->user_agent = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent");
    rq->connection = joined_header(c, "Connection");
    rq->forwarded_for = joined_header(c, "X-Forwarded-For");
}

/* The request's id and trace context (trace.h), made once as it starts: a client's
 * X-Request-Id is believed only from a trusted peer, sent once and sane. A head the strict
 * reader refused reaches here as its stand-in (wire.h), and gets an id of its own. */
static void name_request(struct gw_request *rq, struct MHD_Connection *c)
{
    struct field_count id = {"X-Request-Id", 0, NULL}, parent = {"traceparent", 0, NULL};

    MHD_get_connection_values(c, MHD_HEADER_KIND, count_field, &id);
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_field, &parent);
    if (rq->trusted_peer && id.n == 1 && id.first != NULL && gw_request_id_is_sane(id.first))
        snprintf(rq->request_id, sizeof rq->request_id, "%s", id.first);
    else
        gw_request_id_new(rq->request_id);
    gw_trace_begin(&rq->trace, parent.n == 1 ? parent.first : NULL,
                   rq->runtime->config->tracing.sample);
}

/* Whether the request asks to switch its connection to one of the route's upgrades: an
 * HTTP/1.1 request, an Upgrade field naming one protocol the route lists, and Connection naming
 * upgrade. Any other Upgrade (h2c, a protocol not listed, an HTTP/1.0 request's) is dropped as
 * the hop-by-hop field it is, and the request goes as a plain one. */
static void read_upgrade(struct gw_request *rq, struct MHD_Connection *c)
{
    const struct config_route *route = route_of(rq);
    char *field;

    if (!rq->http11 || rq->connection == NULL || !gw_header_list_has(rq->connection, "upgrade"))
        return;
    field = joined_header(c, "Upgrade");
    for (size_t i = 0; field != NULL && i < route->n_upgrades && rq->upgrade == NULL; i++)
        if (strcasecmp(field, route->upgrades[i]) == 0)
            rq->upgrade = route->upgrades[i];
    if (rq->upgrade == NULL)
        free(field);
    else
        rq->upgrade_field = field;
}

/* The first call for a request: its headers are in, its body not yet. Decides whether it
 * will be forwarded or refused. */
static void begin(struct gw_request *rq, struct MHD_Connection *c)
{
    const struct config *config = rq->runtime->config;
    const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    const char *reason = NULL;

    rq->has_body = length != NULL ||
                   MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding") != NULL;
    rq->empty_body = length != NULL && strcmp(length, "0") == 0 &&
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding") == NULL;
    /* The strict reader (head.h) let through no Content-Length beside Transfer-Encoding. */
    rq->body.length = length != NULL ? (int64_t)strtoull(length, NULL, 10) : -1;
    read_client(rq, c);
    name_request(rq, c);
    if (refuse_misread(rq, false))
        return;
    if (rq->raw_uri[0] != '/') { /* absolute-form, CONNECT's authority-form, OPTIONS * */
        refuse(rq, MHD_HTTP_BAD_REQUEST, "the request target must be a path (origin-form)");
        return;
    }
    if (is_misspelled_method(rq->method)) {
        refuse(rq, MHD_HTTP_BAD_REQUEST, "a standard method must be written in upper case");
        return;
    }
    rq->path = malloc(strlen(rq->raw_uri) + 1);
    if (rq->path == NULL) {
        refuse(rq, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory");
        return;
    }
    if (gw_target_path(rq->raw_uri, rq->path, &reason) != 0) {
        refuse(rq, MHD_HTTP_BAD_REQUEST, reason);
        return;
    }
    if (!gw_host_is_valid(rq->host)) {
        refuse(rq, MHD_HTTP_BAD_REQUEST, "the Host field is not a host name or address");
        return;
    }
    rq->route = pick_route(rq, c, rq->host);
    if (rq->refusal != 0)
        return;
    if (rq->route >= 0)
        read_upgrade(rq, c);
    if (rq->route < 0)
        refuse(rq, MHD_HTTP_NOT_FOUND, "no route matches this request");
    else if (rq->upgrade != NULL && rq->has_body && !rq->empty_body)
        refuse(rq, MHD_HTTP_BAD_REQUEST, "an upgrade request carries no body");
    else if (length != NULL && strtoull(length, NULL, 10) > config->server.max_body)
        refuse(rq, MHD_HTTP_CONTENT_TOO_LARGE, TOO_LARGE);
    else
        decide(rq, c);
}

/* --- forwarding ------------------------------------------------------------------------ */

/* The header list sent upstream is built in one text buffer ("line\0line\0...") and then
 * given one array of list nodes pointing into it, rather than a malloc or two per field. */
struct header_walk {
    char *text;
    size_t len, cap, lines;
    const char *connection;
    bool trusted_peer;       /* its X-Forwarded-Proto and -Host are passed on */
    bool keep_underscores;   /* server.underscores_in_headers */
    const char *consumer_header; /* server.consumer_header: only the gateway sets it */
    bool keep_tracestate;        /* the client's traceparent was valid (trace.h) */
    const struct config_route *route; /* its set_headers and remove_headers */
    unsigned dropped;        /* names with '_' left out */
    bool failed, has_accept, has_content_type, has_proto, has_forwarded_host;
};

/* Appends one line made of `n` parts. */
static void append_parts(struct header_walk *w, const char *const *parts, size_t n)
{
    size_t lens[5], need = 1;

    for (size_t i = 0; i < n; i++)
        need += lens[i] = strlen(parts[i]);
    if (w->len + need > w->cap) {
        size_t cap = w->cap ? w->cap : 2048;
        char *grown;

        while (cap < w->len + need)
            cap *= 2;
        grown = realloc(w->text, cap);
        if (grown == NULL) {
            w->failed = true;
            return;
        }
        w->text = grown;
        w->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(w->text + w->len, parts[i], lens[i]);
        w->len += lens[i];
    }
    w->text[w->len++] = '\0';
    w->lines++;
}

static void append_line(struct header_walk *w, const char *line)
{
    append_parts(w, &line, 1);
}

/* Appends "name: value", noting the fields the gateway adds only when they are absent. */
static void append_field(struct header_walk *w, const char *name, const char *value)
{
    /* "Name;" is how libcurl sends a field with an empty value ("Name:" removes it). */
    const char *parts[] = {name, value[0] ? ": " : ";", value};

    w->has_proto |= strcasecmp(name, "X-Forwarded-Proto") == 0;
    w->has_forwarded_host |= strcasecmp(name, "X-Forwarded-Host") == 0;
    w->has_accept |= strcasecmp(name, "Accept") == 0;
    w->has_content_type |= strcasecmp(name, "Content-Type") == 0;
    append_parts(w, parts, value[0] ? 3 : 2);
}

/* Fields the gateway itself sets, or that libcurl derives from the body. A trusted proxy's
 * X-Forwarded-Proto and -Host describe the client's side of it, and are kept. */
static bool replaced_by_gateway(const char *name, bool trusted_peer)
{
    static const char *const replaced[] = {"Host", "Content-Length", "Expect",
                                           "X-Forwarded-For"};

    for (size_t i = 0; i < sizeof replaced / sizeof replaced[0]; i++)
        if (strcasecmp(name, replaced[i]) == 0)
            return true;
    return !trusted_peer && (strcasecmp(name, "X-Forwarded-Proto") == 0 ||
                             strcasecmp(name, "X-Forwarded-Host") == 0);
}

/* The fields of the request's id and trace, which the gateway sends itself; the client's
 * tracestate goes on as it came, but only beside a valid traceparent (trace.h). */
static bool replaced_by_trace(const char *name, bool keep_tracestate)
{
    return strcasecmp(name, "X-Request-Id") == 0 || strcasecmp(name, "traceparent") == 0 ||
           (!keep_tracestate && strcasecmp(name, "tracestate") == 0);
}

/* Whether the route's remove_headers names the field: neither the client's copy nor the
 * gateway's own (X-Forwarded-*) is forwarded. */
static bool removed_by_route(const struct config_route *route, const char *name)
{
    for (size_t i = 0; i < route->n_remove_headers; i++)
        if (strcasecmp(name, route->remove_headers[i]) == 0)
            return true;
    return false;
}

/* Whether the route's set_headers or remove_headers name the field: the client's copy of it
 * is not forwarded. */
static bool replaced_by_route(const struct config_route *route, const char *name)
{
    for (size_t i = 0; i < route->n_set_headers; i++)
        if (strcasecmp(name, route->set_headers[i].name) == 0)
            return true;
    return removed_by_route(route, name);
}

static enum MHD_Result copy_request_field(void *cls, enum MHD_ValueKind kind, const char *name,
                                          const char *value)
{
    struct header_walk *w = cls;

    (void)kind;
    if (value == NULL || gw_header_is_hop_by_hop(name, w->connection) ||
        replaced_by_gateway(name, w->trusted_peer) || replaced_by_route(w->route, name) ||
        replaced_by_trace(name, w->keep_tracestate) ||
        (w->consumer_header != NULL && strcasecmp(name, w->consumer_header) == 0))
        return MHD_YES;
    /* CGI-style upstreams read X_API_Key as X-API-Key: a second spelling of a field that
     * sluice may have keyed on. Left out, as nginx does. */
    if (!w->keep_underscores && strchr(name, '_') != NULL) {
        w->dropped++;
        return MHD_YES;
    }
    append_field(w, name, value);
    return w->failed ? MHD_NO : MHD_YES;
}

/* Appends `name: template` with its ${request.*} filled in. */
static void append_set_header(struct header_walk *w, const struct gw_request *rq, const char *name,
                              const char *template, const char *client_text)
{
    static const char *const variables[] = {"${request.client_addr}", "${request.consumer}",
                                            "${request.id}"};
    char value[4096];
    struct gw_text t = gw_text_on(value, sizeof value - 1);

    for (const char *at = template; *at != '\0' && !gw_text_full(&t);) {
        const char *fill = NULL;
        size_t skip = 0;

        for (size_t v = 0; v < 3 && fill == NULL; v++)
            if (strncmp(at, variables[v], strlen(variables[v])) == 0) {
                skip = strlen(variables[v]);
                fill = v == 0   ? client_text
                       : v == 1 ? (rq->consumer != NULL ? rq->consumer : "")
                                : rq->request_id;
            }
        if (fill == NULL) {
            gw_text_put(&t, at++, 1);
            continue;
        }
        gw_text_str(&t, fill);
        at += skip;
    }
    gw_text_finish(&t);
    append_field(w, name, value);
}

/* The Host field the upstream sees (route.host). */
static const char *upstream_host(const struct gw_request *rq)
{
    const struct config_route *route = route_of(rq);

    if (route->host_mode == CONFIG_HOST_UPSTREAM)
        return route->servers[rq->server].authority;
    if (route->host_mode == CONFIG_HOST_NAME)
        return route->host_name;
    return rq->host;
}

/* `addr` as text into the `cap` bytes at `out` (gw_text_address()). */
static void write_address(char *out, size_t cap, const struct gw_addr *addr)
{
    struct gw_text t = gw_text_on(out, cap - 1);

    gw_text_address(&t, addr->family, addr->bytes);
    gw_text_finish(&t);
}

/* The header list sent upstream: the client's end-to-end fields as they came, Host kept (or
 * as route.host says), X-Forwarded-* set, the route's set_headers and remove_headers applied,
 * and libcurl kept from adding fields of its own. The nodes and their text go to
 * rq->upstream_headers and rq->upstream_header_text. 0, or -1 when memory is short. */
static int upstream_headers(struct gw_request *rq, struct MHD_Connection *c)
{
    const struct config_route *route = route_of(rq);
    const char *host = upstream_host(rq), *forwarded_for = rq->forwarded_for;
    struct header_walk w = {.connection = rq->connection,
                            .trusted_peer = rq->trusted_peer,
                            .keep_underscores = rq->runtime->config->server.underscores_in_headers,
                            .consumer_header = rq->runtime->config->server.consumer_header,
                            .keep_tracestate = rq->trace.continued,
                            .route = route};
    char peer_text[64] = "unknown", client_text[64] = "";
    struct curl_slist *nodes;

    if (rq->has_peer)
        write_address(peer_text, sizeof peer_text, &rq->peer);
    MHD_get_connection_values(c, MHD_HEADER_KIND, copy_request_field, &w);
    rq->dropped_headers = w.dropped;
    if (route->n_set_headers > 0 && rq->has_peer) {
        /* The client as its keys see it: behind trusted proxies, their X-Forwarded-For's. */
        struct gw_addr client = gw_client_addr(&rq->peer, rq->forwarded_for,
                                               &rq->runtime->config->server.trusted_proxies);

        write_address(client_text, sizeof client_text, &client);
    }
    for (size_t i = 0; i < route->n_set_headers; i++)
        append_set_header(&w, rq, route->set_headers[i].name, route->set_headers[i].value,
                          client_text);
    if (host != NULL)
        append_field(&w, "Host", host);
    if (!removed_by_route(route, "X-Forwarded-For")) {
        const char *xff[] = {"X-Forwarded-For: ", forwarded_for ? forwarded_for : "",
                             forwarded_for ? ", " : "", peer_text};

        append_parts(&w, xff, 4);
    }
    if (!w.has_proto && !removed_by_route(route, "X-Forwarded-Proto"))
        append_field(&w, "X-Forwarded-Proto",
                     MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION) != NULL
                         ? "https"
                         : "http");
    if (rq->host != NULL && !w.has_forwarded_host && !removed_by_route(route, "X-Forwarded-Host"))
        append_field(&w, "X-Forwarded-Host", rq->host);
    if (!replaced_by_route(route, "X-Request-Id"))
        append_field(&w, "X-Request-Id", rq->request_id);
    if (rq->trace.trace_id[0] != '\0' && !replaced_by_route(route, "traceparent")) {
        char traceparent[GW_TRACEPARENT_LEN];

        gw_traceparent_format(&rq->trace, traceparent);
        append_field(&w, "traceparent", traceparent);
    }
    if (w.consumer_header != NULL && rq->consumer != NULL &&
        !replaced_by_route(route, w.consumer_header))
        append_field(&w, w.consumer_header, rq->consumer);
    if (rq->upgrade != NULL) { /* hop-by-hop, but what this hop is for */
        append_field(&w, "Connection", "Upgrade");
        append_field(&w, "Upgrade", rq->upgrade_field);
    }
    /* Empty values: libcurl leaves out the fields it would add of its own. */
    append_line(&w, "Expect:");
    if (!w.has_accept)
        append_line(&w, "Accept:");
    if (!w.has_content_type)
        append_line(&w, "Content-Type:");
    nodes = w.failed ? NULL : gw_upstream_header_list(w.text, w.lines);
    if (nodes == NULL) {
        free(w.text);
        return -1;
    }
    rq->upstream_headers = nodes;
    rq->upstream_header_text = w.text;
    return 0;
}

/* The upstream took a step (on a loop): the request picks up where it waited. */
static void on_upstream_step(void *cls)
{
    struct gw_request *rq = cls;

    if (rq->suspended) {
        rq->suspended = false;
        MHD_resume_connection(rq->client);
    }
}

/* Leaves the client connection aside until the upstream's next step (on_upstream_step);
 * libmicrohttpd then calls the handler, or the content reader, again. */
static void await_upstream(struct gw_request *rq)
{
    rq->suspended = true;
    MHD_suspend_connection(rq->client);
}

static ssize_t read_upstream_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct gw_request *rq = cls;
    ssize_t n = gw_upstream_read(rq->upstream, buf, max);

    if (n == GW_UPSTREAM_WOULD_BLOCK) {
        await_upstream(rq);
        return 0;
    }
    if (n > 0) {
        rq->bytes += (uint64_t)n;
        return n;
    }
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    {
        const char *text;

        rq->fault = gw_upstream_fault(rq->upstream, &text);
        gw_warn("route %s: server %s: %s: the body stopped after %llu bytes (%s); the client's "
                "connection is closed",
                route_of(rq)->name, route_of(rq)->servers[rq->server].url, gw_fault_name(rq->fault),
                (unsigned long long)pos, text);
    }
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Whether the answer to `method` with `status` has a body whose length is its own: not HEAD's,
 * not 1xx, 204 or 304 (whose Content-Length, if any, describes another answer). */
static bool carries_body(const char *method, long status)
{
    return strcmp(method, "HEAD") != 0 && status >= 200 && status != 204 && status != 304;
}

static enum MHD_Result upstream_failed(struct gw_request *rq, struct MHD_Connection *c,
                                       enum gw_upstream_error error)
{
    struct gw_route_metrics *metrics = route_runtime_of(rq)->metrics;

    if (gw_proxy_aborting()) /* the gateway stopping cut the attempt: no upstream error */
        return respond_problem(rq, c, MHD_HTTP_SERVICE_UNAVAILABLE, "the gateway is stopping");
    gw_metrics_count_error(metrics, error == GW_UPSTREAM_TIMEOUT   ? GW_ERR_TIMEOUT
                                    : error == GW_UPSTREAM_CONNECT ? GW_ERR_CONNECT
                                                                   : GW_ERR_OTHER);
    return respond_problem(
        rq, c, error == GW_UPSTREAM_TIMEOUT ? MHD_HTTP_GATEWAY_TIMEOUT : MHD_HTTP_BAD_GATEWAY,
        gw_fault_detail(rq->fault));
}

/* The upstream URL for server `k`: its origin and base path, then the target as the client
 * sent it, without the matched path_prefix under strip_prefix. NULL when memory is short. */
static char *upstream_url(const struct gw_request *rq, size_t k)
{
    const struct config_route *route = route_of(rq);
    const struct config_server *server = &route->servers[k];
    const char *rest = rq->raw_uri, *slash = "";
    size_t len;
    char *url;

    if (route->strip_prefix) {
        rest = gw_target_after(rq->raw_uri, strlen(route->path_prefix));
        /* "/v1" stripped from "/v1?q" leaves the base path (or "/") alone; "/v1/" stripped
         * from "/v1/x" took the '/' that the rest needs. */
        if (rest[0] == '\0' || rest[0] == '?')
            slash = server->base_path[0] == '\0' ? "/" : "";
        else if (rest[0] != '/')
            slash = "/";
    }
    len = strlen(server->origin) + strlen(server->base_path) + strlen(slash) + strlen(rest);
    url = malloc(len + 1);
    if (url != NULL) {
        struct gw_text t = gw_text_on(url, len);

        gw_text_str(&t, server->origin);
        gw_text_str(&t, server->base_path);
        gw_text_str(&t, slash);
        gw_text_str(&t, rest);
        gw_text_finish(&t);
    }
    return url;
}

/* Ends the open attempt (no longer in flight); `reported` as gw_backend_finish(). */
static void close_attempt(struct gw_request *rq)
{
    if (rq->backend != NULL)
        gw_backend_finish(rq->backend, rq->reported, rq->probe);
    rq->backend = NULL;
}

/* A new attempt: the server the route's balance picks, and the request for it (URL and
 * header list) into `fw`. 0, or -1 when memory is short (then refused). */
static int begin_attempt(struct gw_request *rq, struct MHD_Connection *c, struct gw_forward *fw)
{
    const struct config_route *route = route_of(rq);
    const struct gw_route_runtime *r = route_runtime_of(rq);

    rq->server = gw_backend_pick(backends_of(rq), rq->tried, limiter_now_ns(), &rq->probe);
    rq->tried |= UINT64_C(1) << rq->server;
    rq->backend = r->backends.servers[rq->server];
    rq->reported = false;
    rq->fault = GW_FAULT_NONE;
    if (rq->attempts++ == 0 && route->retries.attempts > 1)
        gw_retry_budget_count(r->budget, limiter_now_ns());
    gw_backend_begin(rq->backend);
    free(rq->upstream_url);
    free(rq->upstream_headers);
    free(rq->upstream_header_text);
    rq->upstream_headers = NULL;
    rq->upstream_header_text = NULL;
    rq->upstream_url = upstream_url(rq, rq->server);
    if (rq->upstream_url == NULL || upstream_headers(rq, c) != 0) {
        refuse(rq, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory");
        return -1;
    }
    *fw = (struct gw_forward){
        .method = rq->method,
        .url = rq->upstream_url,
        .proxy = route->proxy,
        .max_head = rq->runtime->config->server.max_response_header_size,
        .headers = rq->upstream_headers,
        .body = rq->has_body ? &rq->body : NULL,
        .timeout_ns = route->timeout_ns,
        .connect_timeout_ns = route->connect_timeout_ns,
        .tls_verify = route->tls_verify,
    };
    return 0;
}

/* Sends the request upstream to the server the route's balance picks: a new attempt, with the
 * body (if any) from its first byte. GW_UPSTREAM_OK, or the failure, for answer_failure(). */
static enum gw_upstream_error send_upstream(struct gw_request *rq, struct MHD_Connection *c)
{
    struct gw_forward fw;

    if (begin_attempt(rq, c, &fw) != 0)
        return GW_UPSTREAM_OTHER;
    /* Handles are held only while forwarding, so idle keep-alive clients hold none. */
    rq->upstream = gw_upstream_acquire(rq->loop != NULL ? gw_loop_upstream(rq->loop) : NULL,
                                       route_runtime_of(rq)->pools[rq->server]);
    if (rq->upstream == NULL) {
        refuse(rq, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory");
        return GW_UPSTREAM_OTHER;
    }
    gw_body_rewind(&rq->body); /* end_attempt() retries only a body it can send again */
    rq->client = c;
    return gw_upstream_start(rq->upstream, &fw, on_upstream_step, rq);
}

/* Answers a request whose attempt could not be made (send_upstream()) or failed for good. */
static enum MHD_Result answer_failure(struct gw_request *rq, struct MHD_Connection *c,
                                      enum gw_upstream_error error)
{
    if (rq->refusal != 0)
        return respond_problem(rq, c, rq->refusal, rq->refusal_detail);
    return upstream_failed(rq, c, error);
}

/* Abandons the exchange in flight, if any: the upstream sees its connection close before the
 * request's end, so it never acts on a request sluice refused midway. */
static void drop_upstream(struct gw_request *rq)
{
    close_attempt(rq);
    gw_upstream_release(rq->upstream);
    rq->upstream = NULL;
}

/* Methods a retry may send again: RFC 9110's idempotent ones, TRACE aside. */
static bool may_retry(const char *method)
{
    static const char *const methods[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"};

    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(method, methods[i]) == 0)
            return true;
    return false;
}

/* Reports the attempt's outcome (the head came with `status`, or `error`), logs a failure
 * (at most once a second per server and kind), and says whether to try again: on another
 * server when there is one, for an outcome in retries.on, an idempotent method, attempts
 * left, a body still whole in its window (body.h; and not cut short after an early answer),
 * and room in the retry budget. */
static bool end_attempt(struct gw_request *rq, enum gw_upstream_error error, long status)
{
    const struct config_route *route = route_of(rq);
    int64_t now = limiter_now_ns();
    const char *text = "";

    if (error != GW_UPSTREAM_OK && gw_proxy_aborting()) {
        /* Stopping: the gateway cut the attempt, which says nothing of the server (no
         * upstream_error either), and no attempt follows. */
        rq->fault = GW_FAULT_NONE;
        return false;
    }
    if (error != GW_UPSTREAM_OK && rq->upstream != NULL)
        rq->fault = gw_upstream_fault(rq->upstream, &text);
    else if (error != GW_UPSTREAM_OK) /* an upgrade's (its fault is set already) */
        text = rq->up.error_text;
    rq->reported = true;
    if (gw_backend_report(rq->backend, route, rq->fault, status, now, rq->probe)) {
        char pause[32], outcome[32];

        snprintf(outcome, sizeof outcome, "status %ld", status);
        gw_warn("route %s: server %s is skipped for fail_timeout (%s) after %s failed, the last "
                "with %s",
                route->name, rq->backend->url,
                config_format_duration(route->fail_timeout_ns, pause, sizeof pause),
                rq->probe ? "its probe" : "max_fails attempts",
                rq->fault != GW_FAULT_NONE ? gw_fault_name(rq->fault) : outcome);
    }
    if (rq->fault != GW_FAULT_NONE && gw_backend_should_log(rq->backend, rq->fault, now))
        gw_warn("route %s: server %s: %s: %s", route->name, rq->backend->url,
                gw_fault_name(rq->fault), text);
    if (!(gw_fault_class(rq->fault, status) & route->retries.on) ||
        rq->attempts >= route->retries.attempts || !may_retry(rq->method) ||
        !gw_body_replayable(&rq->body) || rq->body_dropped)
        return false;
    if (!gw_retry_budget_take(route_runtime_of(rq)->budget, route->retries.budget_percent, now)) {
        gw_metrics_count_retry(route_runtime_of(rq)->metrics, false);
        return false;
    }
    gw_metrics_count_retry(route_runtime_of(rq)->metrics, true);
    close_attempt(rq);
    gw_upstream_release(rq->upstream);
    rq->upstream = NULL;
    return true;
}

/* The upstream's answer fields on `response`, with the RateLimit fields: not the hop-by-hop
 * ones (nor any its Connection fields name), Content-Length (libmicrohttpd frames the answer),
 * X-Request-Id (queue() sends the request's own) or the upstream's own RateLimit fields. 0, or
 * -1 when memory is short. */
static int add_answer_fields(const struct gw_request *rq, struct MHD_Response *response,
                             const char *fields, size_t len)
{
    char *connection = NULL;
    const char *name, *value;
    size_t cursor = 0;

    while (gw_field_next(fields, len, &cursor, &name, &value))
        if (strcasecmp(name, "Connection") == 0 && append_list(&connection, value) != 0) {
            free(connection);
            return -1;
        }
    cursor = 0;
    while (gw_field_next(fields, len, &cursor, &name, &value))
        if (!gw_header_is_hop_by_hop(name, connection) && strcasecmp(name, "Content-Length") != 0 &&
            strcasecmp(name, "X-Request-Id") != 0 && !limit_field(rq, name))
            MHD_add_response_header(response, name, value);
    free(connection);
    add_limit_headers(rq, response);
    return 0;
}

/* Forwards the request and answers with the upstream's answer. Called again after each wait
 * on a loop, until the response head is in. */
static enum MHD_Result forward(struct gw_request *rq, struct MHD_Connection *c)
{
    struct gw_upstream *upstream;
    struct MHD_Response *response;
    enum gw_upstream_error error;
    const char *body, *fields;
    size_t body_len, fields_len;
    int64_t length;

    do {
        if (rq->upstream == NULL && (error = send_upstream(rq, c)) != GW_UPSTREAM_OK)
            return answer_failure(rq, c, error);
        /* Its body has ended: what is left of it goes, and its last byte (body.h). */
        error = rq->has_body && !rq->body_dropped ? gw_upstream_feed(rq->upstream, false)
                                                  : GW_UPSTREAM_OK;
        if (error == GW_UPSTREAM_OK || error == GW_UPSTREAM_ANSWERED)
            error = gw_upstream_head(rq->upstream);
        if (error == GW_UPSTREAM_PENDING) {
            await_upstream(rq);
            return MHD_YES;
        }
    } while (
        end_attempt(rq, error, error == GW_UPSTREAM_OK ? gw_upstream_status(rq->upstream) : 0));
    if (error != GW_UPSTREAM_OK)
        return upstream_failed(rq, c, error);
    upstream = rq->upstream;
    rq->upstream_head_ns = limiter_now_ns();
    rq->upstream_status = gw_upstream_status(upstream);
    gw_metrics_count_response(route_runtime_of(rq)->metrics, (unsigned)rq->upstream_status);

    length = gw_upstream_content_length(upstream);
    if (carries_body(rq->method, rq->upstream_status) &&
        gw_upstream_whole_body(upstream, &body, &body_len)) {
        /* One buffer: libmicrohttpd sends head and body in a single write. */
        response = MHD_create_response_from_buffer(body_len, (void *)body, MHD_RESPMEM_MUST_COPY);
        rq->bytes = body_len;
    } else {
        response = MHD_create_response_from_callback(
            length >= 0 ? (uint64_t)length : MHD_SIZE_UNKNOWN, RESPONSE_BLOCK,
            read_upstream_body, rq, NULL);
    }
    fields = gw_upstream_fields(upstream, &fields_len);
    if (response == NULL || add_answer_fields(rq, response, fields, fields_len) != 0) {
        if (response != NULL)
            MHD_destroy_response(response);
        return MHD_NO;
    }
    return queue(rq, c, (unsigned)rq->upstream_status, response);
}

/* --- upgrades ----------------------------------------------------------------------------- */

/* Whether the client sent nothing after its upgrade request: it may speak after the switch
 * only once it has the 101, and bytes already behind the request would reach the upstream
 * unread by sluice. */
static bool quiet_after_upgrade(const struct gw_request *rq)
{
    return rq->head->heads == rq->index + 1 && rq->head->held == 0 && rq->head->fault == 0;
}

struct tunnel_close {
    struct MHD_UpgradeResponseHandle *urh;
    struct gw_loop *loop;
    int tls_fd; /* a TLS client's socket; -1 for plain HTTP */
};

/* The tunnel is over: libmicrohttpd closes the client's socket (on a loop, once woken). Over
 * TLS it first passes on what the tunnel left for the client, and waits for the client's side
 * to end too, which the read side shut ends at once. */
static void tunnel_closed(void *cls)
{
    struct tunnel_close *tc = cls;

    if (tc->tls_fd >= 0)
        shutdown(tc->tls_fd, SHUT_RD);
    MHD_upgrade_action(tc->urh, MHD_UPGRADE_ACTION_CLOSE);
    if (tc->loop != NULL)
        gw_loop_wake(tc->loop);
    free(tc);
}

static void finish(struct gw_request *rq);

/* libmicrohttpd has sent the 101 and hands over the client's socket: the two connections are
 * joined (tunnel.h). In thread_per_connection the request ends right after; on a loop it ends
 * when the tunnel closes. */
static void on_upgraded(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra_in,
                        size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh)
{
    struct gw_request *rq = cls;
    struct tunnel_close *tc = malloc(sizeof *tc);
    const struct config_route *route = route_of(rq);
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    bool tls = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION) != NULL;
    struct gw_tunnel_spec spec = {
        .client_fd = sock,
        .upstream = &rq->up,
        .upstream_tls = strncmp(route->servers[rq->server].url, "https:", 6) == 0,
        .client_tls = tls,
        .client_early = extra_in,
        .client_early_len = extra_in_size,
        .idle_timeout_ns = route->tunnel_idle_timeout_ns,
        .gauge = &route_runtime_of(rq)->metrics->tunnels_open,
        .closed = tunnel_closed,
        .closed_cls = tc,
    };

    (void)req_cls;
    /* Over TLS, libmicrohttpd carries the plaintext to `sock` through the strict reader's
     * gnutls_record_recv(): it is no HTTP from here. */
    if (fd != NULL)
        gw_wire_upgraded(fd->connect_fd, sock);
    if (tc != NULL)
        *tc = (struct tunnel_close){urh, rq->loop, tls && fd != NULL ? fd->connect_fd : -1};
    if (tc == NULL || !quiet_after_upgrade(rq) || gw_tunnel_open(rq->tunnels, &spec) != 0) {
        gw_warn("route %s: an upgraded connection was closed at once: %s", route->name,
                tc == NULL ? "out of memory" : "the client sent bytes before the 101");
        free(tc);
        gw_upgrade_free(&rq->up);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
    }
    close_attempt(rq); /* the exchange with the server is over: a tunnel is no request in flight */
    finish(rq);
}

/* The upstream's 101, with its fields (the hop-by-hop ones aside) and the RateLimit fields;
 * libmicrohttpd then calls on_upgraded(). The upstream must switch to the protocol asked. */
static enum MHD_Result respond_switch(struct gw_request *rq, struct MHD_Connection *c)
{
    struct MHD_Response *response;
    const char *name, *value, *upgrade = NULL;
    size_t cursor = 0;
    int upgrades = 0;
    bool connection_upgrade = false;

    /* One Upgrade, naming the protocol asked, and Connection naming upgrade (RFC 9110 7.8). */
    while (gw_field_next(rq->up.head, rq->up.head_len, &cursor, &name, &value))
        if (strcasecmp(name, "Upgrade") == 0 && ++upgrades == 1)
            upgrade = value;
        else if (strcasecmp(name, "Connection") == 0)
            connection_upgrade |= gw_header_list_has(value, "upgrade");
    if (upgrades != 1 || !connection_upgrade || strcasecmp(upgrade, rq->upgrade) != 0) {
        rq->fault = GW_FAULT_INVALID;
        gw_upgrade_free(&rq->up);
        return upstream_failed(rq, c, GW_UPSTREAM_OTHER);
    }
    /* libmicrohttpd's upgrade response has its field "Connection: Upgrade" already. */
    response = MHD_create_response_for_upgrade(on_upgraded, rq);
    if (response == NULL)
        return MHD_NO;
    MHD_add_response_header(response, "Upgrade", upgrade);
    if (add_answer_fields(rq, response, rq->up.head, rq->up.head_len) != 0) {
        MHD_destroy_response(response);
        return MHD_NO;
    }
    return queue(rq, c, MHD_HTTP_SWITCHING_PROTOCOLS, response);
}

/* An answer other than 101 to an upgrade: passed on as any other (read whole: upgrade.h), and
 * the upstream's connection closed. */
static enum MHD_Result respond_refused_upgrade(struct gw_request *rq, struct MHD_Connection *c)
{
    struct MHD_Response *response = MHD_create_response_from_buffer(
        rq->up.early_len, rq->up.early, MHD_RESPMEM_MUST_COPY);

    if (response == NULL || add_answer_fields(rq, response, rq->up.head, rq->up.head_len) != 0) {
        if (response != NULL)
            MHD_destroy_response(response);
        return MHD_NO;
    }
    rq->bytes = rq->up.early_len;
    gw_upgrade_free(&rq->up);
    return queue(rq, c, (unsigned)rq->upstream_status, response);
}

static enum MHD_Result upgrade(struct gw_request *rq, struct MHD_Connection *c);

/* On an offload thread (event mode): the upstream's side of the upgrade, then the request
 * back to its loop. */
static void run_upgrade_job(struct gw_offload_job *job)
{
    struct gw_request *rq = (struct gw_request *)job; /* the job is its first member */

    rq->upgrade_failed = gw_upgrade_connect(&rq->upgrade_fw, &rq->up) != 0;
    back_to_loop(rq);
}

/* The upstream's answer to the upgrade is in: a failure is reported and maybe tried again
 * (retries:, as for any GET), a 101 switches, anything else is passed on. */
static enum MHD_Result upgrade_answered(struct gw_request *rq, struct MHD_Connection *c)
{
    enum gw_upstream_error error = GW_UPSTREAM_OK;

    rq->fault = rq->upgrade_failed ? rq->up.fault : GW_FAULT_NONE;
    if (rq->upgrade_failed)
        error = gw_fault_error(rq->fault);
    if (end_attempt(rq, error, rq->upgrade_failed ? 0 : rq->up.status)) {
        gw_upgrade_free(&rq->up);
        rq->upgrade_asked = false;
        return upgrade(rq, c);
    }
    if (rq->upgrade_failed) {
        gw_upgrade_free(&rq->up);
        return upstream_failed(rq, c, error);
    }
    rq->upstream_head_ns = limiter_now_ns();
    rq->upstream_status = rq->up.status;
    gw_metrics_count_response(route_runtime_of(rq)->metrics, (unsigned)rq->upstream_status);
    if (rq->up.status == MHD_HTTP_SWITCHING_PROTOCOLS)
        return respond_switch(rq, c);
    return respond_refused_upgrade(rq, c);
}

/* An allowed upgrade request (upgrade.h): the upstream's connection made and its answer read,
 * here on the connection's thread in thread_per_connection, on an offload thread in event mode
 * with the connection suspended meanwhile (as for the store). */
static enum MHD_Result upgrade(struct gw_request *rq, struct MHD_Connection *c)
{
    if (rq->upgrade_asked)
        return upgrade_answered(rq, c);
    rq->upgrade_asked = true;
    if (!quiet_after_upgrade(rq)) {
        refuse(rq, MHD_HTTP_BAD_REQUEST, "the client sent bytes after its upgrade request "
                                         "before the answer");
        return respond_problem(rq, c, rq->refusal, rq->refusal_detail);
    }
    if (begin_attempt(rq, c, &rq->upgrade_fw) != 0)
        return respond_problem(rq, c, rq->refusal, rq->refusal_detail);
    if (rq->loop != NULL) {
        set_aside(rq, c);
        rq->upgrade_job.run = run_upgrade_job;
        gw_offload_queue(rq->offload, &rq->upgrade_job);
        return MHD_YES;
    }
    rq->upgrade_failed = gw_upgrade_connect(&rq->upgrade_fw, &rq->up) != 0;
    return upgrade_answered(rq, c);
}

/* Reads and lets go of the rest of a body that goes nowhere: one refused, or one the upstream
 * stopped taking. A client that sends more than twice max_body has its connection closed
 * without an answer, rather than read without end. */
static enum MHD_Result drop_body(struct gw_request *rq, size_t *size)
{
    rq->body_read += *size;
    *size = 0;
    return rq->body_read / 2 > rq->runtime->config->server.max_body ? MHD_NO : MHD_YES;
}

/* A piece of the request body (libmicrohttpd's upload_data): into the body's window and on
 * upstream (body.h). A body of known length is upstream from its first byte (start_body());
 * one without (chunked) waits in the window until the window is full, and goes with its
 * length if it ends before that. Without a loop, a full window waits for the upstream to take
 * some; on a loop the rest is left in `*size`, and the connection waits, suspended, until the
 * upstream has taken some (libmicrohttpd then hands the rest over again). A failure is
 * answered at the final call, the body's end: libmicrohttpd answers nothing before it. */
static enum MHD_Result take_body(struct gw_request *rq, struct MHD_Connection *c, const char *data,
                                 size_t *size)
{
    enum gw_upstream_error error;

    if (rq->refusal == 0 && rq->body_read + *size > rq->runtime->config->server.max_body) {
        refuse(rq, MHD_HTTP_CONTENT_TOO_LARGE, TOO_LARGE);
        drop_upstream(rq);
    }
    while (*size > 0 && rq->refusal == 0 && !rq->body_dropped) {
        size_t n = gw_body_put(&rq->body, data, *size);

        if (n == 0 && gw_body_room(&rq->body) > 0) {
            refuse(rq, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory for the request body");
            drop_upstream(rq);
            break;
        }
        data += n;
        *size -= n;
        rq->body_read += n;
        if (rq->upstream == NULL && *size == 0)
            return MHD_YES; /* a chunked body, still within the window */
        error = rq->upstream == NULL ? send_upstream(rq, c) : GW_UPSTREAM_OK;
        if (error == GW_UPSTREAM_OK)
            error = gw_upstream_feed(rq->upstream, *size > 0);
        if (error == GW_UPSTREAM_PENDING) {
            await_upstream(rq);
            return MHD_YES;
        }
        if (error == GW_UPSTREAM_ANSWERED) {
            rq->body_dropped = true; /* the answer goes out at the final call */
        } else if (error != GW_UPSTREAM_OK && rq->refusal == 0 && !end_attempt(rq, error, 0)) {
            rq->upstream_error = error;
            rq->body_dropped = true;
        } else if (error != GW_UPSTREAM_OK && rq->refusal == 0) {
            error = send_upstream(rq, c); /* a retry, from the body's first byte */
            if (error != GW_UPSTREAM_OK && rq->refusal == 0) {
                rq->upstream_error = error;
                rq->body_dropped = true;
            }
        }
    }
    return drop_body(rq, size);
}

/* A body of known length goes upstream as it arrives: the exchange starts now, before its
 * first byte. 0, or -1 when the request was answered instead. */
static int start_body(struct gw_request *rq, struct MHD_Connection *c, enum MHD_Result *ret)
{
    enum gw_upstream_error error = send_upstream(rq, c);

    if (error == GW_UPSTREAM_OK)
        return 0;
    *ret = answer_failure(rq, c, error);
    return -1;
}

/* The body's end (the final call): the answer to a failure met on the way, or the body's
 * last bytes sent and the upstream's answer awaited. */
static enum MHD_Result end_body(struct gw_request *rq, struct MHD_Connection *c)
{
    if (rq->refusal != 0 || refuse_misread(rq, true)) {
        drop_upstream(rq);
        return respond_problem(rq, c, rq->refusal, rq->refusal_detail);
    }
    if (rq->upstream_error != GW_UPSTREAM_OK)
        return upstream_failed(rq, c, rq->upstream_error);
    if (rq->upgrade != NULL)
        return upgrade(rq, c);
    if (rq->has_body && !rq->body.ended) {
        rq->body.ended = true;
        if (rq->upstream == NULL)
            rq->body.length = (int64_t)rq->body.received; /* it fit: it goes with its length */
    }
    return forward(rq, c);
}

/* --- the request's life ---------------------------------------------------------------- */

/* The end of the first call: the headers are in and the request is decided. Answering before
 * the body makes libmicrohttpd close the connection after the answer (unless the body is
 * empty); worth it only to avoid reading a body that is refused anyway. Otherwise the answer
 * comes at the final call, where a 429 or 404 keeps the connection open. */
static enum MHD_Result end_first_call(struct gw_request *rq, struct MHD_Connection *c)
{
    enum MHD_Result ret = MHD_YES;

    if (rq->refusal != 0 && rq->has_body && !rq->empty_body)
        return respond_problem(rq, c, rq->refusal, rq->refusal_detail);
    if (rq->refusal == 0 && rq->has_body && rq->body.length > 0)
        start_body(rq, c, &ret);
    return ret;
}

enum MHD_Result gw_request_handle(struct gw_request *rq, struct MHD_Connection *c,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size)
{
    if (!rq->started) {
        rq->started = true;
        rq->method = method;
        rq->http11 = strcmp(version, "HTTP/1.1") == 0;
        begin(rq, c);
        if (rq->store_pending && send_to_store(rq, c)) /* store_answered() resumes it */
            return MHD_YES;
        return end_first_call(rq, c);
    }
    if (rq->store_pending) {
        /* Back from the store. libmicrohttpd makes the first call again for a connection
         * suspended in it: this is still the first call. */
        rq->store_pending = false;
        decide_shared(rq, rq->store_result);
        return end_first_call(rq, c);
    }
    if (*upload_data_size > 0)
        return take_body(rq, c, upload_data, upload_data_size);
    return end_body(rq, c);
}

bool gw_request_upgraded(const struct gw_request *rq)
{
    return rq->status == MHD_HTTP_SWITCHING_PROTOCOLS;
}

bool gw_request_reading_body(const struct gw_request *rq)
{
    /* Asked right after gw_request_handle(), when the store's thread (or an upgrade's) may
     * already be handing the request back: `suspended` is read only once neither has it
     * (store_pending is this thread's; a request with a body is never an upgrade). */
    return rq->has_body && !rq->empty_body && !rq->store_pending && !rq->body.ended &&
           !rq->suspended && rq->status == 0;
}

/* The name of the limit that denied the request (or would have, on a dry_run route), or NULL. */
static const char *denying_limit(const struct gw_request *rq)
{
    if (rq->decision != GW_DENIED && rq->decision != GW_DRY_RUN_DENIED)
        return NULL;
    return rq->set->config[rq->verdict.binding].name;
}

/* The keys the request was counted under (or, for "ip", could have been), with their sources
 * written into `sources`, for the access log's keys. */
static size_t access_keys(const struct gw_request *rq, struct gw_access_key *keys,
                          char sources[][GW_KEY_SOURCE_LEN])
{
    const struct config_route *route = route_of(rq);
    size_t n = 0;

    if (rq->ip_key[0] == '\0' || rq->key[0] == '\0')
        return 0;
    keys[n++] = (struct gw_access_key){"ip", rq->ip_key};
    gw_key_source(route->key_kind, route->key_name, route->identifies_consumers, sources[n]);
    keys[n] = (struct gw_access_key){sources[n], rq->key};
    n++;
    for (size_t i = 0; i < rq->set->n_limits; i++)
        if (!rq->selection.route_key[i]) {
            gw_limits_key_source(route, &rq->set->config[i], sources[n]);
            keys[n] = (struct gw_access_key){sources[n], rq->limit_keys[i]};
            n++;
        }
    return n;
}

/* The client's address as its keys see it, as text into `out`, where the access log has it;
 * NULL otherwise (not logged, or not an IP connection). */
static const char *access_client_addr(const struct gw_request *rq, char out[INET6_ADDRSTRLEN])
{
    const struct config *config = rq->runtime->config;
    struct gw_addr client;

    if (!rq->has_peer || rq->runtime->access_log_fd < 0 ||
        config->server.access_log_client != CONFIG_ACCESS_CLIENT_ADDRESS)
        return NULL;
    client = gw_client_addr(&rq->peer, rq->forwarded_for, &config->server.trusted_proxies);
    write_address(out, INET6_ADDRSTRLEN, &client);
    return out;
}

/* The request's figures: counted in the route's metrics, and its access log line. */
static void count_and_log(struct gw_request *rq)
{
    int64_t now = limiter_now_ns();
    const struct config_route *route = route_of(rq);
    const struct config *config = rq->runtime->config;
    char client_addr[INET6_ADDRSTRLEN], sources[GW_ACCESS_KEYS_MAX][GW_KEY_SOURCE_LEN];
    bool stand_in;
    struct gw_access_entry entry;

    if (route != NULL)
        gw_metrics_count_request(route_runtime_of(rq)->metrics, rq->set ? rq->set->plan : NULL,
                                 rq->decision, now - rq->start_ns);
    if (!rq->started || rq->runtime->access_log_fd < 0)
        return;
    /* A refused head reached libmicrohttpd as a stand-in (wire.h): its line says nothing. */
    stand_in = rq->head->fault != 0 && !rq->head->fault_in_body && rq->head->fault_at == rq->index;
    entry = (struct gw_access_entry){
        .route = route ? route->name : NULL,
        .method = rq->method && !stand_in ? rq->method : "-",
        .target = stand_in ? "-" : rq->raw_uri,
        .status = rq->status,
        .decision = gw_decision_name(rq->decision),
        .upstream_status = rq->upstream_status,
        .upstream_ns = rq->upstream_head_ns ? rq->upstream_head_ns - rq->start_ns : 0,
        .duration_ns = now - rq->start_ns,
        .bytes = rq->bytes,
        .client_key = rq->key[0] ? rq->key : NULL,
        .client = access_client_addr(rq, client_addr),
        .limit = denying_limit(rq),
        .user_agent = rq->user_agent,
        .consumer = rq->consumer,
        .plan = rq->consumer_plan,
        .dropped_headers = rq->dropped_headers,
        .upstream_error = gw_fault_name(rq->fault),
        .upstream_server = rq->attempts > 0 ? route->servers[rq->server].url : "",
        .request_id = rq->request_id,
        .trace_id = rq->trace.trace_id,
        .host = stand_in ? NULL : rq->host,
        .decided_ns = rq->verdict.decided_ns,
        .memo = rq->memo,
    };
    if (route != NULL && rq->set != NULL)
        entry.n_keys = access_keys(rq, entry.keys, sources);
    gw_access_log_write(rq->runtime->access_log_fd, config->server.access_log_client, &entry);
}

/* The request is over for its client, once: counted in the route's metrics, its access log
 * line written, and then out of flight (metric readers wait for none in flight). That is when
 * its answer has been sent (gw_request_done()), or when its connection switched protocols
 * (on_upgraded()): on a loop libmicrohttpd ends an upgraded request only when its tunnel
 * closes, but a tunnel is no request, and its line and figures are those of the switch. */
static void finish(struct gw_request *rq)
{
    if (!rq->in_flight)
        return;
    count_and_log(rq);
    rq->in_flight = false;
    gw_metrics_in_flight(rq->runtime->metrics, -1);
}

void gw_request_done(struct gw_request *rq)
{
    close_attempt(rq);
    gw_upstream_release(rq->upstream);
    finish(rq);
    gw_runtime_release(rq->runtime);
    free(rq->upstream_headers);
    free(rq->upstream_header_text);
    free(rq->upstream_url);
    gw_body_free(&rq->body);
    gw_upgrade_free(&rq->up); /* unless a tunnel took its connection */
    free(rq->upgrade_field);
    free(rq->connection);
    free(rq->forwarded_for);
    free(rq->path);
    free(rq->raw_uri);
    free(rq);
}
