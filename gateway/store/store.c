/* The shared store in Redis; design in store.h. */
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/store/store.h"
#include "gateway/store/store_call.h"
#include "gateway/store/store_health.h"
#include "gateway/store/store_leases.h"
#include "gateway/store/store_replicas.h"
#include "gateway/store/store_script.h"
#include "gateway/store/store_workers.h"

struct gw_store {
    char *host, *password, *prefix, *master, *sentinel_password;
    char where[320]; /* for the log: "at HOST:PORT", or the master the sentinels name */
    struct config_endpoint sentinels[CONFIG_MAX_SENTINELS]; /* their hosts owned */
    struct gw_store_redis redis;                            /* the threads' view of the above */
    struct gw_store_health health;
    struct gw_store_workers *workers;
    struct gw_store_leases *leases;
    struct gw_store_replicas *replicas; /* limiter.replicas: auto; else NULL */
    int64_t lease_ns;
};

/* limiter.redis.sentinels, master and sentinel_password, copied for the threads. */
static int copy_sentinels(struct gw_store *s, const struct config *config)
{
    const char *password = config->redis.sentinel_password;

    if (config->redis.n_sentinels == 0)
        return 0;
    for (size_t i = 0; i < config->redis.n_sentinels && i < CONFIG_MAX_SENTINELS; i++) {
        s->sentinels[i].port = config->redis.sentinels[i].port;
        s->sentinels[i].host = strdup(config->redis.sentinels[i].host);
        if (s->sentinels[i].host == NULL)
            return -1;
        s->redis.n_sentinels = i + 1;
    }
    s->master = strdup(config->redis.master);
    s->sentinel_password = password != NULL && password[0] != '\0' ? strdup(password) : NULL;
    if (s->master == NULL || (password != NULL && password[0] != '\0' && !s->sentinel_password))
        return -1;
    s->redis.sentinels = s->sentinels;
    s->redis.master = s->master;
    s->redis.sentinel_password = s->sentinel_password;
    return 0;
}

struct gw_store *gw_store_new(const struct config *config)
{
    struct gw_store *s = calloc(1, sizeof *s);
    const char *password = config->redis.password;

    if (s == NULL)
        return NULL;
    /* `password: "${REDIS_PASSWORD:-}"` with the variable unset means no password; AUTH ""
     * would fail against a Redis that has none. */
    if (password != NULL && password[0] == '\0')
        password = NULL;
    s->host = strdup(config->redis.address.host);
    s->password = password ? strdup(password) : NULL;
    s->prefix = strdup(config->redis.prefix);
    s->redis = (struct gw_store_redis){.host = s->host,
                                       .port = config->redis.address.port,
                                       .password = s->password,
                                       .db = config->redis.db,
                                       .timeout_ns = config->redis.timeout_ns};
    if (config->redis.n_sentinels > 0)
        snprintf(s->where, sizeof s->where, "%.200s (the master its sentinels name)",
                 config->redis.master);
    else
        snprintf(s->where, sizeof s->where, "at %s%.200s%s:%d",
                 strchr(config->redis.address.host, ':') ? "[" : "", config->redis.address.host,
                 strchr(config->redis.address.host, ':') ? "]" : "", s->redis.port);
    gw_store_health_init(&s->health, s->where);
    s->workers = gw_store_workers_new(&s->redis, &s->health);
    s->lease_ns = config->redis.lease_ns;
    s->leases = s->workers
                    ? gw_store_leases_new(s->workers, &s->health, s->lease_ns, s->redis.timeout_ns)
                    : NULL;
    if (s->host == NULL || s->prefix == NULL || (password && !s->password) || s->leases == NULL ||
        copy_sentinels(s, config) != 0 ||
        (config->replicas_auto && (s->replicas = gw_store_replicas_start(s)) == NULL)) {
        gw_store_free(s);
        return NULL;
    }
    return s;
}

void gw_store_free(struct gw_store *s)
{
    if (s == NULL)
        return;
    gw_store_replicas_free(s->replicas);
    gw_store_leases_free(s->leases);
    gw_store_workers_free(s->workers);
    gw_store_health_destroy(&s->health);
    free(s->host);
    free(s->password);
    free(s->prefix);
    free(s->master);
    free(s->sentinel_password);
    for (size_t i = 0; i < CONFIG_MAX_SENTINELS; i++)
        free(s->sentinels[i].host);
    free(s);
}

uint32_t gw_store_replicas(const struct gw_store *s)
{
    return gw_store_replicas_alive(s->replicas);
}

void gw_store_stop(struct gw_store *s)
{
    gw_store_replicas_stop(s->replicas);
    gw_store_leases_stop(s->leases);
    gw_store_workers_stop(s->workers);
}

/* A call for `ask`, due by limiter.redis.timeout from now; NULL when the store is not to be
 * asked now, or memory is short. */
static struct gw_store_call *call_for(struct gw_store *s, const struct gw_store_ask *ask)
{
    int64_t deadline_ns = limiter_now_ns() + s->redis.timeout_ns;
    struct gw_store_call *call;
    uint64_t state;

    if (ask->n == 0 || ask->n > LIMITER_MAX_PER_REQUEST ||
        !gw_store_health_may_try(&s->health, &state))
        return NULL;
    call = gw_store_call_new(deadline_ns, state);
    if (call == NULL)
        return NULL;
    gw_script_args_make(&call->args, s->prefix, s->lease_ns, ask);
    /* Giving back or granting twice would give what others paid for: a call whose connection
     * broke (Redis may have run it) is not sent again. */
    call->retried = ask->op == GW_STORE_GIVE_BACK || ask->op == GW_STORE_GRANT;
    return call;
}

struct gw_store_call *gw_store_prepare(struct gw_store *s, const struct gw_store_ask *ask)
{
    return call_for(s, ask);
}

void gw_store_give_back(struct gw_store *s, const struct gw_store_ask *ask)
{
    struct gw_store_call *call = call_for(s, ask);

    if (call == NULL)
        return;
    if (gw_store_workers_queue(s->workers, call) != 0)
        gw_store_call_free(call);
}

struct gw_store_lease *gw_store_hold(struct gw_store *s, const struct gw_store_ask *ask)
{
    struct gw_script_args *renew = malloc(sizeof *renew);
    struct gw_store_lease *lease = NULL;

    if (renew != NULL) {
        gw_script_args_make(renew, s->prefix, s->lease_ns, ask);
        gw_script_args_set_op(renew, GW_STORE_RENEW);
        lease = gw_store_lease_hold(s->leases, renew);
        free(renew);
    }
    return lease;
}

void gw_store_release(struct gw_store *s, struct gw_store_lease *lease)
{
    gw_store_lease_end(s->leases, lease);
}

void gw_store_send(struct gw_store *s, struct gw_store_call *call, struct limiter_decision *out,
                   gw_store_done_fn *done, void *arg)
{
    call->out = out;
    call->done = done;
    call->done_arg = arg;
    if (gw_store_workers_queue(s->workers, call) != 0)
        gw_store_call_deliver(call, GW_STORE_FAILED); /* stopping: not Redis's failure */
}

void gw_store_render_metrics(const struct gw_store *s, FILE *out)
{
    fprintf(out,
            "# HELP sluice_store_errors_total Calls to the shared store that failed.\n"
            "# TYPE sluice_store_errors_total counter\n"
            "sluice_store_errors_total %llu\n"
            "# HELP sluice_store_degraded 1 while the shared store is failing and routes limit "
            "per on_store_error.\n"
            "# TYPE sluice_store_degraded gauge\n"
            "sluice_store_degraded %d\n"
            "# HELP sluice_store_leases Requests holding concurrency slots in the shared store, "
            "their leases renewed by this replica.\n"
            "# TYPE sluice_store_leases gauge\n"
            "sluice_store_leases %llu\n"
            "# HELP sluice_store_replicas Replicas sharing the store, as they announce themselves "
            "in Redis (limiter.replicas: auto; 0 otherwise or before the first count).\n"
            "# TYPE sluice_store_replicas gauge\n"
            "sluice_store_replicas %u\n",
            (unsigned long long)atomic_load(&s->health.errors),
            (int)(atomic_load(&s->health.state) % 2),
            (unsigned long long)gw_store_leases_held(s->leases),
            gw_store_replicas_alive(s->replicas));
}

#define TEXT_OF(n)          #n
#define VERSION_OF(a, b, c) TEXT_OF(a) "." TEXT_OF(b) "." TEXT_OF(c)

const char *gw_store_library_version(void)
{
    return VERSION_OF(HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
}
