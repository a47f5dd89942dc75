/* What one loaded configuration runs on; design in runtime.h. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/core/pipeline.h"
#include "gateway/core/runtime.h"

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
    for (size_t i = 0; rt->routes != NULL && i < rt->config->n_routes; i++)
        gw_pipeline_route_close(rt, i);
    free(rt->routes);
    gw_consumers_free(rt->consumers);
    if (rt->access_log_fd > STDERR_FILENO)
        close(rt->access_log_fd);
    config_free(rt->config);
    free(rt);
}

static int build(struct gw_runtime *rt, const struct gw_runtime *previous, char *err,
                 size_t err_len)
{
    struct config *config = rt->config;

    rt->routes = calloc(config->n_routes, sizeof *rt->routes);
    if (rt->routes == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < config->n_routes; i++) {
        rt->routes[i].metrics = gw_metrics_route(rt->metrics, config->routes[i].name);
        if (rt->routes[i].metrics == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        if (gw_pipeline_route_open(rt, i, previous, err, err_len) != 0)
            return -1;
    }
    rt->consumers = config->n_consumers > 0 ? gw_consumers_build(config) : NULL;
    if (config->n_consumers > 0 && rt->consumers == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    rt->access_log_fd = open_access_log(config->server.access_log);
    if (rt->access_log_fd < 0 && strcmp(config->server.access_log, "off") != 0) {
        snprintf(err, err_len, "cannot open access_log %.200s", config->server.access_log);
        return -1;
    }
    return 0;
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
    rt->backends = backends;
    rt->access_log_fd = -1;
    if (build(rt, previous, err, err_len) != 0) {
        runtime_free(rt);
        return NULL;
    }
    return rt;
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

void gw_runtime_gauges(void *runtime, FILE *out)
{
    gw_pipeline_gauges(runtime, out);
}
