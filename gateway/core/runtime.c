#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gateway/core/runtime.h"
#include "gateway/limits/decide.h"

static void limit_release(struct gw_limit *limit)
{
    struct limiter_stats stats;

    if (limit == NULL || atomic_fetch_sub(&limit->refs, 1) != 1)
        return;
    limiter_get_stats(limit->limiter, &stats);
    atomic_fetch_add(&limit->metrics->retired_evictions, stats.evictions);
    limiter_free(limit->limiter);
    free(limit->route);
    free(limit->plan);
    free(limit->name);
    free(limit->key_name);
    free(limit);
}

/* A route's limit sets: its own (0), then one per plan. */
static size_t n_sets(const struct gw_route_runtime *r, size_t n_plans)
{
    return 1 + (r->plans != NULL ? n_plans : 0);
}

static const struct gw_limit_set *set_at(const struct gw_route_runtime *r, size_t i)
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
static struct gw_limit *carried_over(const struct gw_runtime *previous, const char *route,
                                     const char *plan, const struct config_limit *cl,
                                     const struct limiter_params *want)
{
    for (size_t i = 0; previous != NULL && i < previous->config->n_routes; i++) {
        const struct gw_route_runtime *r = &previous->routes[i];

        for (size_t k = 0; k < n_sets(r, previous->config->n_plans); k++)
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
        limiter_free(limit->limiter);
        free(limit->route);
        free(limit->plan);
        free(limit->name);
        free(limit->key_name);
        free(limit);
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

/* The limiters of `limits` (n_limits of them, from `plan`, "" for the route's own) into
 * `set`. */
static int build_set(struct gw_runtime *rt, const struct config_route *cr,
                     struct gw_route_runtime *r, struct gw_limit_set *set, const char *plan,
                     const struct config_limit *limits, size_t n_limits,
                     const struct gw_runtime *previous, struct gw_metrics *metrics, char *err,
                     size_t err_len)
{
    set->config = limits;
    set->plan = plan[0] != '\0' ? gw_metrics_plan(metrics, r->metrics, plan) : NULL;
    if (plan[0] != '\0' && set->plan == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t j = 0; j < n_limits; j++) {
        struct limiter_params params = gw_limits_local_params(rt->config, &limits[j], r->shared);

        set->store_names[j] =
            plan[0] != '\0' ? join3(plan, "/", limits[j].name) : strdup(limits[j].name);
        if (set->store_names[j] == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        if (r->shared) {
            set->limit_names[j] = set->store_names[j];
            set->shared_params[j] = gw_limits_store_params(&limits[j]);
            set->shared_param_ptrs[j] = &set->shared_params[j];
        }
        set->limits[j] = carried_over(previous, cr->name, plan, &limits[j], &params);
        if (set->limits[j] == NULL)
            set->limits[j] =
                new_limit(cr->name, plan, &limits[j], &params, r->metrics, err, err_len);
        if (set->limits[j] == NULL)
            return -1;
        set->limiters[j] = set->limits[j]->limiter;
        set->denials[j] = gw_metrics_limit(metrics, r->metrics, set->store_names[j]);
        if (set->denials[j] == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        set->n_limits++;
    }
    if (n_limits > 0 && (set->policy = policy_of(limits, n_limits)) == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

/* The route's servers, and the pool of upstream connections each draws from (proxy.h): its
 * origin, via the route's proxy. 0, or -1 when memory is short. */
static int build_upstream(const struct config_route *cr, struct gw_route_runtime *r,
                          struct gw_backends *backends)
{
    if (gw_backend_set_init(&r->backends, backends, cr) != 0 ||
        (r->budget = gw_backends_budget(backends, cr->name)) == NULL ||
        (r->pools = calloc(cr->n_servers, sizeof *r->pools)) == NULL)
        return -1;
    for (size_t k = 0; k < cr->n_servers; k++) {
        const char *origin = cr->servers[k].origin;

        r->pools[k] = cr->proxy ? join3(origin, " via ", cr->proxy) : strdup(origin);
        if (r->pools[k] == NULL)
            return -1;
    }
    return 0;
}

static int build_route(struct gw_runtime *rt, size_t i, const struct gw_runtime *previous,
                       struct gw_metrics *metrics, struct gw_backends *backends, char *err,
                       size_t err_len)
{
    const struct config_route *cr = &rt->config->routes[i];
    struct gw_route_runtime *r = &rt->routes[i];

    r->metrics = gw_metrics_route(metrics, cr->name);
    if (r->metrics == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    r->shared = cr->store == CONFIG_STORE_REDIS;
    if (build_set(rt, cr, r, &r->own, "", cr->limits, cr->n_limits, previous, metrics, err,
                  err_len) != 0)
        return -1;
    if (cr->plans != NULL) {
        r->plans = calloc(rt->config->n_plans, sizeof *r->plans);
        if (r->plans == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        for (size_t p = 0; p < rt->config->n_plans; p++)
            if (build_set(rt, cr, r, &r->plans[p], cr->plans[p].name, cr->plans[p].limits,
                          cr->plans[p].n_limits, previous, metrics, err, err_len) != 0)
                return -1;
    }
    if (cr->identifies_consumers) {
        r->unknown_key_detail =
            join3("an API key issued for this API is required in the ", cr->key_name,
                  cr->key_kind == CONFIG_KEY_HEADER ? " header" : " query parameter");
        if (r->unknown_key_detail == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
    }
    if (build_upstream(cr, r, backends) != 0) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

static int open_access_log(const char *where)
{
    if (strcmp(where, "off") == 0)
        return -1;
    if (strcmp(where, "stdout") == 0)
        return STDOUT_FILENO;
    return open(where, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

static void runtime_free(struct gw_runtime *rt)
{
    for (size_t i = 0; rt->routes != NULL && i < rt->config->n_routes; i++) {
        for (size_t k = 0; k < n_sets(&rt->routes[i], rt->config->n_plans); k++) {
            const struct gw_limit_set *set = set_at(&rt->routes[i], k);

            for (size_t j = 0; j < set->n_limits; j++)
                limit_release(set->limits[j]);
            for (size_t j = 0; j < LIMITER_MAX_PER_REQUEST; j++)
                free(set->store_names[j]);
            free(set->policy);
        }
        free(rt->routes[i].plans);
        free(rt->routes[i].unknown_key_detail);
        for (size_t k = 0; rt->routes[i].pools != NULL && k < rt->config->routes[i].n_servers; k++)
            free(rt->routes[i].pools[k]);
        free(rt->routes[i].pools);
        gw_backend_set_free(&rt->routes[i].backends);
    }
    free(rt->routes);
    gw_consumers_free(rt->consumers);
    if (rt->access_log_fd > STDERR_FILENO)
        close(rt->access_log_fd);
    config_free(rt->config);
    free(rt);
}

struct gw_runtime *gw_runtime_build(struct config *config, const struct gw_runtime *previous,
                                    struct gw_metrics *metrics, struct gw_backends *backends,
                                    struct gw_store *store, char *err, size_t err_len)
{
    struct gw_runtime *rt = calloc(1, sizeof *rt);

    if (rt == NULL) {
        snprintf(err, err_len, "out of memory");
        config_free(config);
        return NULL;
    }
    atomic_init(&rt->refs, 1);
    rt->config = config;
    rt->store = store;
    rt->metrics = metrics;
    rt->access_log_fd = -1;
    rt->routes = calloc(config->n_routes, sizeof *rt->routes);
    if (rt->routes == NULL) {
        snprintf(err, err_len, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < config->n_routes; i++)
        if (build_route(rt, i, previous, metrics, backends, err, err_len) != 0)
            goto fail;
    rt->consumers = config->n_consumers > 0 ? gw_consumers_build(config) : NULL;
    if (config->n_consumers > 0 && rt->consumers == NULL) {
        snprintf(err, err_len, "out of memory");
        goto fail;
    }
    rt->access_log_fd = open_access_log(config->server.access_log);
    if (rt->access_log_fd < 0 && strcmp(config->server.access_log, "off") != 0) {
        snprintf(err, err_len, "cannot open access_log %.200s", config->server.access_log);
        goto fail;
    }
    return rt;

fail:
    runtime_free(rt);
    return NULL;
}

void gw_runtime_hold(struct gw_runtime *rt)
{
    atomic_fetch_add_explicit(&rt->refs, 1, memory_order_relaxed);
}

void gw_runtime_release(struct gw_runtime *rt)
{
    if (rt != NULL && atomic_fetch_sub_explicit(&rt->refs, 1, memory_order_acq_rel) == 1)
        runtime_free(rt);
}

/* The three per-server families, each written once for all routes. */
static void upstream_gauges(const struct gw_runtime *rt, FILE *out)
{
    static const struct {
        enum gw_backend_family family;
        const char *head;
    } families[] = {
        {GW_FAMILY_REQUESTS,
         "# HELP sluice_upstream_requests_total Attempts on each upstream server by what "
         "it answered (error: no answer).\n# TYPE sluice_upstream_requests_total counter\n"},
        {GW_FAMILY_HEALTHY, "# HELP sluice_upstream_healthy Whether a server is believed "
                            "healthy (passive and active health).\n"
                            "# TYPE sluice_upstream_healthy gauge\n"},
        {GW_FAMILY_INFLIGHT, "# HELP sluice_upstream_inflight Requests on each server now.\n"
                             "# TYPE sluice_upstream_inflight gauge\n"},
    };
    int64_t now = limiter_now_ns();

    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        fputs(families[f].head, out);
        for (size_t i = 0; i < rt->config->n_routes; i++)
            gw_backend_set_render(&rt->routes[i].backends, out, families[f].family, now);
    }
}

bool gw_runtime_upstreams_ready(const struct gw_runtime *rt, int64_t now_ns)
{
    for (size_t i = 0; i < rt->config->n_routes; i++) {
        const struct gw_backend_set *set = &rt->routes[i].backends;
        bool any = false;

        for (size_t k = 0; k < set->n && !any; k++)
            any = gw_backend_healthy(set->servers[k], now_ns);
        if (!any)
            return false;
    }
    return true;
}

struct gw_backend_set **gw_runtime_backend_sets(struct gw_runtime *rt)
{
    struct gw_backend_set **sets = calloc(rt->config->n_routes + 1, sizeof *sets);

    for (size_t i = 0; sets != NULL && i < rt->config->n_routes; i++)
        sets[i] = &rt->routes[i].backends;
    return sets;
}

void gw_runtime_gauges(void *runtime, FILE *out)
{
    const struct gw_runtime *rt = runtime;

    fputs("# HELP sluice_limiter_clients Client states held by a route's limits.\n"
          "# TYPE sluice_limiter_clients gauge\n",
          out);
    for (size_t i = 0; i < rt->config->n_routes; i++) {
        uint64_t clients = 0;

        /* A set's limits mostly count the same clients; different sets, different ones. */
        for (size_t k = 0; k < n_sets(&rt->routes[i], rt->config->n_plans); k++) {
            const struct gw_limit_set *set = set_at(&rt->routes[i], k);
            uint64_t most = 0;

            for (size_t j = 0; j < set->n_limits; j++) {
                struct limiter_stats stats;

                limiter_get_stats(set->limiters[j], &stats);
                most = stats.clients > most ? stats.clients : most;
            }
            clients += most;
        }
        fprintf(out, "sluice_limiter_clients{route=\"%s\"} %llu\n", rt->config->routes[i].name,
                (unsigned long long)clients);
    }
    fputs("# HELP sluice_limiter_evictions_total Live client states evicted to make room.\n"
          "# TYPE sluice_limiter_evictions_total counter\n",
          out);
    for (size_t i = 0; i < rt->config->n_routes; i++) {
        uint64_t evictions = atomic_load(&rt->routes[i].metrics->retired_evictions);

        for (size_t k = 0; k < n_sets(&rt->routes[i], rt->config->n_plans); k++)
            for (size_t j = 0; j < set_at(&rt->routes[i], k)->n_limits; j++) {
                struct limiter_stats stats;

                limiter_get_stats(set_at(&rt->routes[i], k)->limiters[j], &stats);
                evictions += stats.evictions;
            }
        fprintf(out, "sluice_limiter_evictions_total{route=\"%s\"} %llu\n",
                rt->config->routes[i].name, (unsigned long long)evictions);
    }
    upstream_gauges(rt, out);
}
