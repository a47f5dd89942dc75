#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/log.h"
#include "gateway/ops/metrics.h"

/* A limit's counts in its gw_labelled. */
enum { LIMIT_DENIALS, LIMIT_REFUNDS };
_Static_assert((int)LIMIT_REFUNDS < (int)GW_N_DECISIONS, "a limit's counts fit its gw_labelled");

static const double bucket_bounds[GW_N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                   0.1,   0.25,   0.5,   1,    2.5,   10};

struct gw_metrics {
    pthread_mutex_t lock; /* guards the list of routes, taken on reload and scrape only */
    struct gw_route_metrics *routes;
    _Atomic uint64_t reloads_ok, reloads_failed;
    _Atomic int64_t connections, parked;
    _Atomic int64_t in_flight;
    _Atomic uint64_t connections_rejected, accept_errors, proxy_protocol_refused;
};

struct gw_metrics *gw_metrics_new(void)
{
    struct gw_metrics *m = calloc(1, sizeof *m);

    if (m != NULL)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void gw_metrics_free(struct gw_metrics *m)
{
    if (m == NULL)
        return;
    while (m->routes != NULL) {
        struct gw_route_metrics *next = m->routes->next;

        for (struct gw_labelled **list = &m->routes->plans; list <= &m->routes->limits; list++)
            while (*list != NULL) {
                struct gw_labelled *after = (*list)->next;

                free((*list)->label);
                free(*list);
                *list = after;
            }
        free(m->routes->route);
        free(m->routes);
        m->routes = next;
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

struct gw_route_metrics *gw_metrics_route(struct gw_metrics *m, const char *route)
{
    struct gw_route_metrics *r;

    pthread_mutex_lock(&m->lock);
    for (r = m->routes; r != NULL && strcmp(r->route, route) != 0; r = r->next)
        ;
    if (r == NULL) {
        r = calloc(1, sizeof *r);
        if (r != NULL)
            r->route = strdup(route);
        if (r != NULL && r->route != NULL) {
            r->next = m->routes;
            m->routes = r;
        } else if (r != NULL) {
            free(r);
            r = NULL;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return r;
}

/* The counter labelled `label` in `*list`, added on first use. */
static struct gw_labelled *labelled(struct gw_metrics *m, struct gw_labelled **list,
                                    const char *label)
{
    struct gw_labelled *l;

    pthread_mutex_lock(&m->lock);
    for (l = *list; l != NULL && strcmp(l->label, label) != 0; l = l->next)
        ;
    if (l == NULL) {
        l = calloc(1, sizeof *l);
        if (l != NULL)
            l->label = strdup(label);
        if (l != NULL && l->label != NULL) {
            l->next = *list;
            *list = l;
        } else if (l != NULL) {
            free(l);
            l = NULL;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return l;
}

struct gw_labelled *gw_metrics_plan(struct gw_metrics *m, struct gw_route_metrics *route,
                                    const char *plan)
{
    return labelled(m, &route->plans, plan);
}

struct gw_labelled *gw_metrics_limit(struct gw_metrics *m, struct gw_route_metrics *route,
                                     const char *limit)
{
    return labelled(m, &route->limits, limit);
}

const char *gw_decision_name(enum gw_decision decision)
{
    static const char *const names[GW_N_DECISIONS] = {
        "allowed",         "denied",    "dry_run_denied", "exempt",
        "unauthenticated", "forbidden", "refused",        "failed"};

    return names[decision];
}

static void add(_Atomic uint64_t *counter, uint64_t n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

static _Thread_local unsigned my_shard;

void gw_metrics_use_shard(unsigned index)
{
    my_shard = index % GW_METRIC_SHARDS;
}

void gw_metrics_count_request(struct gw_route_metrics *m, struct gw_labelled *plan,
                              enum gw_decision decision, int64_t duration_ns)
{
    struct gw_route_shard *shard = &m->shards[my_shard];
    double seconds = (double)duration_ns / 1e9;
    int b = 0;

    add(plan != NULL ? &plan->shards[my_shard].counts[decision] : &shard->requests[decision], 1);
    while (b < GW_N_BUCKETS && seconds > bucket_bounds[b])
        b++;
    if (b < GW_N_BUCKETS)
        add(&shard->duration_buckets[b], 1);
    add(&shard->duration_us_sum, (uint64_t)(duration_ns / 1000));
    add(&shard->duration_count, 1);
}

void gw_metrics_count_denial(struct gw_labelled *limit)
{
    add(&limit->shards[my_shard].counts[LIMIT_DENIALS], 1);
}

void gw_metrics_count_refund(struct gw_labelled *limit)
{
    add(&limit->shards[my_shard].counts[LIMIT_REFUNDS], 1);
}

void gw_metrics_count_response(struct gw_route_metrics *m, unsigned status)
{
    if (status < 600)
        add(&m->shards[my_shard].responses[status], 1);
}

void gw_metrics_count_error(struct gw_route_metrics *m, enum gw_upstream_error_kind kind)
{
    add(&m->shards[my_shard].errors[kind], 1);
}

void gw_metrics_count_retry(struct gw_route_metrics *m, bool retried)
{
    add(&m->shards[my_shard].retries[retried], 1);
}

void gw_metrics_count_reload(struct gw_metrics *m, bool ok)
{
    add(ok ? &m->reloads_ok : &m->reloads_failed, 1);
}

void gw_metrics_connection(struct gw_metrics *m, int delta)
{
    atomic_fetch_add_explicit(&m->connections, delta, memory_order_relaxed);
}

void gw_metrics_parked(struct gw_metrics *m, int delta)
{
    atomic_fetch_add_explicit(&m->parked, delta, memory_order_relaxed);
}

void gw_metrics_in_flight(struct gw_metrics *m, int delta)
{
    atomic_fetch_add_explicit(&m->in_flight, delta, memory_order_relaxed);
}

unsigned gw_metrics_requests_in_flight(struct gw_metrics *m)
{
    return (unsigned)atomic_load_explicit(&m->in_flight, memory_order_relaxed);
}

void gw_metrics_count_rejected(struct gw_metrics *m)
{
    add(&m->connections_rejected, 1);
}

void gw_metrics_count_proxy_refused(struct gw_metrics *m)
{
    add(&m->proxy_protocol_refused, 1);
}

void gw_metrics_count_accept_error(struct gw_metrics *m)
{
    add(&m->accept_errors, 1);
}

static uint64_t get(_Atomic uint64_t *counter)
{
    return atomic_load_explicit(counter, memory_order_relaxed);
}

/* A route's counter summed over its shards: `field` is its offset in a shard. */
static uint64_t sum(struct gw_route_metrics *r, size_t field)
{
    uint64_t total = 0;

    for (size_t i = 0; i < GW_METRIC_SHARDS; i++)
        total += get((_Atomic uint64_t *)((char *)&r->shards[i] + field));
    return total;
}

/* A labelled count summed over its shards. */
static uint64_t labelled_sum(struct gw_labelled *l, int i)
{
    uint64_t total = 0;

    for (size_t s = 0; s < GW_METRIC_SHARDS; s++)
        total += get(&l->shards[s].counts[i]);
    return total;
}

#define SUM(r, member, i)                                                                          \
    sum((r), offsetof(struct gw_route_shard, member) + (size_t)(i) * sizeof(uint64_t))

/* One of a limit's counts (`which`) as the counter `family`, for every limit of every route. */
static void render_limit_counts(struct gw_route_metrics *routes, const char *family,
                                const char *help, int which, FILE *out)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", family, help, family);
    for (struct gw_route_metrics *r = routes; r != NULL; r = r->next)
        for (struct gw_labelled *l = r->limits; l != NULL; l = l->next)
            fprintf(out, "%s{route=\"%s\",limit=\"%s\"} %llu\n", family, r->route, l->label,
                    (unsigned long long)labelled_sum(l, which));
}

/* The per-route families, each as one group as the text format wants. Route list locked. */
static void render_routes(struct gw_route_metrics *routes, FILE *out)
{
    static const char *const kinds[GW_N_ERR_KINDS] = {"connect", "timeout", "other"};
    struct gw_route_metrics *r;

    fputs("# HELP sluice_requests_total Requests by route and the limiter's decision.\n"
          "# TYPE sluice_requests_total counter\n",
          out);
    for (r = routes; r != NULL; r = r->next)
        for (int d = 0; d < GW_N_DECISIONS; d++)
            fprintf(out, "sluice_requests_total{route=\"%s\",decision=\"%s\"} %llu\n", r->route,
                    gw_decision_name(d), (unsigned long long)SUM(r, requests, d));
    for (r = routes; r != NULL; r = r->next)
        for (struct gw_labelled *p = r->plans; p != NULL; p = p->next)
            for (int d = 0; d < GW_N_DECISIONS; d++)
                fprintf(out,
                        "sluice_requests_total{route=\"%s\",plan=\"%s\",decision=\"%s\"} %llu\n",
                        r->route, p->label, gw_decision_name(d),
                        (unsigned long long)labelled_sum(p, d));
    render_limit_counts(routes, "sluice_limit_denials_total",
                        "Requests each limit denied (or would have, in dry_run).", LIMIT_DENIALS,
                        out);
    render_limit_counts(routes, "sluice_limit_refunds_total",
                        "Charges each limit gave back because the answer did not count (count:).",
                        LIMIT_REFUNDS, out);
    fputs("# HELP sluice_upstream_responses_total Upstream answers by status code.\n"
          "# TYPE sluice_upstream_responses_total counter\n",
          out);
    for (r = routes; r != NULL; r = r->next)
        for (unsigned code = 100; code < 600; code++) {
            uint64_t n = SUM(r, responses, code);

            if (n > 0)
                fprintf(out, "sluice_upstream_responses_total{route=\"%s\",code=\"%u\"} %llu\n",
                        r->route, code, (unsigned long long)n);
        }
    fputs("# HELP sluice_upstream_errors_total Upstream failures by kind.\n"
          "# TYPE sluice_upstream_errors_total counter\n",
          out);
    for (r = routes; r != NULL; r = r->next)
        for (int k = 0; k < GW_N_ERR_KINDS; k++)
            fprintf(out, "sluice_upstream_errors_total{route=\"%s\",kind=\"%s\"} %llu\n", r->route,
                    kinds[k], (unsigned long long)SUM(r, errors, k));
    fputs("# HELP sluice_upstream_retries_total Retries made, and those the retry budget "
          "refused.\n"
          "# TYPE sluice_upstream_retries_total counter\n",
          out);
    for (r = routes; r != NULL; r = r->next) {
        fprintf(out, "sluice_upstream_retries_total{route=\"%s\",result=\"retried\"} %llu\n",
                r->route, (unsigned long long)SUM(r, retries, 1));
        fprintf(out, "sluice_upstream_retries_total{route=\"%s\",result=\"over_budget\"} %llu\n",
                r->route, (unsigned long long)SUM(r, retries, 0));
    }
    fputs(
        "# HELP sluice_tunnels_open Upgraded connections (WebSocket) joined to the upstream now.\n"
        "# TYPE sluice_tunnels_open gauge\n",
        out);
    for (r = routes; r != NULL; r = r->next)
        fprintf(out, "sluice_tunnels_open{route=\"%s\"} %lld\n", r->route,
                (long long)atomic_load(&r->tunnels_open));
    fputs("# HELP sluice_request_duration_seconds Time from request to the end of the answer.\n"
          "# TYPE sluice_request_duration_seconds histogram\n",
          out);
    for (r = routes; r != NULL; r = r->next) {
        uint64_t cumulative = 0;

        for (int b = 0; b < GW_N_BUCKETS; b++) {
            cumulative += SUM(r, duration_buckets, b);
            fprintf(out, "sluice_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                    r->route, bucket_bounds[b], (unsigned long long)cumulative);
        }
        fprintf(out, "sluice_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                r->route, (unsigned long long)SUM(r, duration_count, 0));
        fprintf(out, "sluice_request_duration_seconds_sum{route=\"%s\"} %.6f\n", r->route,
                (double)SUM(r, duration_us_sum, 0) / 1e6);
        fprintf(out, "sluice_request_duration_seconds_count{route=\"%s\"} %llu\n", r->route,
                (unsigned long long)SUM(r, duration_count, 0));
    }
}

void gw_metrics_render(struct gw_metrics *m, FILE *out,
                       void (*limiter_gauges)(void *cls, FILE *out), void *cls)
{
    pthread_mutex_lock(&m->lock);
    render_routes(m->routes, out);
    pthread_mutex_unlock(&m->lock);
    limiter_gauges(cls, out);
    fprintf(out,
            "# HELP sluice_config_reloads_total Configuration reloads by result.\n"
            "# TYPE sluice_config_reloads_total counter\n"
            "sluice_config_reloads_total{result=\"success\"} %llu\n"
            "sluice_config_reloads_total{result=\"failure\"} %llu\n"
            "# HELP sluice_connections_active Client connections open now.\n"
            "# TYPE sluice_connections_active gauge\n"
            "sluice_connections_active %lld\n"
            "# HELP sluice_connections_parked Idle keep-alive connections among those, held "
            "outside the HTTP server with no buffers (event mode).\n"
            "# TYPE sluice_connections_parked gauge\n"
            "sluice_connections_parked %lld\n"
            "# HELP sluice_requests_in_flight Requests read and not yet fully answered.\n"
            "# TYPE sluice_requests_in_flight gauge\n"
            "sluice_requests_in_flight %lld\n"
            "# HELP sluice_connections_rejected_total Connections closed at once: "
            "max_connections or max_connections_per_ip reached.\n"
            "# TYPE sluice_connections_rejected_total counter\n"
            "sluice_connections_rejected_total %llu\n"
            "# HELP sluice_accept_errors_total Failed accept() calls (out of file descriptors, "
            "say); accepting pauses after each.\n"
            "# TYPE sluice_accept_errors_total counter\n"
            "sluice_accept_errors_total %llu\n"
            "# HELP sluice_proxy_protocol_refused_total Connections closed before HTTP: not from "
            "server.proxy_protocol_from, or no valid PROXY protocol header in time.\n"
            "# TYPE sluice_proxy_protocol_refused_total counter\n"
            "sluice_proxy_protocol_refused_total %llu\n"
            "# HELP sluice_log_dropped_total Log lines lost: the log's queue was full (its reader "
            "too slow) or the write failed.\n"
            "# TYPE sluice_log_dropped_total counter\n"
            "sluice_log_dropped_total{log=\"access\"} %llu\n"
            "sluice_log_dropped_total{log=\"error\"} %llu\n",
            (unsigned long long)get(&m->reloads_ok), (unsigned long long)get(&m->reloads_failed),
            (long long)atomic_load_explicit(&m->connections, memory_order_relaxed),
            (long long)atomic_load_explicit(&m->parked, memory_order_relaxed),
            (long long)atomic_load_explicit(&m->in_flight, memory_order_relaxed),
            (unsigned long long)get(&m->connections_rejected),
            (unsigned long long)get(&m->accept_errors),
            (unsigned long long)get(&m->proxy_protocol_refused),
            (unsigned long long)gw_log_dropped(GW_LOG_ACCESS),
            (unsigned long long)gw_log_dropped(GW_LOG_ERROR));
}
