/* Forwarding with libcurl's multi interface, pulled by the client side; design in proxy.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <curl/curl.h>

#include "limiter.h"
#include "proxy.h"

#define BODY_BUFFER    (64 * 1024)
#define HEAD_MAX       (64 * 1024) /* response heads beyond this are refused */
#define POLL_SLICE_MS  200         /* longest single wait, so an abort is seen promptly */
#define IDLE_HANDLES   1024        /* pooled handles, each with its idle connections */

struct gw_upstream {
    CURL *easy;
    CURLM *multi;
    bool attached; /* easy is in multi */
    bool done;
    CURLcode result;

    long status;
    bool head_done;
    char *head; /* "name\0value\0" pairs of the final response head */
    size_t head_len, head_cap;

    char *body; /* BODY_BUFFER bytes, allocated at the first body byte and not zeroed, so that
                   memory is touched only as far as answers reach */
    size_t body_len, body_off;
    bool paused;
    int64_t timeout_ns;
};

/* Idle handles, each with the upstream connections it keeps open. */
static struct {
    pthread_mutex_t lock;
    struct gw_upstream *idle[IDLE_HANDLES];
    size_t n_idle;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};
static atomic_bool aborting;

int gw_proxy_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static void upstream_free(struct gw_upstream *u)
{
    gw_upstream_finish(u);
    curl_multi_cleanup(u->multi);
    curl_easy_cleanup(u->easy);
    free(u->head);
    free(u->body);
    free(u);
}

void gw_proxy_cleanup(void)
{
    pthread_mutex_lock(&pool.lock);
    while (pool.n_idle > 0)
        upstream_free(pool.idle[--pool.n_idle]);
    pthread_mutex_unlock(&pool.lock);
    curl_global_cleanup();
}

void gw_proxy_abort_all(void)
{
    atomic_store(&aborting, true);
}

struct gw_upstream *gw_upstream_acquire(void)
{
    struct gw_upstream *u = NULL;

    pthread_mutex_lock(&pool.lock);
    if (pool.n_idle > 0)
        u = pool.idle[--pool.n_idle];
    pthread_mutex_unlock(&pool.lock);
    if (u != NULL)
        return u;

    u = calloc(1, sizeof *u);
    if (u == NULL)
        return NULL;
    u->easy = curl_easy_init();
    u->multi = curl_multi_init();
    if (u->easy == NULL || u->multi == NULL) {
        upstream_free(u);
        return NULL;
    }
    return u;
}

void gw_upstream_release(struct gw_upstream *u)
{
    if (u == NULL)
        return;
    gw_upstream_finish(u);
    pthread_mutex_lock(&pool.lock);
    if (pool.n_idle < IDLE_HANDLES && !atomic_load(&aborting)) {
        pool.idle[pool.n_idle++] = u;
        u = NULL;
    }
    pthread_mutex_unlock(&pool.lock);
    if (u != NULL)
        upstream_free(u);
}

/* Keeps one header line of the response head; a new status line starts the head afresh, so
 * only the final response's fields remain after any 100 Continue. */
static size_t on_header(char *line, size_t size, size_t n, void *cls)
{
    struct gw_upstream *u = cls;
    size_t len = size * n, name_len;
    const char *colon;

    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        u->head_len = 0;
        curl_easy_getinfo(u->easy, CURLINFO_RESPONSE_CODE, &u->status);
        return len;
    }
    if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        u->head_done = u->status >= 200;
        return len;
    }
    colon = memchr(line, ':', len);
    if (colon == NULL || colon == line || line[0] == ' ' || line[0] == '\t')
        return len; /* not a field (or obsolete folding): dropped */
    name_len = (size_t)(colon - line);
    while (len > name_len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
        len--;
    if (u->head_len + len + 2 > HEAD_MAX)
        return 0; /* fails the transfer: a head this large is not an answer we pass on */
    if (u->head_len + len + 2 > u->head_cap) {
        size_t cap = u->head_cap ? 2 * u->head_cap : 4096;
        char *head;

        while (cap < u->head_len + len + 2)
            cap *= 2;
        head = realloc(u->head, cap);
        if (head == NULL)
            return 0;
        u->head = head;
        u->head_cap = cap;
    }
    memcpy(u->head + u->head_len, line, name_len);
    u->head[u->head_len + name_len] = '\0';
    u->head_len += name_len + 1;
    colon++;
    while (colon < line + len && (*colon == ' ' || *colon == '\t'))
        colon++;
    memcpy(u->head + u->head_len, colon, (size_t)(line + len - colon));
    u->head_len += (size_t)(line + len - colon);
    u->head[u->head_len++] = '\0';
    return size * n;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    struct gw_upstream *u = cls;
    size_t len = size * n;

    if (u->body == NULL && (u->body = malloc(BODY_BUFFER)) == NULL)
        return 0; /* fails the transfer */
    if (u->body_off == u->body_len)
        u->body_off = u->body_len = 0;
    if (len > BODY_BUFFER - u->body_len) {
        u->paused = true; /* curl hands the same bytes again once unpaused */
        return CURL_WRITEFUNC_PAUSE;
    }
    memcpy(u->body + u->body_len, data, len);
    u->body_len += len;
    return len;
}

static bool head_ready(const struct gw_upstream *u)
{
    return u->head_done;
}

static bool body_ready(const struct gw_upstream *u)
{
    return u->body_off < u->body_len;
}

/* Runs the transfer until `ready` holds, it ends, or `deadline` passes. Returns 0, or -1 on
 * the deadline or an abort. */
static int drive(struct gw_upstream *u, bool (*ready)(const struct gw_upstream *),
                 int64_t deadline)
{
    while (!ready(u) && !u->done) {
        int running, queued;
        CURLMsg *msg;
        int64_t left_ms;

        curl_multi_perform(u->multi, &running);
        while ((msg = curl_multi_info_read(u->multi, &queued)) != NULL)
            if (msg->msg == CURLMSG_DONE) {
                u->done = true;
                u->result = msg->data.result;
            }
        if (ready(u) || u->done)
            break;
        left_ms = (deadline - limiter_now_ns() + 999999) / 1000000; /* never wake before the deadline */
        if (left_ms <= 0 || atomic_load(&aborting))
            return -1;
        curl_multi_poll(u->multi, NULL, 0, left_ms < POLL_SLICE_MS ? (int)left_ms : POLL_SLICE_MS,
                        NULL);
    }
    return 0;
}

static void set_request_options(struct gw_upstream *u, const struct gw_forward *fw)
{
    CURL *e = u->easy;

    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, fw->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* the path goes out byte for byte */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, fw->headers);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(fw->connect_timeout_ns / 1000000));
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, fw->tls_verify ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, fw->tls_verify ? 2L : 0L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, u);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, u);
    if (strcmp(fw->method, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    else if (strcmp(fw->method, "GET") != 0 || fw->body != NULL)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, fw->method);
    if (fw->body != NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, fw->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)fw->body_len);
    }
}

static enum gw_upstream_error classify(CURLcode result)
{
    switch (result) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT: /* only the connect timeout is curl's own */
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
        return GW_UPSTREAM_CONNECT;
    default:
        return GW_UPSTREAM_OTHER;
    }
}

enum gw_upstream_error gw_upstream_start(struct gw_upstream *u, const struct gw_forward *fw)
{
    enum gw_upstream_error error = GW_UPSTREAM_OK;

    gw_upstream_finish(u);
    set_request_options(u, fw);
    u->timeout_ns = fw->timeout_ns;
    if (curl_multi_add_handle(u->multi, u->easy) != CURLM_OK)
        return GW_UPSTREAM_OTHER;
    u->attached = true;

    if (drive(u, head_ready, limiter_now_ns() + fw->timeout_ns) != 0)
        error = GW_UPSTREAM_TIMEOUT;
    else if (!u->head_done)
        error = u->result == CURLE_OK ? GW_UPSTREAM_OTHER : classify(u->result);
    if (error != GW_UPSTREAM_OK)
        gw_upstream_finish(u);
    return error;
}

long gw_upstream_status(const struct gw_upstream *u)
{
    return u->status;
}

int64_t gw_upstream_content_length(const struct gw_upstream *u)
{
    curl_off_t length = -1;

    if (curl_easy_getinfo(u->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) != CURLE_OK)
        return -1;
    return length;
}

bool gw_upstream_next_header(const struct gw_upstream *u, size_t *cursor, const char **name,
                             const char **value)
{
    if (*cursor >= u->head_len)
        return false;
    *name = u->head + *cursor;
    *cursor += strlen(*name) + 1;
    *value = u->head + *cursor;
    *cursor += strlen(*value) + 1;
    return true;
}

bool gw_upstream_whole_body(const struct gw_upstream *u, const char **body, size_t *len)
{
    if (!u->done || u->result != CURLE_OK || u->paused)
        return false;
    *body = u->body + u->body_off;
    *len = u->body_len - u->body_off;
    return true;
}

ssize_t gw_upstream_read(struct gw_upstream *u, char *buf, size_t max)
{
    size_t n;

    if (!body_ready(u) && u->paused) {
        u->paused = false;
        u->body_off = u->body_len = 0;
        curl_easy_pause(u->easy, CURLPAUSE_CONT); /* may deliver into the buffer at once */
    }
    if (!body_ready(u) && drive(u, body_ready, limiter_now_ns() + u->timeout_ns) != 0)
        return -1;
    if (!body_ready(u))
        return u->result == CURLE_OK ? 0 : -1;
    n = u->body_len - u->body_off;
    if (n > max)
        n = max;
    memcpy(buf, u->body + u->body_off, n);
    u->body_off += n;
    return (ssize_t)n;
}

void gw_upstream_finish(struct gw_upstream *u)
{
    if (u->attached)
        curl_multi_remove_handle(u->multi, u->easy);
    u->attached = false;
    u->done = false;
    u->result = CURLE_OK;
    u->status = 0;
    u->head_done = false;
    u->head_len = 0;
    u->body_len = u->body_off = 0;
    u->paused = false;
}
