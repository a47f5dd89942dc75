/*
 * backends: the servers behind a route's upstream, as the gateway sees them: how many requests
 * each has in flight, whether it is believed healthy, and what it answered.
 *
 * A server is known by its owner and its URL: the owner is the route, for a route's own
 * upstream, or the shared upstream's name (upstreams:), so that every route naming one shares
 * one state per server. Its state lives in a registry that outlives reloads (as metrics do),
 * so a reload that keeps a server keeps its health and its counts; the registry only grows
 * with the configs it has seen.
 *
 * Choosing (gw_backend_pick): among the servers not yet tried for this request and believed
 * healthy, by the route's balance:
 *   round_robin    in turn through a schedule that interleaves servers by weight (nginx's
 *                  smooth weighted round robin, worked out once per config: weights 5, 1, 1
 *                  give a a b a c a a), one atomic step per request; a turn that falls
 *                  on a server left out goes to one of the others, by weight;
 *   least_request  two servers drawn at random, the one with fewer requests in flight per
 *                  unit of weight (Envoy's power of two choices);
 *   random_two     two servers drawn at random in proportion to weight, the one with fewer in
 *                  flight (HAProxy's random(2)).
 * When none is believed healthy, the least recently failed one is chosen anyway (panic mode,
 * as Envoy has): a route with every server down still tries the likeliest rather than failing
 * every request.
 *
 * Passive health: each attempt's outcome is reported (gw_backend_report). A server with
 * `max_fails` failures (the kinds in `fail_on`) within `fail_window` is skipped for
 * `fail_timeout`; then one request is let through to it (the others still skip it), and its
 * outcome puts the server back or out for another fail_timeout. Active health
 * (health.h) flips `healthy` after consecutive check results. Believed healthy: not skipped
 * by the first, and healthy by the second.
 *
 * Retry budget: per route, retries may be at most budget_percent of its requests in the
 * current ten seconds, plus GW_RETRY_MIN a window so that a quiet route can retry at all
 * (none with budget_percent 0).
 *
 * Every field on the request path is an atomic; the passive health state of one server is
 * under its own mutex, taken only when a failure is reported or a probe ends.
 */
#ifndef SLUICE_GATEWAY_BACKENDS_H
#define SLUICE_GATEWAY_BACKENDS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "gateway/upstream/proxy.h"

/* The CONFIG_FAIL_* bit an attempt's outcome falls under (a fault, or else the status), or 0. */
unsigned gw_fault_class(enum gw_fault fault, long status);

#define GW_STATUS_CLASSES   6 /* 1xx to 5xx, and "error" (no answer) */
#define GW_RETRY_MIN        3 /* retries a route may always make in a budget window */
#define GW_BUDGET_WINDOW_NS (10 * (int64_t)1000000000)

struct gw_backend {
    char *owner, *url; /* owner: the route's name, or the shared upstream's */
    bool shared;       /* owned by a shared upstream (upstreams:) */
    _Atomic int64_t in_flight;
    _Atomic uint64_t answers[GW_STATUS_CLASSES];
    _Atomic bool healthy;          /* by active checks; true until they say otherwise */
    _Atomic int64_t down_until_ns; /* passive: skipped until then; 0 when not */
    _Atomic bool probing;          /* the one request let through after down_until */
    _Atomic int64_t last_failed_ns;
    _Atomic int64_t logged_ns[GW_N_FAULTS]; /* when each kind of failure was last logged */
    pthread_mutex_t lock;                   /* the failure window below */
    uint32_t fails;
    int64_t window_start_ns;
    struct gw_backend *next;
};

/* A route's retry budget window. */
struct gw_retry_budget {
    char *route;
    _Atomic int64_t window; /* limiter_now_ns() / GW_BUDGET_WINDOW_NS */
    _Atomic uint64_t requests, retries;
    struct gw_retry_budget *next;
};

struct gw_backends;

struct gw_backends *gw_backends_new(void);
void gw_backends_free(struct gw_backends *backends);

/* The state of `url` under `owner` (a shared upstream's name, or else a route's), made on
 * first use; valid until gw_backends_free(). NULL when memory is short. */
struct gw_backend *gw_backends_get(struct gw_backends *backends, const char *owner, bool shared,
                                   const char *url);

/* "upstream" or "route": what b->owner names, for metric labels and log lines. */
const char *gw_backend_owner_kind(const struct gw_backend *b);
struct gw_retry_budget *gw_backends_budget(struct gw_backends *backends, const char *route);

/* What a route's servers need to be chosen from: built once per config. */
struct gw_backend_set {
    struct gw_backend **servers;
    const uint32_t *weights; /* the config's */
    size_t n;
    enum config_balance balance;
    uint16_t *schedule; /* round_robin: server indexes in weighted, interleaved order */
    size_t n_schedule;
    _Atomic uint64_t turn;
};

/* Fills `set` for the servers of `route`'s upstream from `backends`. 0, or -1 when memory is short.
 */
int gw_backend_set_init(struct gw_backend_set *set, struct gw_backends *backends,
                        const struct config_route *route);
void gw_backend_set_free(struct gw_backend_set *set);

/* The index of the server for the next attempt, skipping those in `tried` (bit i: server i)
 * while any other is left. `*probe` is set when this attempt is the server's one probe after
 * fail_timeout: its outcome alone decides whether the server is back. */
size_t gw_backend_pick(struct gw_backend_set *set, uint64_t tried, int64_t now_ns, bool *probe);

/* Whether `b` is believed healthy now: not skipped after failures (or due its probe) and
 * not marked down by active checks. */
bool gw_backend_healthy(const struct gw_backend *b, int64_t now_ns);

/* An attempt on `b`: begins (counted in flight), has its outcome (`status` the upstream's, 0
 * when none came; `fault` what went wrong; the route's max_fails, windows and fail_on say
 * whether it counts against the server), and ends (no longer in flight; `reported` false
 * when it was given up before any outcome). `probe` as gw_backend_pick() said. The outcome
 * of an attempt that is not the probe never ends a skip early nor makes it longer.
 * gw_backend_report() returns true when this outcome made the server be skipped, for a log
 * line. */
void gw_backend_begin(struct gw_backend *b);
bool gw_backend_report(struct gw_backend *b, const struct config_route *route, enum gw_fault fault,
                       long status, int64_t now_ns, bool probe);
void gw_backend_finish(struct gw_backend *b, bool reported, bool probe);

/* Whether a failure of `fault` on `b` is to be logged now: at most once a second per kind. */
bool gw_backend_should_log(struct gw_backend *b, enum gw_fault fault, int64_t now_ns);

/* Counts a request of the route for its retry budget; and whether one more retry fits. */
void gw_retry_budget_count(struct gw_retry_budget *budget, int64_t now_ns);
bool gw_retry_budget_take(struct gw_retry_budget *budget, uint32_t percent, int64_t now_ns);

/* The samples of one per-server family for the servers in `set` (the caller writes each
 * family's HELP and TYPE once, then this for every route that owns its upstream), labelled
 * {route,server} for a route's own upstream and {upstream,server} for a shared one. */
enum gw_backend_family {
    GW_FAMILY_REQUESTS, /* sluice_upstream_requests_total{route|upstream,server,status_class} */
    GW_FAMILY_HEALTHY,  /* sluice_upstream_healthy{route|upstream,server} */
    GW_FAMILY_INFLIGHT, /* sluice_upstream_inflight{route|upstream,server} */
};
void gw_backend_set_render(const struct gw_backend_set *set, FILE *out,
                           enum gw_backend_family family, int64_t now_ns);

#endif
