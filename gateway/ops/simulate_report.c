/* `sluice simulate`'s report, as text or JSON; design in simulate.h. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/common/respond.h"
#include "gateway/ops/simulate_run.h"

double gw_sim_share(uint64_t part, uint64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

/* "2026-11-30T10:00:00.123Z" for `ns` since the epoch. */
static const char *utc_text(int64_t ns, char out[32])
{
    time_t seconds = (time_t)(ns / 1000000000);
    struct tm tm;
    char whole[24];

    gmtime_r(&seconds, &tm);
    strftime(whole, sizeof whole, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%s.%03dZ", whole, (int)(ns / 1000000 % 1000));
    return out;
}

static const struct sim_route *route_named(const struct sim *s, const char *name)
{
    for (size_t i = 0; s->routes != NULL && i < s->config->n_routes; i++)
        if (strcmp(s->routes[i].config->name, name) == 0)
            return &s->routes[i];
    return NULL;
}

static const struct sim_limit *limit_named(const struct sim_route *r, const char *name)
{
    for (size_t i = 0; r != NULL && i < r->n_limits; i++)
        if (strcmp(r->limits[i].name, name) == 0)
            return &r->limits[i];
    return NULL;
}

/* The clients `proposed` denied whom no limit of `current` denied, with their denials under
 * `proposed`, into `out`. 0, or -1 when memory is short. */
static int newly_denied(const struct sim_route *proposed, const struct sim_route *current,
                        struct gw_client_counts *out)
{
    for (size_t i = 0; i < proposed->n_limits; i++) {
        const struct gw_client_counts *c = &proposed->limits[i].clients;

        for (size_t k = 0; k < c->cap; k++) {
            bool before = false;

            if (c->denials[k] == 0)
                continue;
            for (size_t j = 0; current != NULL && j < current->n_limits && !before; j++)
                before = gw_client_counts_get(&current->limits[j].clients, c->hashes[k]) > 0;
            if (!before && gw_client_counts_add(out, c->hashes[k], c->denials[k], c->names[k]) != 0)
                return -1;
        }
    }
    return 0;
}

/* Denials per minute as one line of at most SPARK_COLUMNS characters, each column the sum of
 * `per` minutes, scaled to the busiest column. */
static void sparkline(const struct sim_limit *l, size_t per, char *out)
{
    static const char levels[] = " .:-=+*#%@";
    size_t columns = (l->n_minutes + per - 1) / per;
    uint64_t sums[SPARK_COLUMNS] = {0}, max = 0;

    for (size_t m = 0; m < l->n_minutes; m++)
        sums[m / per] += l->per_minute[m];
    for (size_t c = 0; c < columns; c++)
        max = sums[c] > max ? sums[c] : max;
    for (size_t c = 0; c < columns; c++)
        out[c] = sums[c] == 0 ? '_' : levels[1 + (sums[c] * 8 + max - 1) / max];
    out[columns] = '\0';
}

/* One row of the text report: the proposed figures, what the log recorded (a route's row),
 * and with --compare the current config's. */
struct row {
    const char *label;
    int width; /* of the label column: the longest label, 32 at least */
    uint64_t requests, denied;
    const uint64_t *recorded; /* the denials the log records; NULL on a limit's row */
    int64_t first_denial_ns;
    bool compare;
    const uint64_t *current; /* its denials and requests; NULL when it has no such row */
};

static void text_figures(const struct row *r)
{
    char when[32], recorded[24] = "";

    if (r->recorded != NULL)
        snprintf(recorded, sizeof recorded, "%" PRIu64, *r->recorded);
    printf("  %-*s %10" PRIu64 " %10" PRIu64 " %10s %8.3f%%  %-24s", r->width, r->label,
           r->requests, r->denied, r->recorded != NULL ? recorded : "-",
           100.0 * gw_sim_share(r->denied, r->requests),
           r->first_denial_ns ? utc_text(r->first_denial_ns, when) : "-");
    if (r->compare && r->current != NULL)
        printf(" | %10" PRIu64 " %8.3f%%", r->current[0],
               100.0 * gw_sim_share(r->current[0], r->current[1]));
    else if (r->compare)
        printf(" | %10s %9s", "-", "-");
    printf("\n");
}

/* "  LIMIT (ALGORITHM)": a limit's label, under its route's. */
static void limit_label(const struct sim_limit *l, char *out, size_t cap)
{
    snprintf(out, cap, "  %s (%s)", l->name, l->config->params.algorithm);
}

/* The label column's width for `s`: its longest label, and 32 at least. */
static int label_width(const struct sim *s)
{
    char name[200];
    size_t width = 32;

    for (size_t i = 0; i < s->config->n_routes; i++) {
        const struct sim_route *r = &s->routes[i];

        width = strlen(r->config->name) > width ? strlen(r->config->name) : width;
        for (size_t j = 0; j < r->n_limits; j++) {
            limit_label(&r->limits[j], name, sizeof name);
            width = strlen(name) > width ? strlen(name) : width;
        }
    }
    return (int)width;
}

static void text_clients(const char *title, const struct gw_client_counts *c)
{
    size_t top[GW_CLIENT_COUNTS_TOP], n = gw_client_counts_top(c, top);

    if (n == 0)
        return;
    printf("      %s:", title);
    for (size_t i = 0; i < n; i++)
        if (c->names[top[i]] != NULL)
            printf(" %s (%" PRIu64 ")", c->names[top[i]], c->denials[top[i]]);
        else
            printf(" %016" PRIx64 " (%" PRIu64 ")", c->hashes[top[i]], c->denials[top[i]]);
    if (c->unnamed > 0)
        printf(" and %" PRIu64 " denials of clients not kept", c->unnamed);
    printf("\n");
}

/* A limit's rows, its label `width` wide: its figures (beside `had`'s with --compare), and
 * when it denied, its denials per minute and its most denied clients. */
static void text_limit(const struct sim_run *run, const struct sim_limit *l,
                       const struct sim_limit *had, int width, bool compare)
{
    char name[200], spark[SPARK_COLUMNS + 1], when[32];
    size_t per = (l->n_minutes + SPARK_COLUMNS - 1) / SPARK_COLUMNS;
    uint64_t current[2] = {had ? had->denied : 0, had ? had->requests : 0};
    struct row row = {name,        width,
                      l->requests, l->denied,
                      NULL,        l->first_denial_ns,
                      compare,     had ? current : NULL};

    limit_label(l, name, sizeof name);
    text_figures(&row);
    if (!gw_sim_replays(l))
        printf("      not replayed: a log does not say which requests were in flight together\n");
    if (l->denied == 0)
        return;
    sparkline(l, per, spark);
    printf("      denials per %zu min from %.16s: |%s|\n", per,
           utc_text(run->first_minute * NS_PER_MINUTE, when), spark);
    text_clients("most denied clients", &l->clients);
}

static void text_sim(const struct sim_run *run, const struct sim *s, const char *title)
{
    const struct sim *other = s == &run->proposed && run->compare ? &run->current : NULL;
    int width = label_width(s);
    bool sparks = false;

    printf("%s (%s): %" PRIu64 " requests replayed, %" PRIu64 " would be denied (%.3f%%), %" PRIu64
           " were (the log's decisions)\n",
           title, s->path, s->requests, s->denied, 100.0 * gw_sim_share(s->denied, s->requests),
           s->recorded_denied);
    printf("  %-*s %10s %10s %10s %9s  %-24s%s\n", width, "ROUTE / LIMIT", "REQUESTS", "DENIED",
           "RECORDED", "SHARE", "FIRST DENIAL", other ? " |  CURRENT:  DENIED     SHARE" : "");
    for (size_t i = 0; i < s->config->n_routes; i++) {
        const struct sim_route *r = &s->routes[i];
        const struct sim_route *was = other ? route_named(other, r->config->name) : NULL;
        uint64_t current[2] = {was ? was->denied : 0, was ? was->requests : 0};
        struct row row = {r->config->name,     width, r->requests,   r->denied,
                          &r->recorded_denied, 0,     other != NULL, was ? current : NULL};

        text_figures(&row);
        for (size_t j = 0; j < r->n_limits; j++) {
            text_limit(run, &r->limits[j], limit_named(was, r->limits[j].name), width,
                       other != NULL);
            sparks = sparks || r->limits[j].denied > 0;
        }
    }
    if (sparks)
        printf("  (denials per minute: each column sums that many minutes; _ none, then . : - = "
               "+ * # %% @ up to the busiest column)\n");
    printf("  not replayed:");
    for (size_t k = 0; k < N_SKIPS; k++)
        printf(" %s %" PRIu64, gw_sim_skip_names[k], s->skipped[k]);
    printf("\n");
}

int gw_sim_text_report(const struct sim_run *run)
{
    printf("%" PRIu64 " lines, %" PRIu64 " malformed\n", run->lines, run->malformed);
    for (size_t i = 0; i < run->malformed && i < MALFORMED_SHOWN; i++)
        printf("  %s\n", run->malformed_at[i]);
    text_sim(run, &run->proposed, "proposed");
    if (!run->compare)
        return 0;
    text_sim(run, &run->current, "current");
    printf("denied under the proposed config, never under the current one:\n");
    for (size_t i = 0; i < run->proposed.config->n_routes; i++) {
        const struct sim_route *r = &run->proposed.routes[i];
        struct gw_client_counts fresh = {.max = SIZE_MAX};

        if (newly_denied(r, route_named(&run->current, r->config->name), &fresh) != 0) {
            gw_client_counts_free(&fresh);
            return -1;
        }
        printf("  %s: %zu clients\n", r->config->name, fresh.n);
        text_clients("most denied", &fresh);
        gw_client_counts_free(&fresh);
    }
    return 0;
}

/* `text` as a JSON string, quotes included. */
static void json_string(const char *text)
{
    char escaped[512];

    gw_json_escape(escaped, sizeof escaped, text, SIZE_MAX);
    printf("\"%s\"", escaped);
}

static void json_clients(const struct gw_client_counts *c)
{
    size_t top[GW_CLIENT_COUNTS_TOP], n = gw_client_counts_top(c, top);

    printf("[");
    for (size_t i = 0; i < n; i++) {
        printf("%s{\"client\":\"%016" PRIx64 "\",", i ? "," : "", c->hashes[top[i]]);
        if (c->names[top[i]] != NULL) {
            printf("\"consumer\":");
            json_string(c->names[top[i]]);
            printf(",");
        }
        printf("\"denials\":%" PRIu64 "}", c->denials[top[i]]);
    }
    printf("]");
}

static void json_figures(uint64_t requests, uint64_t denied)
{
    printf("\"requests\":%" PRIu64 ",\"denied\":%" PRIu64 ",\"share_denied\":%.6f", requests,
           denied, gw_sim_share(denied, requests));
}

static void json_sim(const struct sim_run *run, const struct sim *s)
{
    char when[32];

    printf("{\"config\":");
    json_string(s->path);
    printf(",");
    json_figures(s->requests, s->denied);
    printf(",\"recorded_denied\":%" PRIu64, s->recorded_denied);
    printf(",\"not_replayed\":{");
    for (size_t k = 0; k < N_SKIPS; k++)
        printf("%s\"%s\":%" PRIu64, k ? "," : "", gw_sim_skip_names[k], s->skipped[k]);
    printf("},\"routes\":[");
    for (size_t i = 0; i < s->config->n_routes; i++) {
        const struct sim_route *r = &s->routes[i];

        printf("%s{\"name\":", i ? "," : "");
        json_string(r->config->name);
        printf(",");
        json_figures(r->requests, r->denied);
        printf(",\"recorded_denied\":%" PRIu64, r->recorded_denied);
        printf(",\"limits\":[");
        for (size_t j = 0; j < r->n_limits; j++) {
            const struct sim_limit *l = &r->limits[j];

            printf("%s{\"name\":", j ? "," : "");
            json_string(l->name);
            printf(",\"plan\":");
            if (l->plan != NULL)
                json_string(l->plan);
            else
                printf("null");
            printf(",\"algorithm\":\"%s\",\"key\":", l->config->params.algorithm);
            json_string(l->source);
            printf(",\"replayed\":%s,", gw_sim_replays(l) ? "true" : "false");
            json_figures(l->requests, l->denied);
            printf(",\"first_denial\":");
            if (l->first_denial_ns)
                printf("\"%s\"", utc_text(l->first_denial_ns, when));
            else
                printf("null");
            printf(",\"top_clients\":");
            json_clients(&l->clients);
            printf(",\"unnamed_client_denials\":%" PRIu64 ",\"denials_per_minute\":{\"start\":",
                   l->clients.unnamed);
            if (l->n_minutes > 0)
                printf("\"%s\"", utc_text(run->first_minute * NS_PER_MINUTE, when));
            else
                printf("null");
            printf(",\"counts\":[");
            for (size_t m = 0; m < l->n_minutes; m++)
                printf("%s%" PRIu32, m ? "," : "", l->per_minute[m]);
            printf("]}}");
        }
        printf("]}");
    }
    printf("]}");
}

int gw_sim_json_report(const struct sim_run *run)
{
    int rc = 0;

    printf("{\"lines\":%" PRIu64 ",\"malformed\":{\"count\":%" PRIu64 ",\"first\":[", run->lines,
           run->malformed);
    for (size_t i = 0; i < run->malformed && i < MALFORMED_SHOWN; i++) {
        printf("%s", i ? "," : "");
        json_string(run->malformed_at[i]);
    }
    printf("]},\"proposed\":");
    json_sim(run, &run->proposed);
    if (run->compare) {
        printf(",\"current\":");
        json_sim(run, &run->current);
        printf(",\"newly_denied\":[");
        for (size_t i = 0; i < run->proposed.config->n_routes && rc == 0; i++) {
            const struct sim_route *r = &run->proposed.routes[i];
            struct gw_client_counts fresh = {.max = SIZE_MAX};

            rc = newly_denied(r, route_named(&run->current, r->config->name), &fresh);
            printf("%s{\"route\":", i ? "," : "");
            json_string(r->config->name);
            printf(",\"clients\":%zu,\"top_clients\":", fresh.n);
            json_clients(&fresh);
            printf("}");
            gw_client_counts_free(&fresh);
        }
        printf("]");
    }
    printf("}\n");
    return rc;
}
