/* A request's limits asked and reported; design in limit.h. */
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gateway/common/random.h"
#include "gateway/limits/decide.h"
#include "gateway/modules/limit/identify.h"
#include "gateway/modules/limit/limit.h"
#include "gateway/modules/limit/limit_options.h"
#include "gateway/modules/limit/limit_sets.h"
#include "gateway/modules/limit/refusals.h"
#include "gateway/modules/limit/shared.h"
#include "gateway/modules/limit/slots.h"
#include "gateway/modules/limit/turns.h"

struct limit_ctx {
    bool limited;  /* the route's limits decided: the RateLimit fields go out */
    bool waiting;  /* for the shared store's answer */
    bool refused;  /* by its limits: denied, or would have been on a dry_run route */
    bool settled;  /* the answer's status was held to each limit's count: */
    bool in_store; /* charged by the shared store (else, if at all, in this process) */
    bool seated;   /* holds a seat in its limits' queues (turns.h) */
    bool sleeping; /* waits for its turn */
    enum gw_store_result store_result;
    enum gw_woken woken;            /* why it went on after waiting for its turn */
    int64_t waited_from;            /* when it began to wait for its turn */
    int64_t waited_ns;              /* how long it waited for its turn */
    int64_t asked_ns;               /* when it asked the shared store */
    const struct gw_limit_set *set; /* the limits it is held to: the route's, or a plan's */
    struct gw_limits_selection selection;
    struct gw_limits_decision verdict; /* verdict.decided_ns: 0 if not decided */
    char key[GW_KEY_LEN];
    char ip_key[GW_KEY_LEN];                  /* the client's ip key, for the access log */
    const char *ids[LIMITER_MAX_PER_REQUEST]; /* each limit's key: `key` or below */
    char limit_keys[LIMITER_MAX_PER_REQUEST][GW_KEY_LEN]; /* limits that name their own key */
    char sources[GW_ACCESS_KEYS_MAX][GW_KEY_SOURCE_LEN];  /* the log's names of the keys */
    char lease[GW_STORE_LEASE_LEN]; /* its concurrency slots' lease in the shared store, or "" */
};

/* The route's exempt and dry_run; none for a route of a config read without them. */
static const struct limit_options *options_of(const struct gw_req *rq)
{
    static const struct limit_options none;
    const struct limit_options *o = config_route_block(gw_req_route(rq), &gw_limit_route_options);

    return o != NULL ? o : &none;
}

/* The limits the client is held to (decide.h) and the key each counts it under: the route's
 * key (a consumer's name, or for an unknown key the client's address), or the limit's own.
 * 0, or -1 when the request is refused: 401 for an unknown key (unless `exempt`), or for a
 * key's spelling (identify.h). */
static int select_limits(struct gw_req *rq, struct limit_ctx *c, bool exempt)
{
    const struct config_route *route = gw_req_route(rq);
    const struct gw_limit_route *r = gw_req_route_state(rq, &gw_limit_module);
    const struct gw_consumer *consumer = NULL;

    if (route->identifies_consumers && gw_identify_consumer(rq, &consumer) != 0)
        return -1;
    if (gw_limits_select(route, consumer, exempt, rq->method, &c->selection) != 0) {
        gw_req_refuse(rq, 401, r->unknown_key_detail);
        return -1;
    }
    c->set = c->selection.plan == GW_LIMITS_OWN ? &r->own : &r->plans[c->selection.plan];
    if (consumer != NULL)
        snprintf(c->key, sizeof c->key, "consumer:%s", consumer->name);
    else if (route->identifies_consumers)
        gw_ip_key(&rq->client, route->ipv6_prefix_len, c->key);
    else if (gw_identify_key(rq, route->key_kind, route->key_name, c->key) != 0)
        return -1;
    for (size_t i = 0; i < c->selection.n_limits; i++) {
        const struct config_limit *limit = &c->selection.limits[i];

        if (c->selection.route_key[i])
            c->ids[i] = c->key; /* most limits count under the route's key */
        else if (gw_identify_key(rq, limit->key_kind, limit->key_name, c->limit_keys[i]) != 0)
            return -1;
        else
            c->ids[i] = c->limit_keys[i];
    }
    return 0;
}

/* The limits answered (c->verdict): each refusing limit counted, and the request denied
 * unless the route only tries its limits (dry_run). */
static enum gw_step conclude(struct gw_req *rq, struct limit_ctx *c)
{
    const struct config_route *route = gw_req_route(rq);
    const struct gw_limits_decision *verdict = &c->verdict;

    if (verdict->outcome == GW_LIMITS_FAILED_OPEN) {
        c->limited = false; /* no shared count to report */
        return GW_NEXT;
    }
    for (size_t i = 0; verdict->outcome == GW_LIMITS_DENIED && i < c->set->n_limits; i++)
        if (!verdict->each[i].allowed)
            gw_metrics_count_denial(c->set->counts[i]);
    if (verdict->outcome == GW_LIMITS_ALLOWED) {
        /* Slots it took are held until it ends; without memory to say so, not taken. */
        if (gw_limit_set_has_slots(c->set) &&
            gw_limit_slots_hold(rq, c->set, c->ids, c->selection.costs,
                                c->in_store ? c->lease : NULL) != 0) {
            gw_req_refuse(rq, 503, "out of memory");
            return GW_ANSWERED;
        }
        return GW_NEXT;
    }
    c->refused = true;
    if (options_of(rq)->dry_run) {
        rq->decision = GW_DRY_RUN_DENIED;
        return GW_NEXT;
    }
    rq->decision = GW_DENIED;
    gw_req_refuse(rq, route->on_limit.status, GW_DENIED_DETAIL);
    return GW_ANSWERED;
}

/* Gives back, wherever the decision charged it, each charge whose limit's count: does not
 * hold `*status` (NULL: every charge, for a request that will not pass). */
static void give_back(struct gw_req *rq, struct limit_ctx *c, const unsigned *status)
{
    int64_t now = limiter_now_ns();

    if (c->in_store) {
        gw_limit_store_give_back(rq->runtime->store, gw_req_route(rq), c->set, &c->selection,
                                 c->ids, c->verdict.each, status);
        return;
    }
    for (size_t i = 0; i < c->set->n_limits; i++)
        if (status == NULL || !config_count_holds(&c->set->config[i].count, *status))
            limiter_refund(c->set->limiters[i], c->ids[i], c->selection.costs[i],
                           c->verdict.each[i].charged_ns, now);
}

/* Its turn came, or its client left first (turns.h). */
static enum gw_step turn_over(struct gw_req *rq, struct limit_ctx *c)
{
    c->sleeping = false;
    c->seated = false;
    gw_limit_turn_unseat(c->set);
    c->waited_ns = limiter_now_ns() - c->waited_from;
    if (c->woken == GW_WOKEN_ON_TIME)
        return conclude(rq, c);
    give_back(rq, c, NULL);
    c->limited = false;
    c->settled = true;
    if (c->woken == GW_WOKEN_CLIENT_LEFT)
        gw_req_refuse(rq, 499, "the client left while waiting for its turn");
    else
        gw_req_refuse(rq, 503, "the request could not wait for its turn");
    return GW_ANSWERED;
}

/* The limits have answered: a request admitted at a later turn waits for it; the rest go on
 * to their conclusion, giving back their seats. */
static enum gw_step decided(struct gw_req *rq, struct limit_ctx *c)
{
    int64_t wait = c->verdict.outcome == GW_LIMITS_ALLOWED ? c->verdict.each[0].wait_ns : 0;

    if (c->seated && wait > 0) {
        /* From the decision here, or from the store's answer (its wait counts from Redis's
         * decision, a moment earlier: never too soon). */
        c->waited_from = c->verdict.decided_ns;
        c->sleeping = true;
        if (gw_req_sleep(rq, c->waited_from + wait, &c->woken) == 0)
            return GW_WAIT;
        c->woken = GW_WOKEN_REFUSED;
        return turn_over(rq, c);
    }
    if (c->seated) {
        c->seated = false;
        gw_limit_turn_unseat(c->set);
    }
    return conclude(rq, c);
}

static enum gw_step decide_shared(struct gw_req *rq, struct limit_ctx *c,
                                  enum gw_store_result result)
{
    c->in_store = result == GW_STORE_OK;
    if (!c->in_store && c->lease[0] != '\0') /* Redis may have taken them all the same */
        gw_limit_slots_give_back_in_store(rq, c->set, c->ids, c->selection.costs, c->lease);
    if (!c->in_store && rq->config->replicas_auto) /* this replica's share, as they are now */
        gw_limits_share(&c->selection, c->set->limiters,
                        gw_store_replicas(rq->runtime->store));
    if (gw_limits_decide_shared(&c->verdict, result, rq->config->on_store_error, c->set->limiters,
                                c->ids, &c->selection, limiter_now_ns()) == GW_LIMITS_DENIED &&
        c->in_store && !c->selection.waits && gw_refusals_may_keep(c->set))
        gw_refusals_keep(c->set, c->ids, c->selection.costs, c->verdict.each, c->asked_ns,
                         rq->config->redis.refusal_cache_ns);
    return decided(rq, c);
}

/* A refusal of the store's that still holds (refusals.h), answered here: nothing charged. */
static bool refused_already(struct gw_req *rq, struct limit_ctx *c)
{
    int64_t now = limiter_now_ns();

    if (c->selection.waits || rq->config->redis.refusal_cache_ns == 0 ||
        !gw_refusals_find(c->set, c->ids, c->selection.costs, now, c->verdict.each))
        return false;
    gw_limits_decide_shared(&c->verdict, GW_STORE_OK, rq->config->on_store_error, c->set->limiters,
                            c->ids, &c->selection, now);
    return true;
}

/* On one of the store's threads: its answer is in c->verdict.each. */
static void store_answered(void *arg, enum gw_store_result result)
{
    struct gw_req *rq = arg;
    struct limit_ctx *c = gw_req_ctx(rq, &gw_limit_module);

    c->store_result = result;
    gw_req_hand_back(rq);
}

/* Asks the shared store: WAIT for its answer, or, when it is not to be asked now, what
 * on_store_error says. */
static enum gw_step ask_store(struct gw_req *rq, struct limit_ctx *c)
{
    const struct gw_limit_set *set = c->set;
    struct gw_store_ask ask = gw_limit_store_ask(gw_req_route(rq), set, &c->selection, c->ids);
    struct gw_store_call *call;

    if (gw_limit_set_has_slots(set)) {
        unsigned char id[16];

        gw_random_bytes(id, sizeof id);
        sodium_bin2hex(c->lease, sizeof c->lease, id, sizeof id);
        ask.lease = c->lease;
    }
    if (c->selection.waits)
        ask.max_wait_ns = c->selection.max_wait_ns;
    c->asked_ns = limiter_now_ns(); /* no later than Redis decides: refusals.h */
    call = gw_store_prepare(rq->runtime->store, &ask);
    if (call == NULL)
        return decide_shared(rq, c, GW_STORE_FAILED);
    c->waiting = true;
    gw_req_will_wait(rq);
    gw_store_send(rq->runtime->store, call, c->verdict.each, store_answered, rq);
    return GW_WAIT;
}

static enum gw_step limit_step(struct gw_req *rq, void *ctx)
{
    struct limit_ctx *c = ctx;
    const struct config_route *route = gw_req_route(rq);
    const struct gw_limit_route *r = gw_req_route_state(rq, &gw_limit_module);
    bool exempt;

    if (c->waiting) {
        c->waiting = false;
        return decide_shared(rq, c, c->store_result);
    }
    if (c->sleeping)
        return turn_over(rq, c);
    c->set = &r->own;
    if (!rq->has_peer)
        return GW_NEXT; /* not an IP connection: nothing to count it by */
    exempt = gw_cidrs_contain(&options_of(rq)->exempt, &rq->client);
    gw_ip_key(&rq->client, route->ipv6_prefix_len, c->ip_key);
    if (select_limits(rq, c, exempt) != 0)
        return GW_ANSWERED;
    if (exempt) {
        rq->decision = GW_EXEMPT;
        return GW_NEXT;
    }
    if (c->set->n_limits == 0) {
        c->verdict.decided_ns = limiter_now_ns(); /* by no limit, which a replay can vary */
        return GW_NEXT;
    }
    c->limited = true;
    /* A request may wait for its turn with a seat in each delay's queue, never on a route
     * that only tries its limits. */
    c->selection.waits = c->selection.waits && !options_of(rq)->dry_run;
    c->seated = c->selection.waits && gw_limit_turn_seat(c->set);
    c->selection.waits = c->seated;
    if (r->shared && refused_already(rq, c))
        return decided(rq, c);
    if (r->shared)
        return ask_store(rq, c);
    gw_limits_decide_local(&c->verdict, c->set->limiters, c->ids, &c->selection, limiter_now_ns());
    return decided(rq, c);
}

/* Whether the upstream's field `name` is one this module sets: the client gets the
 * gateway's figures only, never two sets. */
static bool owns_field(const struct gw_req *rq, const void *ctx, const char *name)
{
    const struct limit_ctx *c = ctx;
    enum config_headers mode;

    if (!c->limited)
        return false;
    mode = gw_req_route(rq)->headers;
    if ((mode == CONFIG_HEADERS_IETF || mode == CONFIG_HEADERS_BOTH) &&
        (strcasecmp(name, "RateLimit") == 0 || strcasecmp(name, "RateLimit-Policy") == 0))
        return true;
    return (mode == CONFIG_HEADERS_X_RATELIMIT || mode == CONFIG_HEADERS_BOTH) &&
           (strcasecmp(name, "X-RateLimit-Limit") == 0 ||
            strcasecmp(name, "X-RateLimit-Remaining") == 0 ||
            strcasecmp(name, "X-RateLimit-Reset") == 0);
}

/* A denial's answer: on_limit's body in place of the problem, when the route gives one. */
static void denial_body(const struct config_route *route, struct gw_answer *a)
{
    if (route->on_limit.body == NULL)
        return;
    gw_answer_reset(a);
    a->status = route->on_limit.status;
    a->kind = GW_ANSWER_STATIC; /* read once per config, which the request holds */
    a->body = route->on_limit.body;
    a->body_len = route->on_limit.body_len;
    gw_answer_field(a, "Content-Type", route->on_limit.content_type);
}

/* What a 401 asks for (RFC 9110 section 11.6.1): the route's key, as `ApiKey
 * header="X-API-Key"` or `ApiKey query="api_key"`; the name is a token, so nothing in it
 * needs escaping. A name too long for the answer's room gets no field. */
static void challenge(const struct config_route *route, struct gw_answer *a)
{
    char field[2 * GW_FIELD_LEN];
    int len;

    if (route->key_kind == CONFIG_KEY_IP || route->key_name == NULL)
        return;
    len = snprintf(field, sizeof field, "ApiKey %s=\"%s\"",
                   route->key_kind == CONFIG_KEY_HEADER ? "header" : "query", route->key_name);
    if (len > 0 && (size_t)len < sizeof field)
        gw_answer_copied(a, "WWW-Authenticate", field);
}

/* Gives back, once, the charge of each limit whose count: does not hold the answer's
 * `status` (config.h): the request was charged when admitted, so concurrent requests never
 * pass more counted answers than the quota; this refund only lets later ones in. */
static void settle(struct gw_req *rq, struct limit_ctx *c, unsigned status)
{
    if (c->settled || !c->limited || c->verdict.outcome != GW_LIMITS_ALLOWED)
        return;
    c->settled = true;
    for (size_t i = 0; i < c->set->n_limits; i++)
        if (!config_count_holds(&c->set->config[i].count, status))
            gw_metrics_count_refund(c->set->counts[i]);
    give_back(rq, c, &status);
}

static void on_answer(struct gw_req *rq, void *ctx, struct gw_answer *a)
{
    struct limit_ctx *c = ctx;
    const struct config_route *route = gw_req_route(rq);
    const struct limiter_decision *binding = &c->verdict.each[c->verdict.binding];
    bool denial = rq->decision == GW_DENIED && rq->refusal != 0 && a->status == rq->refusal;
    const struct limiter_params *params;
    char field[GW_FIELD_LEN];
    int64_t window;

    if (denial)
        denial_body(route, a);
    if (rq->refusal == 401 && a->status == 401)
        challenge(route, a);
    settle(rq, c, a->status);
    if (!c->limited)
        return;
    params = &c->set->config[c->verdict.binding].params;
    if (route->headers == CONFIG_HEADERS_IETF || route->headers == CONFIG_HEADERS_BOTH) {
        gw_answer_field(a, "RateLimit-Policy", c->set->policy);
        gw_format_ratelimit(field, c->set->limits[c->verdict.binding]->name, params, binding);
        gw_answer_copied(a, "RateLimit", field);
    }
    if (route->headers == CONFIG_HEADERS_X_RATELIMIT || route->headers == CONFIG_HEADERS_BOTH) {
        gw_answer_number(a, "X-RateLimit-Limit", gw_quota(params, &window));
        gw_answer_number(a, "X-RateLimit-Remaining", binding->remaining);
        gw_answer_number(a, "X-RateLimit-Reset", (uint64_t)gw_reset_seconds(params, binding));
    }
    if (denial)
        gw_answer_number(a, "Retry-After",
                         (uint64_t)gw_retry_after_seconds(binding->retry_after_ms));
}

/* The keys the request was counted under (or, for "ip", could have been), for the log. */
static size_t access_keys(const struct gw_req *rq, struct limit_ctx *c, struct gw_access_key *keys,
                          char sources[][GW_KEY_SOURCE_LEN])
{
    const struct config_route *route = gw_req_route(rq);
    size_t n = 0;

    if (c->ip_key[0] == '\0' || c->key[0] == '\0')
        return 0;
    keys[n++] = (struct gw_access_key){"ip", c->ip_key};
    gw_key_source(route->key_kind, route->key_name, route->identifies_consumers, sources[n]);
    keys[n] = (struct gw_access_key){sources[n], c->key};
    n++;
    for (size_t i = 0; i < c->set->n_limits; i++)
        if (!c->selection.route_key[i]) {
            gw_limits_key_source(route, &c->set->config[i], sources[n]);
            keys[n] = (struct gw_access_key){sources[n], c->limit_keys[i]};
            n++;
        }
    return n;
}

static void on_log(const struct gw_req *rq, void *ctx, struct gw_access_entry *entry)
{
    struct limit_ctx *c = ctx;

    if (rq->route < 0)
        return;
    gw_metrics_count_request(gw_req_route_runtime(rq)->metrics, c->set ? c->set->plan : NULL,
                             rq->decision, entry->duration_ns);
    entry->client_key = c->key[0] ? c->key : NULL;
    entry->decided_ns = c->verdict.decided_ns;
    entry->waited_ns = c->waited_ns;
    if (c->set == NULL)
        return;
    if (c->refused)
        entry->limit = c->set->config[c->verdict.binding].name;
    entry->n_keys = access_keys(rq, c, entry->keys, c->sources);
}

/* A request that ends while it still holds a seat (it never went on after waiting: the
 * server stopped first) gives it back, and the place it kept. */
static void limit_free(struct gw_req *rq, void *ctx)
{
    struct limit_ctx *c = ctx;

    if (c->sleeping)
        give_back(rq, c, NULL);
    if (c->seated)
        gw_limit_turn_unseat(c->set);
}

static const struct gw_limit_route *state_of(const struct gw_runtime *rt, size_t route)
{
    return gw_runtime_state(rt, route, &gw_limit_module);
}

static int route_open(struct gw_runtime *rt, size_t route, const struct gw_runtime *previous,
                      void **state, char *err, size_t err_len)
{
    struct gw_limit_route *r = NULL;
    int rc = gw_limit_route_open(rt, route, previous, state_of, &r, err, err_len);

    *state = r;
    return rc;
}

static void route_close(struct gw_runtime *rt, size_t route, void *state)
{
    (void)rt;
    (void)route;
    gw_limit_route_free(state);
}

static void gauges(const struct gw_runtime *rt, FILE *out)
{
    gw_limit_routes_render(rt, state_of, out);
    gw_refusals_render(out);
}

struct gw_module gw_limit_module = {
    .name = "limit",
    .ctx_size = sizeof(struct limit_ctx),
    .options = {&gw_limit_route_options},
    .on = {[GW_PHASE_LIMIT] = limit_step},
    .on_answer = on_answer,
    .owns_field = owns_field,
    .on_log = on_log,
    .on_free = limit_free,
    .route_open = route_open,
    .route_close = route_close,
    .gauges = gauges,
};
