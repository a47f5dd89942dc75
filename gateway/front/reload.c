/* The current runtime: taken by each request (a loop keeps its own copy, refreshed when the
 * generation moves), and swapped by a reload; and the settings fixed at start, which a reload
 * keeps, saying so. Design in server.h. */
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/log.h"
#include "gateway/core/runtime.h"
#include "gateway/front/certs.h"
#include "gateway/front/server_private.h"
#include "gateway/modules/forward/upstream_route.h"
#include "gateway/ops/metrics.h"
#include "gateway/upstream/health.h"
#include "gateway/upstream/proxy.h"

struct gw_runtime *gw_server_runtime(struct gw_server *s)
{
    struct gw_runtime *rt;

    pthread_mutex_lock(&s->swap);
    rt = s->current;
    gw_runtime_hold(rt);
    pthread_mutex_unlock(&s->swap);
    return rt;
}

struct gw_runtime *gw_front_runtime(struct front *f)
{
    unsigned generation;

    if (f->loop == NULL)
        return gw_server_runtime(f->server);
    generation = atomic_load_explicit(&f->server->generation, memory_order_acquire);
    if (f->runtime == NULL || f->generation != generation) {
        gw_runtime_release(f->runtime);
        f->runtime = gw_server_runtime(f->server);
        f->generation = generation;
    }
    gw_runtime_hold(f->runtime);
    return f->runtime;
}

int gw_server_configure_health(struct gw_server *s, struct gw_runtime *rt)
{
    struct gw_backend_set **sets = gw_forward_backend_sets(rt);

    if (sets == NULL)
        return -1;
    gw_health_configure(s->health, rt->config, sets);
    free(sets);
    return 0;
}

static int copy_endpoint(struct config_endpoint *to, const struct config_endpoint *from)
{
    to->port = from->port;
    to->host = from->host ? strdup(from->host) : NULL;
    return from->host != NULL && to->host == NULL ? -1 : 0;
}

/* A digest of where, and as whom, the store connects (limiter.redis: address or sentinels,
 * master, passwords, db), which only a restart changes. */
static void redis_digest(const struct config *config, unsigned char out[16])
{
    crypto_generichash_state h;
    char text[64];

    crypto_generichash_init(&h, NULL, 0, 16);
    for (size_t i = 0; i < config->redis.n_sentinels + 1; i++) {
        const struct config_endpoint *e =
            i == 0 ? &config->redis.address : &config->redis.sentinels[i - 1];

        snprintf(text, sizeof text, ":%u|", e->port);
        crypto_generichash_update(&h, (const unsigned char *)(e->host ? e->host : ""),
                                  strlen(e->host ? e->host : "") + 1);
        crypto_generichash_update(&h, (const unsigned char *)text, strlen(text));
    }
    snprintf(text, sizeof text, "db %u", config->redis.db);
    crypto_generichash_update(&h, (const unsigned char *)text, strlen(text) + 1);
    for (int i = 0; i < 3; i++) {
        const char *v = i == 0   ? config->redis.master
                        : i == 1 ? config->redis.password
                                 : config->redis.sentinel_password;

        crypto_generichash_update(&h, (const unsigned char *)(v ? v : ""), strlen(v ? v : "") + 1);
    }
    crypto_generichash_final(&h, out, 16);
}

int gw_fixed_settings_init(struct fixed_settings *fixed, const struct config *config)
{
    const struct config_cidrs *from = &config->server.proxy_protocol_from;

    fixed->mode = config->server.mode;
    fixed->workers = config->server.workers;
    fixed->max_connections = config->server.max_connections;
    fixed->max_header_size = (uint32_t)config->server.max_header_size;
    fixed->max_response_header_size = (uint32_t)config->server.max_response_header_size;
    fixed->max_connections_per_ip = config->server.max_connections_per_ip;
    fixed->client_timeout_ns = config->server.client_timeout_ns;
    fixed->watch_config = config->server.watch_config;
    fixed->proxy_protocol = config->server.proxy_protocol;
    fixed->proxy_protocol_from = *from;
    fixed->proxy_protocol_from.items = malloc((from->n + 1) * sizeof *from->items);
    if (fixed->proxy_protocol_from.items != NULL && from->n > 0)
        memcpy(fixed->proxy_protocol_from.items, from->items, from->n * sizeof *from->items);
    fixed->tls = config->server.tls.on;
    if (fixed->proxy_protocol_from.items == NULL ||
        copy_endpoint(&fixed->listen, &config->server.listen) != 0 ||
        copy_endpoint(&fixed->admin_listen, &config->server.admin_listen) != 0)
        return -1;
    redis_digest(config, fixed->redis);
    return 0;
}

void gw_fixed_settings_free(struct fixed_settings *fixed)
{
    free(fixed->tls_priorities);
    free(fixed->listen.host);
    free(fixed->admin_listen.host);
    free(fixed->proxy_protocol_from.items);
}

static bool same_endpoint(const struct config_endpoint *a, const struct config_endpoint *b)
{
    if (a->host == NULL || b->host == NULL)
        return a->host == b->host;
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* Says which changed settings wait for a restart; the running values stay. */
static void warn_restart_needed(const struct fixed_settings *fixed, const struct config *next)
{
    unsigned char redis[16];

    if (!same_endpoint(&fixed->listen, &next->server.listen))
        gw_warn("reload: server.listen changed; it takes effect on restart (still listening on "
                "%s:%u)",
                fixed->listen.host, fixed->listen.port);
    if (!same_endpoint(&fixed->admin_listen, &next->server.admin_listen))
        gw_warn("reload: server.admin_listen changed; it takes effect on restart");
    if (fixed->max_connections != next->server.max_connections ||
        fixed->max_connections_per_ip != next->server.max_connections_per_ip)
        gw_warn("reload: server.max_connections(_per_ip) changed; it takes effect on restart");
    if (fixed->client_timeout_ns != next->server.client_timeout_ns)
        gw_warn("reload: server.client_timeout changed; it takes effect on restart");
    if (fixed->max_header_size != next->server.max_header_size ||
        fixed->max_response_header_size != next->server.max_response_header_size)
        gw_warn("reload: server.max_(response_)header_size changed; it takes effect on restart");
    redis_digest(next, redis);
    if (sodium_memcmp(redis, fixed->redis, sizeof redis) != 0)
        gw_warn("reload: limiter.redis changed; it takes effect on restart");
    if (fixed->watch_config != next->server.watch_config)
        gw_warn("reload: server.watch_config changed; it takes effect on restart");
    if (fixed->mode != next->server.mode ||
        (fixed->mode == CONFIG_MODE_EVENT && fixed->workers != next->server.workers))
        gw_warn("reload: server.mode or server.workers changed; it takes effect on restart");
    if (fixed->proxy_protocol != next->server.proxy_protocol ||
        fixed->proxy_protocol_from.n != next->server.proxy_protocol_from.n ||
        (fixed->proxy_protocol_from.n > 0 &&
         memcmp(fixed->proxy_protocol_from.items, next->server.proxy_protocol_from.items,
                fixed->proxy_protocol_from.n * sizeof *fixed->proxy_protocol_from.items) != 0))
        gw_warn("reload: server.proxy_protocol(_from) changed; it takes effect on restart");
    if (fixed->tls != next->server.tls.on)
        gw_warn("reload: server.tls was %s; it takes effect on restart (the listener still "
                "speaks %s)",
                fixed->tls ? "removed" : "added", fixed->tls ? "TLS only" : "plain HTTP only");
    else if (fixed->tls && strcmp(fixed->tls_priorities, next->server.tls.priorities) != 0)
        gw_warn("reload: server.tls.min_version or ciphers changed; it takes effect on restart "
                "(certificates are replaced now)");
}

int gw_server_reload(struct gw_server *s, struct config *config, char err[GW_ERR_LEN])
{
    struct gw_runtime *next, *old;
    struct gw_certs *certs = NULL;
    char why[GW_ERR_LEN - 64];

    warn_restart_needed(&s->fixed, config);
    /* Read again even when the config names the same files: they may have been renewed. */
    if (s->fixed.tls && config->server.tls.on) {
        certs = gw_certs_load(&config->server.tls, why, sizeof why);
        if (certs == NULL) {
            snprintf(err, GW_ERR_LEN, "server.tls: %s (the certificates in use stay)", why);
            config_free(config);
            gw_metrics_count_reload(s->metrics, false);
            return -1;
        }
    }
    /* The head limits size each connection's memory: the running ones stay in force. */
    config->server.max_header_size = s->fixed.max_header_size;
    config->server.max_response_header_size = s->fixed.max_response_header_size;
    pthread_mutex_lock(&s->swap);
    old = s->current;
    pthread_mutex_unlock(&s->swap);
    /* Only the reloading thread swaps, so `old` stays current while the next is built. */
    next = gw_runtime_build(config, old, s->metrics, s->backends, s->store, err, GW_ERR_LEN);
    if (next == NULL) {
        gw_metrics_count_reload(s->metrics, false);
        gw_certs_release(certs);
        return -1;
    }
    if (certs != NULL)
        gw_certs_use(certs);
    if (gw_server_configure_health(s, next) != 0)
        gw_warn("reload: out of memory for the health checks; the last ones go on");
    gw_proxy_configure(next->config->server.upstream_idle_timeout_ns,
                       next->config->server.upstream_max_idle);
    atomic_store(&s->park_idle_after_ns, next->config->server.park_idle_after_ns);
    pthread_mutex_lock(&s->swap);
    s->current = next;
    atomic_fetch_add_explicit(&s->generation, 1, memory_order_release);
    pthread_mutex_unlock(&s->swap);
    /* Counted once in force: a request that follows the count is served by the new config. */
    gw_metrics_count_reload(s->metrics, true);
    gw_runtime_release(old); /* freed once its last request ends */
    return 0;
}

void gw_server_reload_failed(struct gw_server *s)
{
    gw_metrics_count_reload(s->metrics, false);
}
