/* `sluice simulate`: access logs replayed against a config's limits; design in simulate.h. */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "gateway/common/respond.h"
#include "gateway/common/target.h"
#include "gateway/identity/consumers.h"
#include "gateway/limits/decide.h"
#include "gateway/ops/client_counts.h"
#include "gateway/ops/log_line.h"
#include "gateway/ops/log_reader.h"
#include "gateway/ops/simulate.h"
#include "gateway/ops/simulate_run.h"
#include "gateway/routing/routes.h"
#include "limiter/limiter.h"

static const char usage[] =
    "usage: sluice simulate -c PROPOSED.yaml [--compare CURRENT.yaml] [--format text|json]\n"
    "                       [--max-denied PERCENT%] [--decisions] ACCESS_LOG... (- for stdin;\n"
    "                       a .gz log: zcat access.log.gz | sluice simulate -c P.yaml -)\n";

const char *const gw_sim_skip_names[N_SKIPS] = {"not_decided", "no_route", "key_not_logged",
                                                "consumer_missing", "unknown_key"};

/* --- building and running one config ----------------------------------------------------- */

/* The limiters of `limits` (n of them, of `plan`, NULL for the route's own) into `set`, at the
 * end of r->limits, each counting under the source of the key gw_limits_select() gives it. */
static int sim_set_open(const struct sim *s, struct sim_route *r, struct sim_set *set,
                        const char *plan, const struct config_limit *limits, size_t n)
{
    const struct config_route *route = r->config;
    char why[LIMITER_ERR_LEN];

    set->limits = &r->limits[r->n_limits];
    for (size_t j = 0; j < n; j++) {
        struct sim_limit *l = &r->limits[r->n_limits];
        /* As the gateway runs a route kept in this process: a log of a route in the shared
         * store was decided there, on the whole quota, which is what replays it. */
        struct limiter_params params = gw_limits_local_params(s->config, &limits[j], false);

        l->config = &limits[j];
        l->plan = plan;
        snprintf(l->name, sizeof l->name, "%s%s%s", plan ? plan : "", plan ? "/" : "",
                 limits[j].name);
        l->limiter = limiter_create(&params, why);
        if (l->limiter == NULL) {
            fprintf(stderr, "%s: route %s, limit %s: %s\n", s->path, route->name, l->name, why);
            return -1;
        }
        r->n_limits++;
        set->n_limits++;
        gw_limits_key_source(route, &limits[j], l->source);
        l->clients.max =
            s->config->max_clients ? s->config->max_clients : LIMITER_DEFAULT_MAX_CLIENTS;
    }
    return 0;
}

static int sim_route_open(const struct sim *s, struct sim_route *r)
{
    const struct config_route *route = r->config;
    bool plans = gw_limits_plans_decide(route);
    /* As the gateway builds them: no row for a set that can never decide (decide.h). */
    size_t n_own = gw_limits_own_decide(route) ? route->n_limits : 0, n = n_own;

    for (size_t p = 0; plans && p < route->n_plans; p++)
        n += route->plans[p].n_limits;
    r->limits = calloc(n ? n : 1, sizeof *r->limits);
    if (plans)
        r->plans = calloc(route->n_plans ? route->n_plans : 1, sizeof *r->plans);
    if (r->limits == NULL || (plans && r->plans == NULL)) {
        fprintf(stderr, "sluice simulate: out of memory\n");
        return -1;
    }
    if (sim_set_open(s, r, &r->own, NULL, route->limits, n_own) != 0)
        return -1;
    for (size_t p = 0; r->plans != NULL && p < route->n_plans; p++)
        if (sim_set_open(s, r, &r->plans[p], s->config->plans[p].name, route->plans[p].limits,
                         route->plans[p].n_limits) != 0)
            return -1;
    return 0;
}

static int sim_open(struct sim *s, const char *path)
{
    char *errors = NULL;

    s->path = path;
    s->config = config_load(path, &errors);
    if (s->config == NULL) {
        fputs(errors, stderr);
        free(errors);
        return -1;
    }
    s->routes = calloc(s->config->n_routes ? s->config->n_routes : 1, sizeof *s->routes);
    s->consumers = gw_consumers_by_name(s->config);
    if (s->routes == NULL || s->consumers == NULL) {
        fprintf(stderr, "sluice simulate: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < s->config->n_routes; i++) {
        s->routes[i].config = &s->config->routes[i];
        if (sim_route_open(s, &s->routes[i]) != 0)
            return -1;
    }
    return 0;
}

static void sim_close(struct sim *s)
{
    for (size_t i = 0; s->routes != NULL && i < s->config->n_routes; i++) {
        for (size_t j = 0; j < s->routes[i].n_limits; j++) {
            limiter_free(s->routes[i].limits[j].limiter);
            free(s->routes[i].limits[j].per_minute);
            gw_client_counts_free(&s->routes[i].limits[j].clients);
        }
        free(s->routes[i].limits);
        free(s->routes[i].plans);
    }
    free(s->routes);
    free(s->consumers);
    config_free(s->config);
}

/* Counts a denial by `l` of the client `hash` (the consumer `consumer` when its limit counts
 * consumers, else NULL) at `now_ns`. */
static int count_denial(struct sim_limit *l, const char *hash, const char *consumer, int64_t now_ns,
                        int64_t minute0)
{
    int64_t minute = now_ns / NS_PER_MINUTE - minute0;

    l->denied++;
    if (l->first_denial_ns == 0)
        l->first_denial_ns = now_ns;
    if (minute < 0)
        minute = 0;
    if (minute >= MAX_MINUTES)
        minute = MAX_MINUTES - 1;
    if ((size_t)minute >= l->n_minutes) {
        size_t n = (size_t)minute + 1 > l->n_minutes * 2 ? (size_t)minute + 1 : l->n_minutes * 2;
        uint32_t *grown =
            realloc(l->per_minute, (n < MAX_MINUTES ? n : MAX_MINUTES) * sizeof *grown);

        if (grown == NULL)
            return -1;
        n = n < MAX_MINUTES ? n : MAX_MINUTES;
        memset(grown + l->n_minutes, 0, (n - l->n_minutes) * sizeof *grown);
        l->per_minute = grown;
        l->n_minutes = n;
    }
    l->per_minute[minute]++;
    return gw_client_counts_add(&l->clients, strtoull(hash, NULL, 16), 1, consumer);
}

/* The limits `line` is held to on `r`, as the gateway selects them (decide.h): on a route that
 * names consumers, the plan of the consumer the line was decided as (by name, the plan the
 * proposed config gives it), or for none the anonymous plan or the route's own limits. NULL
 * when the proposed config cannot decide it, with `*skip` saying why. `*consumer` is set to
 * the consumer, or NULL. */
static const struct sim_set *select_set(const struct sim *s, const struct sim_route *r,
                                        const struct gw_log_line *line,
                                        struct gw_limits_selection *selection,
                                        const struct gw_consumer **consumer, enum skip *skip)
{
    *consumer = NULL;
    if (r->config->identifies_consumers && line->consumer[0] != '\0') {
        *consumer = gw_consumers_named(s->consumers, s->config->n_consumers, line->consumer);
        if (*consumer == NULL) {
            *skip = SKIP_CONSUMER_MISSING;
            return NULL;
        }
    }
    /* Never exempt: an exempt request is not decided, and its line was skipped for that. */
    if (gw_limits_select(r->config, *consumer, false, line->method, selection) != 0) {
        *skip = SKIP_UNKNOWN_KEY; /* a 401 now, before any limit */
        return NULL;
    }
    return selection->plan == GW_LIMITS_OWN ? &r->own : &r->plans[selection->plan];
}

/* Gives back, as the gateway does once the answer is in (limit.c), the charge of each limit
 * whose count: does not hold the status the line was answered. A line the recording denied
 * got the gateway's refusal, not an answer: what it would have been answered is unknown, and
 * its charge is kept. A concurrency limit's slot is given back at once (gw_sim_replays()). */
static void settle(const struct sim_set *set, const struct gw_log_line *line,
                   const char *const *ids, const struct gw_limits_selection *selection,
                   const struct gw_limits_decision *verdict)
{
    bool answered = strcmp(line->decision, "denied") != 0;

    for (size_t i = 0; i < set->n_limits; i++)
        if (!gw_sim_replays(&set->limits[i]) ||
            (answered && !config_count_holds(&set->limits[i].config->count,
                                             (unsigned)(line->status <= 999 ? line->status : 0))))
            limiter_refund(set->limits[i].limiter, ids[i], selection->costs[i],
                           verdict->each[i].charged_ns, line->decided_ns);
}

/* Decides `line` under `s`: 1 denied, 0 allowed, -1 not replayed (`*skip` says why), -2 out
 * of memory. `denying` receives the names of the limits that denied, comma-separated. */
static int replay(struct sim *s, const struct gw_log_line *line, int64_t minute0, enum skip *skip,
                  char *denying, size_t denying_len)
{
    char routing[GW_LOG_PATH_MAX + 1];
    const char *reason, *ids[LIMITER_MAX_PER_REQUEST];
    const struct gw_consumer *consumer;
    struct limiter *limiters[LIMITER_MAX_PER_REQUEST];
    struct gw_limits_selection selection;
    struct gw_limits_decision verdict;
    enum gw_limits_outcome outcome;
    struct sim_route *r;
    const struct sim_set *set;
    int route;
    size_t len = 0;

    denying[0] = '\0';
    if (line->decided_ns <= 0 || line->decided_ns > LIMITER_MAX_NOW_NS) {
        *skip = SKIP_NOT_DECIDED;
        goto skipped;
    }
    route =
        line->path[0] == '/' && gw_target_path(line->path, routing, &reason) == 0
            ? gw_route_match(s->config, line->method, routing, line->host[0] ? line->host : NULL)
            : -1;
    if (route < 0) {
        *skip = SKIP_NO_ROUTE;
        goto skipped;
    }
    r = &s->routes[route];
    set = select_set(s, r, line, &selection, &consumer, skip);
    if (set == NULL)
        goto skipped;
    for (size_t i = 0; i < set->n_limits; i++) {
        ids[i] = gw_log_line_key(line, set->limits[i].source);
        if (ids[i] == NULL) {
            *skip = SKIP_KEY_NOT_LOGGED;
            goto skipped;
        }
        limiters[i] = set->limits[i].limiter;
    }
    r->requests++;
    s->requests++;
    /* What the gateway that wrote the line decided, beside what this config decides. */
    if (strcmp(line->decision, "denied") == 0) {
        r->recorded_denied++;
        s->recorded_denied++;
    }
    if (set->n_limits == 0)
        return 0;
    outcome = gw_limits_decide_local(&verdict, limiters, ids, &selection, line->decided_ns);
    for (size_t i = 0; i < set->n_limits; i++) {
        struct sim_limit *l = &set->limits[i];

        l->requests++;
        /* Failing closed (no memory for the client's state), every limit denied it. */
        if (outcome != GW_LIMITS_FAILED_CLOSED && verdict.each[i].allowed)
            continue;
        if (count_denial(l, ids[i],
                         consumer != NULL && strcmp(l->source, "consumer") == 0 ? consumer->name
                                                                                : NULL,
                         line->decided_ns, minute0) != 0)
            return -2;
        len += (size_t)snprintf(denying + len, len < denying_len ? denying_len - len : 0, "%s%s",
                                len ? "," : "", l->name);
    }
    if (outcome == GW_LIMITS_ALLOWED) {
        settle(set, line, ids, &selection, &verdict);
        return 0;
    }
    r->denied++;
    s->denied++;
    return 1;
skipped:
    s->skipped[*skip]++;
    return -1;
}

/* --- reading the logs -------------------------------------------------------------------- */

/* Counts a malformed line; names it among the first few, or at once with --decisions. */
static void note_malformed(struct sim_run *run, const char *file, uint64_t lineno, const char *why)
{
    if (run->malformed < MALFORMED_SHOWN)
        snprintf(run->malformed_at[run->malformed], sizeof run->malformed_at[0],
                 "%s:%" PRIu64 ": %s", file, lineno, why);
    run->malformed++;
    if (run->decisions)
        printf("%s:%" PRIu64 " malformed %s\n", file, lineno, why);
}

static void print_decision(const char *file, uint64_t lineno, int rc, enum skip skip,
                           const char *denying)
{
    if (rc == 1)
        printf("%s:%" PRIu64 " denied %s\n", file, lineno, denying);
    else if (rc == 0)
        printf("%s:%" PRIu64 " allowed\n", file, lineno);
    else
        printf("%s:%" PRIu64 " skipped %s\n", file, lineno, gw_sim_skip_names[skip]);
}

/* Replays each line of `file` ("-": standard input). 0 once all of it was read; -1 when it
 * could not be read to its end (then a report would be over part of it) or memory ran out. */
static int read_log(struct sim_run *run, const char *file)
{
    char err[GW_LOG_READER_ERR_LEN], denying[LIMITER_MAX_PER_REQUEST * 132];
    struct gw_log_reader *in = gw_log_reader_open(file, err);
    struct gw_log_line line;
    uint64_t lineno = 0;
    int rc = -1;

    if (in == NULL) {
        fprintf(stderr, "sluice simulate: %s: %s\n", file, err);
        return -1;
    }
    for (;;) {
        const char *text, *why;
        size_t len;
        enum gw_log_read got = gw_log_reader_next(in, &text, &len, err);
        enum skip skip = SKIP_NOT_DECIDED;
        int decided;

        if (got == GW_LOG_READ_END)
            break;
        if (got == GW_LOG_READ_ERROR) {
            fprintf(stderr, "sluice simulate: %s: read failed after %" PRIu64 " lines: %s\n", file,
                    lineno, err);
            goto out;
        }
        lineno++;
        run->lines++;
        why = "longer than any line the access log writes";
        if (got == GW_LOG_READ_TOO_LONG || gw_log_line_parse(text, len, &line, &why) != 0) {
            note_malformed(run, file, lineno, why);
            continue;
        }
        if (run->first_minute < 0 && line.decided_ns > 0)
            run->first_minute = line.decided_ns / NS_PER_MINUTE;
        decided = replay(&run->proposed, &line, run->first_minute, &skip, denying, sizeof denying);
        if (decided != -2 && run->decisions)
            print_decision(file, lineno, decided, skip, denying);
        if (decided == -2 || (run->compare && replay(&run->current, &line, run->first_minute, &skip,
                                                     denying, sizeof denying) == -2)) {
            fprintf(stderr, "sluice simulate: out of memory\n");
            goto out;
        }
    }
    rc = 0;
out:
    gw_log_reader_close(in);
    return rc;
}

/* --- the command ------------------------------------------------------------------------- */

/* "0.1%" as 0.001; -1 when it is not a percentage from 0 to 100. */
static double parse_percent(const char *text)
{
    char *end;
    double value = strtod(text, &end);

    if (end == text || strcmp(end, "%") != 0 || !(value >= 0 && value <= 100))
        return -1;
    return value / 100;
}

/* The command line into `run` and the two configs' paths: 0, 1 for --help, -1 for a usage
 * error. */
static int parse_options(struct sim_run *run, int argc, char **argv, const char **proposed,
                         const char **current)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"compare", required_argument, NULL, 'C'},
        {"format", required_argument, NULL, 'f'},
        {"max-denied", required_argument, NULL, 'm'},
        {"decisions", no_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            *proposed = optarg;
            break;
        case 'C':
            *current = optarg;
            break;
        case 'f':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                return -1;
            run->json = strcmp(optarg, "json") == 0;
            break;
        case 'm':
            run->max_denied = parse_percent(optarg);
            if (run->max_denied < 0) {
                fprintf(stderr, "sluice simulate: --max-denied takes a percentage: 0.1%%\n");
                return -1;
            }
            break;
        case 'd':
            run->decisions = true;
            break;
        case 'h':
            return 1;
        default:
            return -1;
        }
    }
    return *proposed == NULL || optind == argc ? -1 : 0;
}

int gw_simulate_main(int argc, char **argv)
{
    struct sim_run *run = calloc(1, sizeof *run);
    const char *proposed = NULL, *current = NULL;
    int parsed, rc = 2;

    if (run == NULL) {
        fprintf(stderr, "sluice simulate: out of memory\n");
        return 2;
    }
    run->max_denied = -1;
    run->first_minute = -1;
    parsed = parse_options(run, argc, argv, &proposed, &current);
    if (parsed != 0) {
        fputs(usage, parsed > 0 ? stdout : stderr);
        rc = parsed > 0 ? 0 : 2;
        goto out;
    }
    run->compare = current != NULL;
    if (sim_open(&run->proposed, proposed) != 0 ||
        (run->compare && sim_open(&run->current, current) != 0))
        goto out;
    for (int i = optind; i < argc; i++)
        if (read_log(run, argv[i]) != 0)
            goto out;
    if (!run->decisions && (run->json ? gw_sim_json_report(run) : gw_sim_text_report(run)) != 0)
        goto out;
    rc = run->max_denied >= 0 &&
                 gw_sim_share(run->proposed.denied, run->proposed.requests) > run->max_denied
             ? 1
             : 0;
    if (rc == 1)
        fprintf(stderr,
                "sluice simulate: %.3f%% of the replayed requests would be denied, over %.3f%%\n",
                100.0 * gw_sim_share(run->proposed.denied, run->proposed.requests),
                100 * run->max_denied);
out:
    if (run->proposed.config != NULL)
        sim_close(&run->proposed);
    if (run->current.config != NULL)
        sim_close(&run->current);
    free(run);
    return rc;
}
