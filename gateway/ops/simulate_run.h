/*
 * simulate_run: what `sluice simulate` holds while it replays (simulate.c) and reports
 * (simulate_report.c): each config's routes and limits with their figures, and the run's
 * options and counts. Internal to gateway/ops: only those two files include it.
 */
#ifndef SLUICE_GATEWAY_OPS_SIMULATE_RUN_H
#define SLUICE_GATEWAY_OPS_SIMULATE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "gateway/identity/consumers.h"
#include "gateway/identity/keys.h"
#include "gateway/ops/client_counts.h"
#include "limiter/limiter.h"

#define MALFORMED_SHOWN 10
#define MAX_MINUTES     (7 * 24 * 60) /* a week; later denials count in the last minute */
#define SPARK_COLUMNS   60
#define NS_PER_MINUTE   (60LL * 1000000000)

enum skip {
    SKIP_NOT_DECIDED,
    SKIP_NO_ROUTE,
    SKIP_KEY_NOT_LOGGED,
    SKIP_CONSUMER_MISSING,
    SKIP_UNKNOWN_KEY,
    N_SKIPS
};
/* The reasons' names, as the report prints them (simulate.c). */
extern const char *const gw_sim_skip_names[N_SKIPS];

struct sim_limit {
    const struct config_limit *config;
    const char *plan; /* the plan it is of (the config's), or NULL for the route's own */
    char name[130];   /* "PLAN/LIMIT" for a plan's (names are 64 bytes at most), as metrics */
    struct limiter *limiter;
    char source[GW_KEY_SOURCE_LEN];
    uint64_t requests, denied;
    int64_t first_denial_ns; /* 0: none yet */
    uint32_t *per_minute;    /* denials, from the run's first minute */
    size_t n_minutes;
    struct gw_client_counts clients;
};

/* Whether `l` is replayed: a concurrency limit is not (its requests are let go at once, so it
 * never denies), since a log does not say which requests overlapped. */
static inline bool gw_sim_replays(const struct sim_limit *l)
{
    return l->config->params.algorithm_id != LIMITER_CONCURRENCY;
}

/* The limits a request may be held to, as gw_limit_set: the route's own, or a plan's. */
struct sim_set {
    struct sim_limit *limits; /* n_limits of sim_route.limits */
    size_t n_limits;
};

struct sim_route {
    const struct config_route *config;
    struct sim_limit *limits; /* the route's own, then (consumer routes) each plan's */
    size_t n_limits;
    struct sim_set own;
    struct sim_set *plans; /* one per config->plans on a route that names consumers, or NULL */
    uint64_t requests, denied;
    uint64_t recorded_denied; /* of its requests replayed, those the log says were denied */
};

struct sim {
    struct config *config;
    const char *path;
    struct gw_consumer *consumers; /* config->consumers by name */
    struct sim_route *routes;
    uint64_t skipped[N_SKIPS];
    uint64_t requests, denied;
    uint64_t recorded_denied; /* as sim_route's */
};

struct sim_run {
    struct sim proposed, current;
    bool compare, json, decisions;
    double max_denied; /* a fraction; < 0: not asked */
    uint64_t lines, malformed;
    char malformed_at[MALFORMED_SHOWN][300];
    int64_t first_minute; /* -1 until a line is decided */
};

/* `part` of `whole` as a fraction; 0 of nothing. */
double gw_sim_share(uint64_t part, uint64_t whole);

/* The report of `run` on stdout, as text or JSON. 0, or -1 when memory is short. */
int gw_sim_text_report(const struct sim_run *run);
int gw_sim_json_report(const struct sim_run *run);

#endif
