/*
 * metrics: the counters behind GET /metrics, in the Prometheus text format.
 *
 * Counters are per route name and outlive reloads, so a route that stays keeps counting up.
 * Every count on the request path is one relaxed atomic add on the route's own counters: no
 * lock is taken. A route's request-path counters come in GW_METRIC_SHARDS shards, each on
 * cache lines of its own, summed when /metrics is read: an event loop counts in its own
 * shard (gw_metrics_use_shard()), so loops on different cores never write to one line;
 * thread_per_connection's threads share shard 0. The limiter gauges (clients held, evictions) are
 * read from the limiters at scrape time.
 *
 *   sluice_requests_total{route,decision}        allowed | denied | dry_run_denied | exempt |
 *                                                unauthenticated | forbidden | refused |
 *                                                failed (enum gw_decision)
 *   sluice_requests_total{route,plan,decision}   the requests held to a plan (a consumer's, or
 *                                                the anonymous plan); the series without plan
 *                                                count the rest
 *   sluice_limit_denials_total{route,limit}      requests a limit denied (or would have, in
 *                                                dry_run); a plan's limits are PLAN/LIMIT;
 *                                                only limits that can decide there (decide.h)
 *   sluice_upstream_responses_total{route,code}
 *   sluice_upstream_errors_total{route,kind}     connect | timeout | other
 *   sluice_upstream_retries_total{route,result}  retried | over_budget (retries: budget)
 *   sluice_tunnels_open{route}                   upgraded connections open now (tunnel.h)
 *   sluice_request_duration_seconds{route}       histogram
 *   sluice_limiter_clients{route}                the most clients any of its limits holds
 *   sluice_limiter_evictions_total{route}        lossy evictions, all of its limits
 *   sluice_config_reloads_total{result}          success | failure
 *   sluice_connections_active
 *   sluice_connections_parked                    of those, idle ones held outside
 *                                                libmicrohttpd (event mode; park.h)
 *   sluice_requests_in_flight                    requests read and not yet fully answered
 *   sluice_connections_rejected_total            refused at max_connections(_per_ip)
 *   sluice_accept_errors_total                   accept() failures (out of fds, say)
 *   sluice_proxy_protocol_refused_total          closed for want of a valid PROXY header
 *   sluice_log_dropped_total{log}                access | error: lines lost (log.h)
 */
#ifndef SLUICE_GATEWAY_METRICS_H
#define SLUICE_GATEWAY_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What happened to a request, one word each (gw_decision_name()): its outcome in the access log
 * and in sluice_requests_total. */
enum gw_decision {
    GW_ALLOWED,         /* forwarded: the upstream answered, whatever it said */
    GW_DENIED,          /* a limit refused it: on_limit's status, 429 unless set */
    GW_DRY_RUN_DENIED,  /* a limit would have refused it; forwarded (dry_run) */
    GW_EXEMPT,          /* counted by no limit (exempt); forwarded */
    GW_UNAUTHENTICATED, /* 401: no key, or one no consumer holds (unknown_key: reject) */
    GW_FORBIDDEN,       /* 403: the client's address is on a deny: list */
    GW_REFUSED,         /* another 4xx of the gateway's: a request read one way only, no
                           route, too large a body, ... */
    GW_FAILED,          /* a 5xx of the gateway's: no upstream answer, out of memory,
                           stopping */
    GW_N_DECISIONS,
};

enum gw_upstream_error_kind { GW_ERR_CONNECT, GW_ERR_TIMEOUT, GW_ERR_OTHER, GW_N_ERR_KINDS };

#define GW_N_BUCKETS 12

#define GW_METRIC_SHARDS 4

struct gw_route_shard {
    _Alignas(64) _Atomic uint64_t requests[GW_N_DECISIONS];
    _Atomic uint64_t responses[600]; /* by upstream status code */
    _Atomic uint64_t errors[GW_N_ERR_KINDS];
    _Atomic uint64_t retries[2];                     /* over budget, retried */
    _Atomic uint64_t duration_buckets[GW_N_BUCKETS]; /* cumulative at render time */
    _Atomic uint64_t duration_us_sum;
    _Atomic uint64_t duration_count;
};

/* A count kept under one more label of a route: a plan's requests by decision, or one limit's
 * denials and refunds (counts[LIMIT_DENIALS], counts[LIMIT_REFUNDS], in metrics.c). Made on first
 * use, and kept, like the route's, across reloads; sharded as the route's are, since one plan can
 * be most of a route's requests. */
struct gw_labelled_shard {
    _Alignas(64) _Atomic uint64_t counts[GW_N_DECISIONS];
};

struct gw_labelled {
    char *label;
    struct gw_labelled_shard shards[GW_METRIC_SHARDS];
    struct gw_labelled *next;
};

struct gw_route_metrics {
    char *route;
    struct gw_labelled *plans, *limits; /* under the registry's lock while added to */
    struct gw_route_shard shards[GW_METRIC_SHARDS];
    _Atomic uint64_t retired_evictions; /* of limiters dropped by reloads */
    _Atomic int64_t tunnels_open;       /* tunnel.h: counted by the tunnels themselves */
    struct gw_route_metrics *next;
};

struct gw_metrics;

/* A registry; freed with gw_metrics_free(). NULL when memory is short. */
struct gw_metrics *gw_metrics_new(void);
void gw_metrics_free(struct gw_metrics *metrics);

/* The counters of `route`, created on first use; valid until gw_metrics_free(). */
struct gw_route_metrics *gw_metrics_route(struct gw_metrics *metrics, const char *route);

/* The counters of `route`'s plan or limit of that name, created on first use; valid until
 * gw_metrics_free(). NULL when memory is short. */
struct gw_labelled *gw_metrics_plan(struct gw_metrics *metrics, struct gw_route_metrics *route,
                                    const char *plan);
struct gw_labelled *gw_metrics_limit(struct gw_metrics *metrics, struct gw_route_metrics *route,
                                     const char *limit);

const char *gw_decision_name(enum gw_decision decision);

/* The calling thread counts in shard `index` % GW_METRIC_SHARDS from now on (0 by default). */
void gw_metrics_use_shard(unsigned index);

/* A finished request of route `m`, held to `plan` (NULL: none). */
void gw_metrics_count_request(struct gw_route_metrics *m, struct gw_labelled *plan,
                              enum gw_decision decision, int64_t duration_ns);
void gw_metrics_count_denial(struct gw_labelled *limit);
/* A charge of `limit` given back: its answer did not count (count:). */
void gw_metrics_count_refund(struct gw_labelled *limit);
void gw_metrics_count_response(struct gw_route_metrics *m, unsigned status);
void gw_metrics_count_error(struct gw_route_metrics *m, enum gw_upstream_error_kind kind);
/* A retry made (`retried`), or one the route's retry budget refused. */
void gw_metrics_count_retry(struct gw_route_metrics *m, bool retried);
void gw_metrics_count_reload(struct gw_metrics *metrics, bool ok);
void gw_metrics_connection(struct gw_metrics *metrics, int delta);
/* A connection parked (+1) or taken out of the park (-1). */
void gw_metrics_parked(struct gw_metrics *metrics, int delta);
/* A request begins (+1) or its answer has been sent or abandoned (-1). */
void gw_metrics_in_flight(struct gw_metrics *metrics, int delta);
/* How many requests are in flight now (for the drain on shutdown). */
unsigned gw_metrics_requests_in_flight(struct gw_metrics *metrics);
/* A connection closed at once for max_connections or max_connections_per_ip. */
void gw_metrics_count_rejected(struct gw_metrics *metrics);
/* A connection closed for want of a valid PROXY protocol header (listener.h). */
void gw_metrics_count_proxy_refused(struct gw_metrics *metrics);
/* An accept() that failed, on either port. */
void gw_metrics_count_accept_error(struct gw_metrics *metrics);

/* Writes every counter. `limiter_gauges` writes the clients and evictions lines of the
 * routes currently configured (the runtime knows its limiters). */
void gw_metrics_render(struct gw_metrics *metrics, FILE *out,
                       void (*limiter_gauges)(void *cls, FILE *out), void *cls);

#endif
