/* One client's quota looked at and changed; design in quota.h. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/respond.h"
#include "gateway/limits/decide.h"
#include "gateway/modules/limit/limit.h"
#include "gateway/modules/limit/limit_sets.h"
#include "gateway/modules/limit/quota.h"
#include "gateway/modules/limit/refusals.h"
#include "gateway/modules/limit/shared.h"
#include "gateway/ops/access_log.h"

#define N LIMITER_MAX_PER_REQUEST

/* The client as the operator named it, found as a request would be (limit.c's
 * select_limits()). */
struct client {
    const struct config_route *route;
    const struct gw_limit_route *r;
    const struct gw_limit_set *set;
    struct gw_limits_selection selection;
    const char *consumer; /* its name, or NULL */
    char key[GW_KEY_LEN]; /* the route's key; "" when not given */
    const char *ids[N];   /* each limit's key; NULL: not looked up (its key not given) */
    char own_keys[N][GW_KEY_LEN];
    char sources[N][GW_KEY_SOURCE_LEN];
    bool picked[N]; /* limit= names it, or none is named */
};

/* An answer on its way: a problem, or the JSON of the limits. */
struct answer {
    unsigned status;
    char detail[256];
};

static int fail(struct answer *a, unsigned status, const char *fmt, const char *what)
{
    a->status = status;
    snprintf(a->detail, sizeof a->detail, fmt, what);
    return -1;
}

/* The ip key of `text`, an address, for `route`; 0, or -1 when it is not one. */
static int ip_key_of(const struct config_route *route, const char *text, char out[GW_KEY_LEN])
{
    struct gw_addr addr;

    if (gw_addr_parse(text, strlen(text), &addr) != 0)
        return -1;
    gw_ip_key(&addr, route->ipv6_prefix_len, out);
    return 0;
}

/* The key a client counts under for a key of `kind` whose value is `value` (NULL or "":
 * absent, so its address, `ip`, as for a request without it). 0; 1 when neither is given;
 * -1 when `ip` (or an ip key's value) is not an address. */
static int key_of(const struct config_route *route, enum config_key_kind kind, const char *value,
                  const char *ip, char out[GW_KEY_LEN])
{
    if (kind == CONFIG_KEY_IP && value != NULL && value[0] != '\0')
        ip = value;
    else if (value != NULL && value[0] != '\0') {
        gw_value_key(kind == CONFIG_KEY_HEADER ? "header" : "query", value, out);
        return 0;
    }
    if (ip == NULL || ip[0] == '\0')
        return 1;
    return ip_key_of(route, ip, out);
}

/* The consumer the operator named, by key or by name, into `*out`: 1 when found, 0 for a key
 * none holds, -1 for a name none has (or memory short). */
static int find_consumer(struct gw_runtime *rt, const char *key, const char *name,
                         struct gw_consumer *out, struct answer *a)
{
    struct gw_consumer *sorted;
    const struct gw_consumer *found = NULL;

    if (name == NULL) {
        if (key != NULL && key[0] != '\0' && rt->consumers != NULL)
            found = gw_consumers_find(rt->consumers, key, strlen(key));
        if (found != NULL)
            *out = *found;
        return found != NULL;
    }
    sorted = gw_consumers_by_name(rt->config);
    if (sorted == NULL && rt->config->n_consumers > 0)
        return fail(a, 503, "%s", "out of memory");
    found = gw_consumers_named(sorted, rt->config->n_consumers, name);
    if (found != NULL)
        *out = *found; /* its name is the config's, which outlives the copy */
    free(sorted);
    return found != NULL ? 1 : fail(a, 404, "no consumer is called \"%s\"", name);
}

const char *gw_quota_action(enum gw_quota_op op)
{
    static const char *const names[] = {"show", "reset", "grant"};

    return names[op];
}

/* The route called `name` in `rt` and the limit module's state of it; -1 (404) when none. */
static int find_route(struct gw_runtime *rt, const char *name, struct client *c, struct answer *a)
{
    if (name == NULL || name[0] == '\0')
        return fail(a, 400, "%s", "give the route: route=NAME");
    for (size_t i = 0; i < rt->config->n_routes; i++)
        if (strcmp(rt->config->routes[i].name, name) == 0) {
            c->route = &rt->config->routes[i];
            c->r = gw_runtime_state(rt, i, &gw_limit_module);
            return c->r != NULL ? 0 : fail(a, 404, "route \"%s\" has no limits", name);
        }
    return fail(a, 404, "no route is called \"%s\"", name);
}

/* The route's key for the client into c->key ("" when the operator gave none). */
static int route_key(struct client *c, const struct gw_consumer *consumer, const char *key,
                     const char *ip, struct answer *a)
{
    const struct config_route *route = c->route;
    int rc;

    if (consumer != NULL) {
        snprintf(c->key, sizeof c->key, "consumer:%s", consumer->name);
        c->consumer = consumer->name;
        return 0;
    }
    /* A key no consumer holds counts under the client's address, as its requests do. */
    rc = route->identifies_consumers ? key_of(route, CONFIG_KEY_IP, NULL, ip, c->key)
                                     : key_of(route, route->key_kind, key, ip, c->key);
    if (rc < 0)
        return fail(a, 400, "\"%s\" is not an IP address",
                    route->key_kind == CONFIG_KEY_IP && key != NULL && key[0] != '\0' ? key : ip);
    if (rc > 0)
        c->key[0] = '\0';
    return 0;
}

/* The value the operator gave for `limit`'s own key: the parameter header:NAME or
 * query:NAME, NAME as the config writes it (a header's in lower case, the access log's
 * spelling; a query parameter's as it is); NULL for an ip key, or when none was given. */
static const char *own_value(const struct config_limit *limit, gw_quota_arg_fn *arg, void *cls)
{
    char name[GW_QUOTA_PARAM_LEN];
    int len;

    if (limit->key_kind == CONFIG_KEY_IP)
        return NULL;
    len = snprintf(name, sizeof name, "%s:%s",
                   limit->key_kind == CONFIG_KEY_HEADER ? "header" : "query", limit->key_name);
    if (len < 0 || (size_t)len >= sizeof name)
        return NULL;
    for (int i = 0; limit->key_kind == CONFIG_KEY_HEADER && i < len; i++)
        name[i] = (char)tolower((unsigned char)name[i]);
    return arg(cls, name);
}

/* Each limit's key: the route's, or its own from the parameter named as its source. */
static int limit_keys(struct client *c, gw_quota_arg_fn *arg, void *cls, const char *ip,
                      struct answer *a)
{
    const char *only = arg(cls, "limit");
    bool named = false;

    for (size_t i = 0; i < c->selection.n_limits; i++) {
        const struct config_limit *limit = &c->selection.limits[i];
        int rc = 0;

        gw_limits_key_source(c->route, limit, c->sources[i]);
        if (c->selection.route_key[i])
            c->ids[i] = c->key[0] != '\0' ? c->key : NULL;
        else if ((rc = key_of(c->route, limit->key_kind, own_value(limit, arg, cls), ip,
                              c->own_keys[i])) < 0)
            return fail(a, 400, "\"%s\" is not an IP address", ip);
        else
            c->ids[i] = rc == 0 ? c->own_keys[i] : NULL;
        c->picked[i] = only == NULL || strcmp(limit->name, only) == 0;
        named |= only != NULL && c->picked[i];
    }
    if (only != NULL && !named)
        return fail(a, 404, "the client's limits on this route have none called \"%s\"", only);
    return 0;
}

/* The client the operator named (quota.h), found as a request would be. */
static int find_client(struct gw_runtime *rt, gw_quota_arg_fn *arg, void *cls, struct client *c,
                       struct answer *a)
{
    const char *key = arg(cls, "key"), *name = arg(cls, "consumer"), *ip = arg(cls, "ip");
    const char *method = arg(cls, "method");
    struct gw_consumer consumer;
    int found = 0;

    if (find_route(rt, arg(cls, "route"), c, a) != 0)
        return -1;
    if (ip == NULL && c->route->key_kind == CONFIG_KEY_IP)
        ip = key; /* the route's key is the address that limits of other keys fall back to */
    if (key != NULL && name != NULL)
        return fail(a, 400, "%s", "give key= or consumer=, not both");
    if (key == NULL && name == NULL && ip == NULL)
        return fail(a, 400, "%s", "give the client: key= (or consumer=, or ip=)");
    if (ip != NULL && ip[0] != '\0' && ip_key_of(c->route, ip, c->key) != 0)
        return fail(a, 400, "\"%s\" is not an IP address", ip);
    if (method != NULL && (method[0] == '\0' || strlen(method) > 32 ||
                           method[strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ-")] != '\0'))
        return fail(a, 400, "method=%s: a method as requests send it (POST, not post)", method);
    if (name != NULL && !c->route->identifies_consumers)
        return fail(a, 400, "route \"%s\" names no consumers: give key=", c->route->name);
    if (c->route->identifies_consumers && (found = find_consumer(rt, key, name, &consumer, a)) < 0)
        return -1;
    if (gw_limits_select(c->route, found ? &consumer : NULL, false, method != NULL ? method : "GET",
                         &c->selection) != 0)
        return fail(a, 404,
                    "no consumer holds this key, and route \"%s\" refuses unknown keys (401)",
                    c->route->name);
    c->set = c->selection.plan == GW_LIMITS_OWN ? &c->r->own : &c->r->plans[c->selection.plan];
    if (route_key(c, found ? &consumer : NULL, key, ip, a) != 0)
        return -1;
    return limit_keys(c, arg, cls, ip, a);
}

/* One call to the shared store, waited for (an operator's call: the admin thread may wait). */
struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
    enum gw_store_result result;
};

static void store_done(void *arg, enum gw_store_result result)
{
    struct waiter *w = arg;

    pthread_mutex_lock(&w->lock);
    w->result = result;
    w->done = true;
    pthread_cond_signal(&w->done_cond);
    pthread_mutex_unlock(&w->lock);
}

static enum gw_store_result ask_store(struct gw_store *store, const struct gw_store_ask *ask,
                                      struct limiter_decision *out)
{
    struct waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, GW_STORE_FAILED};
    struct gw_store_call *call = gw_store_prepare(store, ask);

    if (call == NULL)
        return GW_STORE_FAILED;
    gw_store_send(store, call, out, store_done, &w);
    pthread_mutex_lock(&w.lock);
    while (!w.done)
        pthread_cond_wait(&w.done_cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    pthread_cond_destroy(&w.done_cond);
    pthread_mutex_destroy(&w.lock);
    return w.result;
}

/* Whether limit i is looked at (show) or changed (reset, grant): named, and its key known. */
static bool looked_up(const struct client *c, size_t i)
{
    return c->picked[i] && c->ids[i] != NULL;
}

static bool counts_in_flight(const struct client *c, size_t i)
{
    return c->selection.limits[i].params.algorithm_id == LIMITER_CONCURRENCY;
}

/* What each limit shows now (`d`, for the limits looked up). */
static int look(struct gw_runtime *rt, const struct client *c, struct limiter_decision *d,
                struct answer *a)
{
    int64_t now = limiter_now_ns();
    bool pick[N];
    struct gw_limit_question q;
    struct limiter_decision got[N];
    size_t k = 0;

    memset(d, 0, N * sizeof *d);
    for (size_t i = 0; i < c->selection.n_limits; i++)
        pick[i] = looked_up(c, i);
    if (!c->r->shared) {
        for (size_t i = 0; i < c->selection.n_limits; i++)
            if (pick[i] && limiter_peek(c->set->limiters[i], c->ids[i], c->selection.costs[i], now,
                                        &d[i]) != 0)
                return fail(a, 503, "%s", "out of memory");
        return 0;
    }
    gw_limit_question(&q, GW_STORE_PEEK, c->route, c->set, c->selection.costs, c->ids, pick, NULL);
    if (q.ask.n > 0 && ask_store(rt->store, &q.ask, got) != GW_STORE_OK)
        return fail(a, 503, "%s", "the shared store did not answer; try again");
    for (size_t i = 0; i < c->selection.n_limits; i++)
        if (pick[i])
            d[i] = got[k++];
    return 0;
}

/* The units of a grant, n=: 1 to 1e9 (more than a limit holds gives it whole). */
static int grant_units(gw_quota_arg_fn *arg, void *cls, uint64_t *units, struct answer *a)
{
    const char *text = arg(cls, "n");
    char *end;
    unsigned long long n;

    if (text == NULL)
        return fail(a, 400, "%s", "give the units to grant: n=N");
    errno = 0;
    n = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || n == 0 ||
        n > LIMITER_MAX_REQUESTS)
        return fail(a, 400, "n=%s: give a whole number from 1 to 1000000000", text);
    *units = n;
    return 0;
}

/* Which limits a reset or grant changes, into `pick`; refuses one named limit that cannot be
 * changed: its key not given, or a concurrency limit. */
static int changes(const struct client *c, gw_quota_arg_fn *arg, void *cls, bool *pick,
                   struct answer *a)
{
    bool one = arg(cls, "limit") != NULL;

    for (size_t i = 0; i < c->selection.n_limits; i++) {
        pick[i] = looked_up(c, i) && !counts_in_flight(c, i);
        if (!one || !c->picked[i] || pick[i])
            continue;
        if (c->ids[i] == NULL && strcmp(c->sources[i], "ip") == 0)
            return fail(a, 400, "%s", "this limit counts clients by address: give ip=");
        if (c->ids[i] == NULL)
            return fail(a, 400,
                        "this limit counts clients under %s: give it as a parameter "
                        "(or ip=)",
                        c->sources[i]);
        return fail(a, 409, "%s",
                    "a concurrency limit counts requests in flight, which give their slots back "
                    "as they end: there is nothing to change");
    }
    return 0;
}

/* The largest grant limit i takes: its burst (buckets) or its requests, as the limits run. */
static uint64_t most_of(const struct limiter_params *params)
{
    return limiter_algorithm_takes_burst(params->algorithm_id) && params->burst > 0
               ? params->burst
               : params->requests;
}

/* Resets, or grants `units` at, the limits `pick` marks, marking in `changed` those where the
 * client had spent something (so that the call changed them): in the shared store first, a
 * reset then clearing this replica's fallback limiters too; or in this replica's limiters.
 * Nothing is changed here when the store does not answer. */
static int change(struct gw_runtime *rt, const struct client *c, enum gw_quota_op op,
                  uint64_t units, const bool *pick, bool *changed, struct answer *a)
{
    int64_t now = limiter_now_ns();
    uint64_t costs[N];
    struct limiter_decision got[N];
    struct gw_limit_question q;
    size_t k = 0;
    int rc;

    for (size_t i = 0; i < c->selection.n_limits; i++)
        costs[i] = units; /* the store takes no more than a limit holds, as limiter_grant() */
    gw_limit_question(&q, op == GW_QUOTA_RESET ? GW_STORE_RESET : GW_STORE_GRANT, c->route, c->set,
                      costs, c->ids, pick, NULL);
    if (c->r->shared && q.ask.n > 0 && ask_store(rt->store, &q.ask, got) != GW_STORE_OK)
        return fail(a, 503, "%s",
                    "the shared store did not answer: it may or may not have made the change; "
                    "look before you try again");
    if (c->r->shared)
        gw_refusals_forget(c->set, c->ids); /* its next request asks the store */
    for (size_t i = 0; i < c->selection.n_limits; i++) {
        if (!pick[i])
            continue;
        if (op == GW_QUOTA_RESET)
            rc = limiter_reset(c->set->limiters[i], c->ids[i], now);
        else
            rc = c->r->shared ? 0 : limiter_grant(c->set->limiters[i], c->ids[i], units, now);
        changed[i] = (c->r->shared && got[k++].allowed) || rc == 1;
    }
    return 0;
}

/* `text` as a JSON string. */
static void put_string(FILE *out, const char *text)
{
    char escaped[512];

    gw_json_escape(escaped, sizeof escaped, text, strlen(text));
    fprintf(out, "\"%s\"", escaped);
}

static void put_or_null(FILE *out, const char *text)
{
    if (text != NULL)
        put_string(out, text);
    else
        fputs("null", out);
}

/* Limit i as JSON: what it is, and what it shows the client (`d`) when looked up. */
static void put_limit(FILE *out, const struct client *c, size_t i, const struct limiter_decision *d)
{
    const struct limiter_params *p = &c->selection.limits[i].params;
    uint64_t cost = c->selection.costs[i];

    fputs("{\"name\":", out);
    put_string(out, c->selection.limits[i].name);
    fprintf(out, ",\"algorithm\":\"%s\",\"quota\":%llu,\"per_ms\":%lld",
            limiter_algorithm_name(p->algorithm_id), (unsigned long long)p->requests,
            (long long)(p->per_ns / 1000000));
    if (limiter_algorithm_takes_burst(p->algorithm_id))
        fprintf(out, ",\"burst\":%llu", (unsigned long long)most_of(p));
    fprintf(out, ",\"cost\":%llu,\"key_source\":", (unsigned long long)cost);
    put_string(out, c->sources[i]);
    fprintf(out, ",\"looked_up\":%s", c->ids[i] != NULL ? "true" : "false");
    if (c->ids[i] != NULL)
        /* What it may spend now: a look answers as after a request of `cost` when allowed. */
        fprintf(out, ",\"remaining\":%llu,\"reset_ms\":%lld,\"retry_after_ms\":%lld,\"allowed\":%s",
                (unsigned long long)(d->remaining + (d->allowed ? cost : 0)),
                (long long)d->reset_ms, (long long)d->retry_after_ms,
                d->allowed ? "true" : "false");
    fputc('}', out);
}

/* The answer's JSON (quota.h): the client, what was changed, and each limit shown. */
static char *render(const struct gw_runtime *rt, const struct client *c, enum gw_quota_op op,
                    const bool *changed, const struct limiter_decision *d, const char *note)
{
    char *text = NULL, hash[17];
    size_t len = 0, n = 0;
    FILE *out = open_memstream(&text, &len);

    if (out == NULL)
        return NULL;
    fputs("{\"route\":", out);
    put_string(out, c->route->name);
    fprintf(out,
            ",\"scope\":\"%s\",\"action\":\"%s\",\"client\":", c->r->shared ? "shared" : "replica",
            gw_quota_action(op));
    if (c->key[0] != '\0')
        gw_access_key_hash(c->key, hash);
    put_or_null(out, c->key[0] != '\0' ? hash : NULL);
    fputs(",\"consumer\":", out);
    put_or_null(out, c->consumer);
    fputs(",\"plan\":", out);
    put_or_null(out, c->selection.plan != GW_LIMITS_OWN ? rt->config->plans[c->selection.plan].name
                                                        : NULL);
    fputs(",\"changed\":[", out);
    for (size_t i = 0; changed != NULL && i < c->selection.n_limits; i++)
        if (changed[i]) {
            fputs(n++ > 0 ? "," : "", out);
            put_string(out, c->selection.limits[i].name);
        }
    fputs("]", out);
    if (note != NULL) {
        fputs(",\"note\":", out);
        put_string(out, note);
    }
    fputs(",\"limits\":[", out);
    n = 0;
    for (size_t i = 0; i < c->selection.n_limits; i++)
        if (c->picked[i]) {
            fputs(n++ > 0 ? "," : "", out);
            put_limit(out, c, i, &d[i]);
        }
    fputs("]}\n", out);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* `ms` for a person: "250ms", "6.5s", "1h2m", "3d4h". */
static void put_duration(FILE *out, int64_t ms)
{
    static const struct {
        int64_t ms;
        char unit;
    } units[] = {{86400000, 'd'}, {3600000, 'h'}, {60000, 'm'}};

    if (ms < 1000) {
        fprintf(out, "%lldms", (long long)ms);
        return;
    }
    for (size_t i = 0; i < 3; i++)
        if (ms >= units[i].ms) {
            int64_t rest = (ms % units[i].ms) / (i < 2 ? units[i + 1].ms : 1000);

            fprintf(out, "%lld%c", (long long)(ms / units[i].ms), units[i].unit);
            if (rest > 0)
                fprintf(out, "%lld%c", (long long)rest, i < 2 ? units[i + 1].unit : 's');
            return;
        }
    if (ms < 10000)
        fprintf(out, "%.1fs", (double)ms / 1000);
    else
        fprintf(out, "%llds", (long long)((ms + 999) / 1000));
}

/* Limit i as a row of the table: what it is, and what it shows the client. */
static void put_row(FILE *out, const struct client *c, size_t i, const struct limiter_decision *d)
{
    const struct limiter_params *p = &c->selection.limits[i].params;
    uint64_t cost = c->selection.costs[i];

    fprintf(out, "%-16s %-23s %10llu ", c->selection.limits[i].name,
            limiter_algorithm_name(p->algorithm_id), (unsigned long long)p->requests);
    if (p->per_ns > 0)
        put_duration(out, p->per_ns / 1000000);
    else
        fputs("in flight", out);
    if (limiter_algorithm_takes_burst(p->algorithm_id))
        fprintf(out, " burst %llu", (unsigned long long)most_of(p));
    if (c->ids[i] == NULL) {
        fprintf(out, "\n    not looked up: counts under %s (give %s)\n", c->sources[i],
                strcmp(c->sources[i], "ip") == 0 ? "--ip" : "--limit-key or --ip");
        return;
    }
    fprintf(out, "\n    remaining %llu, %s now",
            (unsigned long long)(d->remaining + (d->allowed ? cost : 0)),
            d->allowed ? "allowed" : "refused");
    if (!d->allowed) {
        fputs(", retry after ", out);
        put_duration(out, d->retry_after_ms);
    }
    fputs(", whole again in ", out);
    put_duration(out, d->reset_ms);
    fprintf(out, " (key %s, cost %llu)\n", c->sources[i], (unsigned long long)cost);
}

/* The answer for a person (Accept: text/plain): the client, then a block per limit. */
static char *render_text(const struct gw_runtime *rt, const struct client *c, enum gw_quota_op op,
                         const bool *changed, const struct limiter_decision *d, const char *note)
{
    char *text = NULL, hash[17] = "(no key given)";
    size_t len = 0, n = 0;
    FILE *out = open_memstream(&text, &len);

    if (out == NULL)
        return NULL;
    if (c->key[0] != '\0')
        gw_access_key_hash(c->key, hash);
    fprintf(out, "route %s (%s), client %s", c->route->name,
            c->r->shared ? "shared by every replica" : "this replica", hash);
    if (c->consumer != NULL)
        fprintf(out, ", consumer %s", c->consumer);
    if (c->selection.plan != GW_LIMITS_OWN)
        fprintf(out, ", plan %s", rt->config->plans[c->selection.plan].name);
    fputc('\n', out);
    for (size_t i = 0; op != GW_QUOTA_SHOW && i < c->selection.n_limits; i++)
        if (changed[i])
            fprintf(out, "%s %s", n++ > 0 ? "," : gw_quota_action(op), c->selection.limits[i].name);
    fputs(op == GW_QUOTA_SHOW ? "" : n > 0 ? "\n" : "nothing changed: the client was fresh\n", out);
    if (note != NULL)
        fprintf(out, "%s\n", note);
    fprintf(out, "%-16s %-23s %10s PER\n", "LIMIT", "ALGORITHM", "QUOTA");
    for (size_t i = 0; i < c->selection.n_limits; i++)
        if (c->picked[i])
            put_row(out, c, i, &d[i]);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* What was done, for the caller's log line: the route, the limits changed, the client. */
static void record(const struct client *c, const bool *changed, struct gw_quota_done *done)
{
    size_t len = 0;

    snprintf(done->route, sizeof done->route, "%s", c->route->name);
    done->limits[0] = '\0';
    for (size_t i = 0; i < c->selection.n_limits; i++)
        if (changed[i] && len < sizeof done->limits)
            len += (size_t)snprintf(done->limits + len, sizeof done->limits - len, "%s%s",
                                    len > 0 ? "," : "", c->selection.limits[i].name);
    done->changed = len > 0;
    if (c->key[0] != '\0')
        gw_access_key_hash(c->key, done->client);
    else
        snprintf(done->client, sizeof done->client, "-");
}

/* `line` and a newline, in a string the caller frees. */
static char *line_of(const char *line)
{
    size_t len = strlen(line);
    char *copy = malloc(len + 2);

    if (copy != NULL) {
        memcpy(copy, line, len);
        memcpy(copy + len, "\n", 2);
    }
    return copy;
}

/* Finds the client and makes the change `op` asks for, marking in `changed` what it changed. */
static int act(struct gw_runtime *rt, enum gw_quota_op op, gw_quota_arg_fn *arg, void *cls,
               struct client *c, bool *changed, struct answer *a)
{
    uint64_t units = 0;
    bool pick[N] = {false};

    if (find_client(rt, arg, cls, c, a) != 0)
        return -1;
    if (op == GW_QUOTA_SHOW)
        return 0;
    if (op == GW_QUOTA_GRANT && arg(cls, "limit") == NULL)
        return fail(a, 400, "%s", "give the limit to grant at: limit=NAME");
    if (op == GW_QUOTA_GRANT && grant_units(arg, cls, &units, a) != 0)
        return -1;
    if (changes(c, arg, cls, pick, a) != 0)
        return -1;
    return change(rt, c, op, units, pick, changed, a);
}

void gw_quota_run(struct gw_runtime *rt, enum gw_quota_op op, gw_quota_arg_fn *arg, void *cls,
                  bool text, unsigned *status, char **body, bool *problem,
                  struct gw_quota_done *done)
{
    struct client c;
    struct answer a = {200, ""};
    struct limiter_decision d[N];
    bool changed[N] = {false};

    memset(&c, 0, sizeof c);
    memset(done, 0, sizeof *done);
    if (act(rt, op, arg, cls, &c, changed, &a) == 0) {
        const char *note = NULL;

        if (op != GW_QUOTA_SHOW)
            record(&c, changed, done);
        /* A change made stands even when the look after it fails: the answer says so, rather
         * than ask for a retry that would grant twice. */
        if (look(rt, &c, d, &a) != 0 && op != GW_QUOTA_SHOW) {
            note = "changed; the shared store did not answer the look that followed";
            memset(c.ids, 0, sizeof c.ids); /* so no limit shows numbers it does not have */
        }
        if (note != NULL || a.status == 200) {
            *status = 200;
            *problem = false;
            *body = text ? render_text(rt, &c, op, changed, d, note)
                         : render(rt, &c, op, changed, d, note);
            return;
        }
    }
    *status = a.status;
    *problem = true;
    *body = text
                ? line_of(a.detail)
                : gw_problem_json(a.status, a.detail, c.route != NULL ? c.route->name : NULL, NULL);
}
