#include "gateway/upstream/health.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/log.h"
#include "gateway/upstream/fetch.h"
#include "gateway/upstream/proxy.h"
#include "limiter/limiter.h"

#define TICK_MS 100

/* One server's checks. */
struct target {
    struct gw_backend *backend; /* outlives every config (backends.h) */
    char *url, *proxy;
    bool tls_verify;
    int64_t interval_ns, timeout_ns;
    uint32_t healthy, unhealthy;
    unsigned *expect;
    size_t n_expect;
    CURL *easy;
    bool running;
    int64_t due_ns;
    uint32_t passes, fails; /* in a row */
    char error_text[CURL_ERROR_SIZE];
};

struct targets {
    struct target *items;
    size_t n;
    struct gw_backend **unchecked; /* servers of routes without checks: marked healthy */
    size_t n_unchecked;
};

struct gw_health {
    pthread_t thread;
    pthread_mutex_t lock; /* `next` and `stop` */
    struct targets next;  /* handed over by gw_health_configure(), taken by the thread */
    bool has_next, stop;
    CURLM *multi;
    struct targets current; /* the thread's own */
};

static void targets_free(struct targets *t, CURLM *multi)
{
    for (size_t i = 0; i < t->n; i++) {
        struct target *x = &t->items[i];

        if (x->easy != NULL) {
            if (x->running)
                curl_multi_remove_handle(multi, x->easy);
            curl_easy_cleanup(x->easy);
        }
        free(x->url);
        free(x->proxy);
        free(x->expect);
    }
    free(t->items);
    free(t->unchecked);
    *t = (struct targets){0};
}

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

static void start_check(struct gw_health *h, struct target *x, int64_t now_ns)
{
    x->due_ns = now_ns + x->interval_ns;
    if (x->easy == NULL && (x->easy = curl_easy_init()) == NULL)
        return;
    x->error_text[0] = '\0';
    curl_easy_setopt(x->easy, CURLOPT_URL, x->url);
    curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
    gw_upstream_set_proxy(x->easy, x->proxy);
    curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)(x->timeout_ns / 1000000));
    curl_easy_setopt(x->easy, CURLOPT_SSL_VERIFYPEER, x->tls_verify ? 1L : 0L);
    curl_easy_setopt(x->easy, CURLOPT_SSL_VERIFYHOST, x->tls_verify ? 2L : 0L);
    curl_easy_setopt(x->easy, CURLOPT_USERAGENT, "sluice-health-check");
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->error_text);
    curl_easy_setopt(x->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(x->easy, CURLOPT_QUICK_EXIT, 1L); /* a reload never waits on a resolve */
    if (curl_multi_add_handle(h->multi, x->easy) == CURLM_OK)
        x->running = true;
}

/* A check's result: counts it, and flips the server when the count in a row says so. */
static void conclude(struct target *x, CURLcode result)
{
    long status = 0;
    bool pass = false;
    char why[CURL_ERROR_SIZE + 32];

    if (result == CURLE_OK) {
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        for (size_t i = 0; i < x->n_expect; i++)
            pass |= status == (long)x->expect[i];
        snprintf(why, sizeof why, "status %ld", status);
    } else {
        snprintf(why, sizeof why, "%s",
                 x->error_text[0] ? x->error_text : curl_easy_strerror(result));
    }
    x->passes = pass ? x->passes + 1 : 0;
    x->fails = pass ? 0 : x->fails + 1;
    if (pass && x->passes == x->healthy && !atomic_load(&x->backend->healthy)) {
        atomic_store(&x->backend->healthy, true);
        gw_info("%s %s: server %s is healthy again: %u checks passed (%s)",
                gw_backend_owner_kind(x->backend), x->backend->owner, x->backend->url, x->passes,
                why);
    } else if (!pass && x->fails == x->unhealthy && atomic_load(&x->backend->healthy)) {
        atomic_store(&x->backend->healthy, false);
        gw_warn("%s %s: server %s is unhealthy: %u checks failed, the last: %s",
                gw_backend_owner_kind(x->backend), x->backend->owner, x->backend->url, x->fails,
                why);
    }
}

/* Takes a configuration handed over, dropping the checks under way. */
static void take_next(struct gw_health *h)
{
    pthread_mutex_lock(&h->lock);
    if (h->has_next) {
        targets_free(&h->current, h->multi);
        h->current = h->next;
        h->next = (struct targets){0};
        h->has_next = false;
        /* Only now that no old check can still conclude: one could mark them down again. */
        for (size_t i = 0; i < h->current.n_unchecked; i++)
            atomic_store(&h->current.unchecked[i]->healthy, true);
    }
    pthread_mutex_unlock(&h->lock);
}

static bool stopping(struct gw_health *h)
{
    bool stop;

    pthread_mutex_lock(&h->lock);
    stop = h->stop;
    pthread_mutex_unlock(&h->lock);
    return stop;
}

static void *run(void *arg)
{
    struct gw_health *h = arg;

    while (!stopping(h)) {
        int64_t now = limiter_now_ns();
        int running, queued;
        CURLMsg *msg;

        take_next(h);
        for (size_t i = 0; i < h->current.n; i++)
            if (!h->current.items[i].running && now >= h->current.items[i].due_ns)
                start_check(h, &h->current.items[i], now);
        curl_multi_perform(h->multi, &running);
        while ((msg = curl_multi_info_read(h->multi, &queued)) != NULL) {
            struct target *x = NULL;

            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            curl_multi_remove_handle(h->multi, msg->easy_handle);
            x->running = false;
            conclude(x, msg->data.result);
        }
        curl_multi_poll(h->multi, NULL, 0, TICK_MS, NULL);
    }
    return NULL;
}

struct gw_health *gw_health_start(void)
{
    struct gw_health *h = calloc(1, sizeof *h);

    if (h == NULL || (h->multi = curl_multi_init()) == NULL) {
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    if (pthread_create(&h->thread, NULL, run, h) != 0) {
        curl_multi_cleanup(h->multi);
        pthread_mutex_destroy(&h->lock);
        free(h);
        return NULL;
    }
    return h;
}

static char *join(const char *a, const char *b)
{
    size_t len = strlen(a) + strlen(b) + 1;
    char *s = malloc(len);

    if (s != NULL)
        snprintf(s, len, "%s%s", a, b);
    return s;
}

/* The target for server `k` of `route`'s upstream; false when memory is short. */
static bool make_target(struct target *x, const struct config_route *route, size_t k,
                        struct gw_backend *backend)
{
    const struct config_upstream *up = &route->upstream;

    *x = (struct target){
        .backend = backend,
        .tls_verify = route->tls_verify,
        .interval_ns = up->health_check.interval_ns,
        .timeout_ns = up->health_check.timeout_ns,
        .healthy = up->health_check.healthy,
        .unhealthy = up->health_check.unhealthy,
        .n_expect = up->health_check.n_expect_status,
    };
    x->url = join(up->servers[k].origin, up->health_check.path);
    x->proxy = route->proxy != NULL ? strdup(route->proxy) : NULL;
    x->expect = malloc(up->health_check.n_expect_status * sizeof *x->expect);
    if (x->expect != NULL)
        memcpy(x->expect, up->health_check.expect_status,
               up->health_check.n_expect_status * sizeof *x->expect);
    return x->url != NULL && x->expect != NULL && (route->proxy == NULL || x->proxy != NULL);
}

/* Whether the servers of route `i` are checked: its upstream has checks, and the route is the
 * one that shows it (a shared upstream's servers are checked once, under its first route). */
static bool checked(const struct config *config, size_t i, bool enabled)
{
    return config_route_owns_upstream(config, i) &&
           config->routes[i].upstream.health_check.enabled == enabled;
}

void gw_health_configure(struct gw_health *h, const struct config *config,
                         struct gw_backend_set *const *sets)
{
    struct targets next = {0};
    size_t n = 0, unchecked = 0;

    for (size_t i = 0; i < config->n_routes; i++) {
        n += checked(config, i, true) ? sets[i]->n : 0;
        unchecked += checked(config, i, false) ? sets[i]->n : 0;
    }
    next.items = calloc(n > 0 ? n : 1, sizeof *next.items);
    next.unchecked = calloc(unchecked > 0 ? unchecked : 1, sizeof *next.unchecked);
    for (size_t i = 0; next.unchecked != NULL && i < config->n_routes; i++)
        for (size_t k = 0; checked(config, i, false) && k < sets[i]->n; k++)
            next.unchecked[next.n_unchecked++] = sets[i]->servers[k];
    if (next.items == NULL || next.unchecked == NULL) {
        targets_free(&next, NULL);
        gw_warn("health checks: out of memory; the checks of the last configuration go on");
        return;
    }
    for (size_t i = 0; i < config->n_routes; i++)
        for (size_t k = 0; checked(config, i, true) && k < sets[i]->n; k++)
            if (!make_target(&next.items[next.n++], &config->routes[i], k, sets[i]->servers[k])) {
                targets_free(&next, NULL);
                gw_warn("health checks: out of memory; the checks of the last configuration "
                        "go on");
                return;
            }
    pthread_mutex_lock(&h->lock);
    targets_free(&h->next, NULL);
    h->next = next;
    h->has_next = true;
    pthread_mutex_unlock(&h->lock);
    curl_multi_wakeup(h->multi);
}

void gw_health_stop(struct gw_health *h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->lock);
    h->stop = true;
    pthread_mutex_unlock(&h->lock);
    curl_multi_wakeup(h->multi);
    pthread_join(h->thread, NULL);
    targets_free(&h->current, h->multi);
    targets_free(&h->next, NULL);
    curl_multi_cleanup(h->multi);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

int gw_health_probe(const char *url, long timeout_ms, const char **why)
{
    struct gw_fetch_answer answer = {0};

    if (gw_fetch(&(struct gw_fetch_ask){"GET", url, NULL, timeout_ms}, &answer, why) != 0)
        return -1;
    if (answer.status < 200 || answer.status > 299) {
        *why = "not a 2xx answer";
        return -1;
    }
    return 0;
}
