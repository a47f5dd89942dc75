/* One route's limit sets in one runtime; design in limit_sets.h. */
#include <stdlib.h>
#include <string.h>

#include "gateway/common/respond.h"
#include "gateway/limits/decide.h"
#include "gateway/modules/limit/limit_sets.h"

typedef const struct gw_limit_route *state_fn(const struct gw_runtime *, size_t);

static void limit_free(struct gw_limit *limit)
{
    limiter_free(limit->limiter);
    free(limit->route);
    free(limit->plan);
    free(limit->name);
    free(limit->key_name);
    free(limit);
}

void gw_limit_retain(struct gw_limit *limit)
{
    atomic_fetch_add(&limit->refs, 1);
}

void gw_limit_release(struct gw_limit *limit)
{
    struct limiter_stats stats;

    if (limit == NULL || atomic_fetch_sub(&limit->refs, 1) != 1)
        return;
    limiter_get_stats(limit->limiter, &stats);
    atomic_fetch_add(&limit->metrics->retired_evictions, stats.evictions);
    limit_free(limit);
}

/* A route's limit sets: its own (0), then one per plan. */
static size_t n_sets(const struct gw_limit_route *r)
{
    return 1 + (r->plans != NULL ? r->n_plans : 0);
}

static const struct gw_limit_set *set_at(const struct gw_limit_route *r, size_t i)
{
    return i == 0 ? &r->own : &r->plans[i - 1];
}

static bool same_params(const struct limiter_params *a, const struct limiter_params *b)
{
    return strcmp(a->algorithm, b->algorithm) == 0 && a->requests == b->requests &&
           a->per_ns == b->per_ns && a->burst == b->burst && a->max_clients == b->max_clients;
}

/* The limiter of `route`'s limit `cl` in `plan`, run with `want`, in `previous`, with a new
 * reference, or NULL. */
static struct gw_limit *carried_over(const struct gw_runtime *previous, state_fn *state_of,
                                     const char *route, const char *plan,
                                     const struct config_limit *cl,
                                     const struct limiter_params *want)
{
    for (size_t i = 0; previous != NULL && i < previous->config->n_routes; i++) {
        const struct gw_limit_route *r = state_of(previous, i);

        for (size_t k = 0; r != NULL && k < n_sets(r); k++)
            for (size_t j = 0; j < set_at(r, k)->n_limits; j++) {
                struct gw_limit *limit = set_at(r, k)->limits[j];

                if (strcmp(limit->route, route) == 0 && strcmp(limit->plan, plan) == 0 &&
                    strcmp(limit->name, cl->name) == 0 &&
                    config_same_key(limit->key_kind, limit->key_name, cl->key_kind, cl->key_name) &&
                    same_params(limiter_get_params(limit->limiter), want)) {
                    atomic_fetch_add(&limit->refs, 1);
                    return limit;
                }
            }
    }
    return NULL;
}

static struct gw_limit *new_limit(const char *route, const char *plan,
                                  const struct config_limit *cl,
                                  const struct limiter_params *params,
                                  struct gw_route_metrics *metrics, char *err, size_t err_len)
{
    struct gw_limit *limit = calloc(1, sizeof *limit);
    char why[LIMITER_ERR_LEN];

    if (limit == NULL) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    atomic_init(&limit->refs, 1);
    limit->metrics = metrics;
    limit->route = strdup(route);
    limit->plan = strdup(plan);
    limit->name = strdup(cl->name);
    limit->key_kind = cl->key_kind;
    limit->key_name = cl->key_name ? strdup(cl->key_name) : NULL;
    limit->limiter = limiter_create(params, why);
    if (limit->limiter == NULL || limit->route == NULL || limit->plan == NULL ||
        limit->name == NULL || (cl->key_name != NULL && limit->key_name == NULL)) {
        snprintf(err, err_len, "route %.100s, limit %.100s: %s", route, cl->name,
                 limit->limiter ? "out of memory" : why);
        limit_free(limit);
        return NULL;
    }
    return limit;
}

/* a, b and c joined, or NULL; the caller frees it. */
static char *join3(const char *a, const char *b, const char *c)
{
    size_t len = strlen(a) + strlen(b) + strlen(c) + 1;
    char *joined = malloc(len);

    if (joined != NULL)
        snprintf(joined, len, "%s%s%s", a, b, c);
    return joined;
}

/* The RateLimit-Policy value: "burst";q=10;w=1, "daily";q=10000;w=86400 */
static char *policy_of(const struct config_limit *limits, size_t n_limits)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    char item[GW_FIELD_LEN];

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n_limits; i++) {
        gw_format_policy(item, limits[i].name, &limits[i].params);
        fprintf(out, "%s%s", i > 0 ? ", " : "", item);
    }
    fclose(out);
    return text;
}

/* What a set is built from. */
struct set_source {
    const struct gw_runtime *rt, *previous;
    state_fn *state_of;
    const struct config_route *route;
    struct gw_route_metrics *metrics;
    bool shared;
};

/* One limit of a set: its names, its shared parameters, its limiter. 0, or -1. */
static int build_limit(const struct set_source *src, struct gw_limit_set *set, const char *plan,
                       size_t j, char *err, size_t err_len)
{
    const struct config_limit *cl = &set->config[j];
    struct limiter_params params = gw_limits_local_params(src->rt->config, cl, src->shared);

    set->store_names[j] = plan[0] != '\0' ? join3(plan, "/", cl->name) : strdup(cl->name);
    if (set->store_names[j] == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    if (src->shared) {
        set->limit_names[j] = set->store_names[j];
        set->shared_params[j] = gw_limits_store_params(cl);
        set->shared_param_ptrs[j] = &set->shared_params[j];
    }
    set->limits[j] =
        carried_over(src->previous, src->state_of, src->route->name, plan, cl, &params);
    if (set->limits[j] == NULL)
        set->limits[j] = new_limit(src->route->name, plan, cl, &params, src->metrics, err, err_len);
    if (set->limits[j] == NULL)
        return -1;
    set->limiters[j] = set->limits[j]->limiter;
    set->counts[j] = gw_metrics_limit(src->rt->metrics, src->metrics, set->store_names[j]);
    if (set->counts[j] == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    set->n_limits++;
    return 0;
}

/* The limiters of `limits` (n_limits of them, from `plan`, "" for the route's own) into
 * `set`. */
static int build_set(const struct set_source *src, struct gw_limit_set *set, const char *plan,
                     const struct config_limit *limits, size_t n_limits, char *err, size_t err_len)
{
    static _Atomic uint64_t serials;

    set->serial = atomic_fetch_add(&serials, 1) + 1;
    set->config = limits;
    set->plan = plan[0] != '\0' ? gw_metrics_plan(src->rt->metrics, src->metrics, plan) : NULL;
    if (plan[0] != '\0' && set->plan == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t j = 0; j < n_limits; j++)
        if (build_limit(src, set, plan, j, err, err_len) != 0)
            return -1;
    if (n_limits > 0 && (set->policy = policy_of(limits, n_limits)) == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

int gw_limit_route_open(const struct gw_runtime *rt, size_t route,
                        const struct gw_runtime *previous, state_fn *state_of,
                        struct gw_limit_route **out, char *err, size_t err_len)
{
    const struct config_route *cr = &rt->config->routes[route];
    struct gw_limit_route *r = *out = calloc(1, sizeof *r);
    struct set_source src = {
        rt, previous, state_of, cr, rt->routes[route].metrics, cr->store == CONFIG_STORE_REDIS};

    if (r == NULL || (gw_limits_plans_decide(cr) &&
                      (r->plans = calloc(rt->config->n_plans, sizeof *r->plans)) == NULL)) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    r->n_plans = r->plans != NULL ? rt->config->n_plans : 0;
    r->shared = src.shared;
    /* A set that can decide nothing has no limiters and exports no series (decide.h). */
    if (build_set(&src, &r->own, "", cr->limits, gw_limits_own_decide(cr) ? cr->n_limits : 0, err,
                  err_len) != 0)
        return -1;
    for (size_t p = 0; r->plans != NULL && p < r->n_plans; p++)
        if (build_set(&src, &r->plans[p], cr->plans[p].name, cr->plans[p].limits,
                      cr->plans[p].n_limits, err, err_len) != 0)
            return -1;
    if (cr->identifies_consumers) {
        r->unknown_key_detail =
            join3("an API key issued for this API is required in the ", cr->key_name,
                  cr->key_kind == CONFIG_KEY_HEADER ? " header" : " query parameter");
        if (r->unknown_key_detail == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
    }
    return 0;
}

void gw_limit_route_free(struct gw_limit_route *r)
{
    if (r == NULL)
        return;
    for (size_t k = 0; k < n_sets(r); k++) {
        const struct gw_limit_set *set = set_at(r, k);

        for (size_t j = 0; j < set->n_limits; j++)
            gw_limit_release(set->limits[j]);
        for (size_t j = 0; j < LIMITER_MAX_PER_REQUEST; j++)
            free(set->store_names[j]);
        free(set->policy);
    }
    free(r->plans);
    free(r->unknown_key_detail);
    free(r);
}

/* The client states a route holds: a set's limits mostly count the same clients; different
 * sets, different ones. */
static uint64_t clients_of(const struct gw_limit_route *r)
{
    uint64_t clients = 0;

    for (size_t k = 0; k < n_sets(r); k++) {
        const struct gw_limit_set *set = set_at(r, k);
        uint64_t most = 0;

        for (size_t j = 0; j < set->n_limits; j++) {
            struct limiter_stats stats;

            limiter_get_stats(set->limiters[j], &stats);
            most = stats.clients > most ? stats.clients : most;
        }
        clients += most;
    }
    return clients;
}

static uint64_t evictions_of(const struct gw_limit_route *r)
{
    uint64_t evictions = 0;

    for (size_t k = 0; k < n_sets(r); k++)
        for (size_t j = 0; j < set_at(r, k)->n_limits; j++) {
            struct limiter_stats stats;

            limiter_get_stats(set_at(r, k)->limiters[j], &stats);
            evictions += stats.evictions;
        }
    return evictions;
}

/* `family` for each limit of route `i` that `holds`: its gauge read by `value`. */
static void render_gauge(const struct gw_runtime *rt, size_t i, const struct gw_limit_route *r,
                         const char *family, bool (*holds)(const struct config_limit *),
                         int64_t (*value)(struct gw_limit *), FILE *out)
{
    for (size_t k = 0; k < n_sets(r); k++) {
        const struct gw_limit_set *set = set_at(r, k);

        for (size_t j = 0; j < set->n_limits; j++)
            if (holds(&set->config[j]))
                fprintf(out, "%s{route=\"%s\",limit=\"%s\"} %lld\n", family,
                        rt->config->routes[i].name, set->store_names[j],
                        (long long)value(set->limits[j]));
    }
}

static bool is_concurrency(const struct config_limit *limit)
{
    return limit->params.algorithm_id == LIMITER_CONCURRENCY;
}

static int64_t in_flight_of(struct gw_limit *limit)
{
    return atomic_load(&limit->in_flight);
}

static bool has_delay(const struct config_limit *limit)
{
    return limit->delay.set;
}

static int64_t waiting_of(struct gw_limit *limit)
{
    return atomic_load(&limit->waiting);
}

void gw_limit_routes_render(const struct gw_runtime *rt, state_fn *state_of, FILE *out)
{
    fputs("# HELP sluice_limit_in_flight Units of a concurrency limit held by requests in "
          "flight.\n# TYPE sluice_limit_in_flight gauge\n",
          out);
    for (size_t i = 0; i < rt->config->n_routes; i++)
        render_gauge(rt, i, state_of(rt, i), "sluice_limit_in_flight", is_concurrency, in_flight_of,
                     out);
    fputs("# HELP sluice_limit_waiting Requests waiting for their turn at a limit with a delay.\n"
          "# TYPE sluice_limit_waiting gauge\n",
          out);
    for (size_t i = 0; i < rt->config->n_routes; i++)
        render_gauge(rt, i, state_of(rt, i), "sluice_limit_waiting", has_delay, waiting_of, out);
    fputs("# HELP sluice_limiter_clients Client states held by a route's limits.\n"
          "# TYPE sluice_limiter_clients gauge\n",
          out);
    for (size_t i = 0; i < rt->config->n_routes; i++)
        fprintf(out, "sluice_limiter_clients{route=\"%s\"} %llu\n", rt->config->routes[i].name,
                (unsigned long long)clients_of(state_of(rt, i)));
    fputs("# HELP sluice_limiter_evictions_total Live client states evicted to make room.\n"
          "# TYPE sluice_limiter_evictions_total counter\n",
          out);
    for (size_t i = 0; i < rt->config->n_routes; i++)
        fprintf(out, "sluice_limiter_evictions_total{route=\"%s\"} %llu\n",
                rt->config->routes[i].name,
                (unsigned long long)(atomic_load(&rt->routes[i].metrics->retired_evictions) +
                                     evictions_of(state_of(rt, i))));
}
