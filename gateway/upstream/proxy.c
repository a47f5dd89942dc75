/* Forwarding with libcurl's multi interface, pulled by the client side; design in proxy.h. */
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/upstream/proxy.h"
#include "limiter/limiter.h"

#define BODY_BUFFER    (64 * 1024)
#define POLL_SLICE_MS  200 /* longest single wait, so an abort is seen promptly */
/* A handle keeps one upstream connection (CURLMOPT_MAXCONNECTS 1); while a dead one is being
 * replaced, two are open for a moment. */
#define TRACKED_SOCKETS 4

struct upstream_pool;
struct pool_set;
struct watch;

struct gw_upstream {
    CURL *easy;
    CURLM *multi;
    struct upstream_pool *pool; /* where it goes back to */
    struct gw_upstream_loop *loop;   /* the event loop it runs on, or NULL: it blocks */
    struct gw_upstream *prev, *next; /* in its loop's list of running exchanges */
    gw_upstream_notify *notify;      /* told of each step, on a loop */
    void *notify_cls;
    unsigned progress, told;  /* steps taken (head, body bytes, end), and those told of */
    int64_t timer_ns;         /* when libcurl wants to be called on a loop; -1: never */
    int64_t wait_deadline_ns; /* when a wait for the head or more body gives up; 0: none */
    bool timed_out, running;
    int64_t idle_since_ns;      /* when it went back, for pruning */
    curl_socket_t sockets[TRACKED_SOCKETS]; /* the connections it holds open */
    struct watch *watches[TRACKED_SOCKETS]; /* on a loop: where each is watched, or NULL */
    size_t n_sockets;
    bool stale;    /* on a loop: a connection it holds was readable while no request was out */
    bool attached; /* easy is in multi */
    bool done;
    CURLcode result;
    unsigned sends, max_sends; /* requests sent in this exchange, and how many may be */
    struct gw_body *request_body; /* the exchange's (gw_forward), or NULL */
    bool send_paused;             /* libcurl waits for more of it */

    enum gw_fault fault;              /* the last exchange's, until the next starts */
    char error_text[CURL_ERROR_SIZE]; /* libcurl's words for it (CURLOPT_ERRORBUFFER) */

    long status;
    bool head_done, head_too_large;
    char *head; /* "name\0value\0" pairs of the final response head */
    size_t head_len, head_cap;
    size_t head_wire; /* the final response head's size as sent on */

    char *body; /* BODY_BUFFER bytes, allocated at the first body byte and not zeroed, so that
                   memory is touched only as far as answers reach */
    size_t body_len, body_off;
    bool paused;
    int64_t timeout_ns;
    uint64_t max_head;
};

/* The idle handles for one origin (scheme://host:port, with the forward proxy if any), least
 * recently used first. */
struct upstream_pool {
    char *origin;
    struct gw_upstream **idle;
    size_t n_idle, cap;
    struct upstream_pool *next;
};

/* The pools of handles that block (thread_per_connection), or of one event loop's. */
struct pool_set {
    pthread_mutex_t lock; /* held for a push, a pop or a prune */
    struct upstream_pool *pools;
};

/* Where one of a loop's upstream sockets is watched: the tag its epoll events carry, from the
 * socket's first use to its close. Between exchanges the socket stays in the epoll set, for
 * input, so that a stray answer or a close marks the handle stale as it comes, without a
 * poll() before each request. Tags are kept for the
 * loop's life and reused, so an event already fetched for a socket that has since gone finds
 * a tag with no owner, never freed memory. */
struct watch {
    struct gw_upstream *owner; /* NULL while unused */
    curl_socket_t fd;
    uint32_t events; /* what the epoll set has for it; 0: not in it */
    bool wanted;     /* libcurl is waiting on it for a transfer */
    bool foreign;    /* not one of the handle's connections (libcurl's resolver's, say) */
    struct watch *next_free;
};

#define WATCH_BLOCK 64

struct watch_block {
    struct watch watches[WATCH_BLOCK];
    struct watch_block *next;
};

struct gw_upstream_loop {
    int epoll_fd;
    struct pool_set pools;
    struct gw_upstream *running; /* exchanges in progress, for their timers */
    struct watch *free_watches;
    struct watch_block *blocks;
    bool told;           /* an exchange's notify was called since gw_upstream_loop_told() */
    int64_t earliest_ns; /* no running exchange has a timer or deadline before this */
};

static struct pool_set shared_pools = {.lock = PTHREAD_MUTEX_INITIALIZER};

void gw_upstream_set_proxy(void *easy, const char *proxy)
{
    /* "" ignores http_proxy, HTTPS_PROXY and ALL_PROXY: upstream requests carry credentials,
     * and only a route's own `proxy:` may send them elsewhere. NOPROXY "" exempts no host
     * from it, whatever no_proxy or NO_PROXY say (and libcurl does not read them per
     * transfer). */
    curl_easy_setopt(easy, CURLOPT_PROXY, proxy != NULL ? proxy : "");
    curl_easy_setopt(easy, CURLOPT_NOPROXY, "");
}

struct curl_slist *gw_upstream_header_list(const char *text, size_t n_lines)
{
    /* One allocation rather than curl_slist_append()'s two per line: a request's list is
     * built, sent once and freed. */
    struct curl_slist *nodes = malloc(n_lines * sizeof *nodes);
    const char *at = text;

    if (nodes == NULL)
        return NULL;
    for (size_t i = 0; i < n_lines; i++) {
        nodes[i].data = (char *)at;
        nodes[i].next = i + 1 < n_lines ? &nodes[i + 1] : NULL;
        at += strlen(at) + 1;
    }
    return nodes;
}

static void set_handle_options(struct gw_upstream *u);
static atomic_bool aborting;
static _Atomic int64_t idle_timeout_ns = 60 * (int64_t)1000000000;
static atomic_uint max_idle = 64;
/* How long a handle beyond max_idle stays before a prune closes it: long enough that one
 * given back in a burst of answers is taken again by the requests that follow. */
#define EXCESS_AFTER_NS (250 * 1000000LL)

int gw_proxy_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void gw_proxy_configure(int64_t idle_timeout, unsigned idle_max)
{
    atomic_store(&idle_timeout_ns, idle_timeout);
    atomic_store(&max_idle, idle_max);
}

static void upstream_free(struct gw_upstream *u)
{
    gw_upstream_finish(u);
    /* Its idle connection closes with the multi handle. */
    curl_multi_cleanup(u->multi);
    curl_easy_cleanup(u->easy);
    free(u->head);
    free(u->body);
    free(u);
}

static void free_pools(struct pool_set *set)
{
    pthread_mutex_lock(&set->lock);
    while (set->pools != NULL) {
        struct upstream_pool *pool = set->pools;

        set->pools = pool->next;
        while (pool->n_idle > 0)
            upstream_free(pool->idle[--pool->n_idle]);
        free(pool->idle);
        free(pool->origin);
        free(pool);
    }
    pthread_mutex_unlock(&set->lock);
}

void gw_proxy_cleanup(void)
{
    free_pools(&shared_pools);
    curl_global_cleanup();
}

void gw_proxy_abort_all(void)
{
    atomic_store(&aborting, true);
}

bool gw_proxy_aborting(void)
{
    return atomic_load(&aborting);
}

/* The pool of `origin` in `set`, made on first use; NULL when memory is short. Under the
 * set's lock. */
static struct upstream_pool *pool_of(struct pool_set *set, const char *origin)
{
    struct upstream_pool *pool;

    for (pool = set->pools; pool != NULL; pool = pool->next)
        if (strcmp(pool->origin, origin) == 0)
            return pool;
    pool = calloc(1, sizeof *pool);
    if (pool == NULL || (pool->origin = strdup(origin)) == NULL) {
        free(pool);
        return NULL;
    }
    pool->next = set->pools;
    set->pools = pool;
    return pool;
}

static void drop_watch(struct gw_upstream *u, struct watch *w);
static void free_watch(struct gw_upstream_loop *loop, struct watch *w);

/* Stops tracking the handle's socket `i`: closed by libcurl with close_socket() (its watch
 * dropped first), or (`closed`) already closed without it, when its number, perhaps another
 * thread's by now, is not touched (the kernel took it out of a loop's epoll set). */
static void untrack_socket(struct gw_upstream *u, size_t i, bool closed)
{
    if (u->watches[i] != NULL && closed)
        free_watch(u->loop, u->watches[i]);
    else if (u->watches[i] != NULL)
        drop_watch(u, u->watches[i]);
    u->n_sockets--;
    u->sockets[i] = u->sockets[u->n_sockets];
    u->watches[i] = u->watches[u->n_sockets];
}

/* libcurl's sockets for this handle's connections are opened and closed here, so that
 * gw_upstream_start() can look at them before a request goes out on one. A number the kernel
 * hands out again was closed behind close_socket()'s back (gw_upstream_finish()). */
static curl_socket_t open_socket(void *cls, curlsocktype purpose, struct curl_sockaddr *address)
{
    struct gw_upstream *u = cls;
    curl_socket_t fd;

    (void)purpose;
    fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd == CURL_SOCKET_BAD)
        return fd;
    for (size_t i = 0; i < u->n_sockets; i++)
        if (u->sockets[i] == fd) {
            untrack_socket(u, i, true);
            break;
        }
    if (u->n_sockets == TRACKED_SOCKETS) {
        close(fd);
        return CURL_SOCKET_BAD;
    }
    u->sockets[u->n_sockets] = fd;
    u->watches[u->n_sockets++] = NULL; /* on a loop, on_socket() gives it one */
    return fd;
}

static int close_socket(void *cls, curl_socket_t fd)
{
    struct gw_upstream *u = cls;

    for (size_t i = 0; i < u->n_sockets; i++)
        if (u->sockets[i] == fd) {
            untrack_socket(u, i, false);
            break;
        }
    return close(fd);
}

/* --- on an event loop -------------------------------------------------------------------- */

static struct watch *take_watch(struct gw_upstream_loop *loop)
{
    struct watch *w = loop->free_watches;

    if (w == NULL) {
        struct watch_block *block = calloc(1, sizeof *block);

        if (block == NULL)
            return NULL;
        block->next = loop->blocks;
        loop->blocks = block;
        for (size_t i = 0; i < WATCH_BLOCK; i++) {
            block->watches[i].next_free = loop->free_watches;
            loop->free_watches = &block->watches[i];
        }
        w = loop->free_watches;
    }
    loop->free_watches = w->next_free;
    return w;
}

/* Puts the watch's socket in the loop's epoll set for `events` (0: takes it out), with as few
 * calls as it takes: none when that is what the set has already. */
static int watch_for(struct gw_upstream_loop *loop, struct watch *w, uint32_t events)
{
    struct epoll_event event = {.events = events, .data.ptr = w};
    int op = w->events == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;

    if (events == w->events)
        return 0;
    w->events = events;
    return epoll_ctl(loop->epoll_fd, op, w->fd, &event);
}

/* The watch's tag goes back to the loop's free ones (its socket is out of the epoll set). */
static void free_watch(struct gw_upstream_loop *loop, struct watch *w)
{
    w->owner = NULL;
    w->next_free = loop->free_watches;
    loop->free_watches = w;
}

/* The socket's watch goes with the socket (closing it). */
static void drop_watch(struct gw_upstream *u, struct watch *w)
{
    watch_for(u->loop, w, 0);
    free_watch(u->loop, w);
}

/* libcurl says which of a transfer's sockets to watch for what: they go into the loop's
 * epoll set, tagged with a watch that leads back to this handle. When libcurl is done with a
 * connection's socket that stays open, it is watched for input until the next exchange (see
 * struct watch). A socket libcurl opened itself (the threaded resolver's, which says when a
 * name is resolved) is watched while libcurl wants it, and its watch dropped after. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *cls, void *socketp)
{
    struct gw_upstream *u = cls;
    struct watch *w = socketp;
    size_t i = 0;

    (void)easy;
    while (w == NULL && i < u->n_sockets && u->sockets[i] != fd)
        i++;
    if (w == NULL && what == CURL_POLL_REMOVE)
        return 0; /* never watched */
    if (w == NULL) {
        if ((w = i < u->n_sockets ? u->watches[i] : NULL) == NULL &&
            (w = take_watch(u->loop)) == NULL)
            return -1;
        if (i < u->n_sockets && u->watches[i] == NULL) {
            *w = (struct watch){.owner = u, .fd = fd};
            u->watches[i] = w;
        } else if (i == u->n_sockets) {
            *w = (struct watch){.owner = u, .fd = fd, .foreign = true};
        }
    }
    if (w->foreign && what == CURL_POLL_REMOVE) {
        curl_multi_assign(u->multi, fd, NULL);
        drop_watch(u, w);
        return 0;
    }
    w->wanted = what != CURL_POLL_REMOVE;
    curl_multi_assign(u->multi, fd, w->wanted ? w : NULL);
    if (!w->wanted)
        return watch_for(u->loop, w, EPOLLIN);
    return watch_for(u->loop, w,
                     (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0));
}

/* Keeps the loop's earliest time no later than `at`. */
static void wake_loop_by(struct gw_upstream *u, int64_t at)
{
    if (u->loop != NULL && at >= 0 && at < u->loop->earliest_ns)
        u->loop->earliest_ns = at;
}

static int on_timer(CURLM *multi, long timeout_ms, void *cls)
{
    struct gw_upstream *u = cls;

    (void)multi;
    u->timer_ns = timeout_ms < 0 ? -1 : limiter_now_ns() + (int64_t)timeout_ms * 1000000;
    wake_loop_by(u, u->timer_ns);
    return 0;
}

static CURLM *new_multi(struct gw_upstream *u)
{
    CURLM *multi = curl_multi_init();

    if (multi == NULL)
        return NULL;
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 1L);
    if (u->loop != NULL) {
        curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, u);
        curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
        curl_multi_setopt(multi, CURLMOPT_TIMERDATA, u);
    }
    return multi;
}

struct gw_upstream_loop *gw_upstream_loop_new(int epoll_fd)
{
    struct gw_upstream_loop *loop = calloc(1, sizeof *loop);

    if (loop == NULL)
        return NULL;
    loop->epoll_fd = epoll_fd;
    loop->earliest_ns = INT64_MAX;
    pthread_mutex_init(&loop->pools.lock, NULL);
    return loop;
}

void gw_upstream_loop_free(struct gw_upstream_loop *loop)
{
    if (loop == NULL)
        return;
    free_pools(&loop->pools);
    pthread_mutex_destroy(&loop->pools.lock);
    while (loop->blocks != NULL) {
        struct watch_block *block = loop->blocks;

        loop->blocks = block->next;
        free(block);
    }
    free(loop);
}

/* Reads the transfer's end, if it came, and tells the request of any step taken. */
static void collect(struct gw_upstream *u)
{
    CURLMsg *msg;
    int queued;

    while ((msg = curl_multi_info_read(u->multi, &queued)) != NULL)
        if (msg->msg == CURLMSG_DONE) {
            u->done = true;
            u->result = msg->data.result;
            u->progress++;
        }
    if (u->progress != u->told) {
        u->told = u->progress;
        u->wait_deadline_ns = 0;
        if (u->notify != NULL) {
            u->loop->told = true;
            u->notify(u->notify_cls);
        }
    }
}

void gw_upstream_loop_event(struct gw_upstream_loop *loop, void *tag, uint32_t events)
{
    struct watch *w = tag;
    struct gw_upstream *u = w->owner; /* the watch may go during the action */
    int mask = 0, running;

    (void)loop;
    if (u == NULL)
        return; /* the socket went earlier in this batch of events */
    if (!w->wanted) {
        /* Input with no request out: a stray answer, or the upstream closed it. */
        u->stale = true;
        watch_for(u->loop, w, 0); /* once is enough */
        return;
    }
    mask |= events & EPOLLIN ? CURL_CSELECT_IN : 0;
    mask |= events & EPOLLOUT ? CURL_CSELECT_OUT : 0;
    mask |= events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0;
    curl_multi_socket_action(u->multi, w->fd, mask, &running);
    collect(u);
}

/* Ends the exchange's wait as failed (a timeout, or shutdown), and tells its request. */
static void give_up(struct gw_upstream *u)
{
    u->timed_out = true;
    u->progress++;
    collect(u);
}

int64_t gw_upstream_loop_run_timers(struct gw_upstream_loop *loop, int64_t now_ns)
{
    int64_t next = -1;
    int running;

    /* The list is walked only when something in it is due: with hundreds of exchanges
     * running, most turns of the loop are for other events. */
    if (now_ns < loop->earliest_ns)
        return loop->earliest_ns == INT64_MAX ? -1 : loop->earliest_ns;
    loop->earliest_ns = INT64_MAX; /* timers libcurl sets during the walk lower it again */
    for (struct gw_upstream *u = loop->running; u != NULL; u = u->next) {
        if (u->timer_ns >= 0 && u->timer_ns <= now_ns) {
            u->timer_ns = -1;
            curl_multi_socket_action(u->multi, CURL_SOCKET_TIMEOUT, 0, &running);
            collect(u);
        }
        if (u->wait_deadline_ns != 0 && u->wait_deadline_ns <= now_ns && !u->timed_out)
            give_up(u);
        if (u->timer_ns >= 0 && (next < 0 || u->timer_ns < next))
            next = u->timer_ns;
        if (u->wait_deadline_ns != 0 && !u->timed_out && (next < 0 || u->wait_deadline_ns < next))
            next = u->wait_deadline_ns;
    }
    if (next >= 0 && next < loop->earliest_ns)
        loop->earliest_ns = next;
    return loop->earliest_ns == INT64_MAX ? -1 : loop->earliest_ns;
}

bool gw_upstream_loop_told(struct gw_upstream_loop *loop)
{
    bool told = loop->told;

    loop->told = false;
    return told;
}

void gw_upstream_loop_abort(struct gw_upstream_loop *loop)
{
    for (struct gw_upstream *u = loop->running; u != NULL; u = u->next)
        if (!u->timed_out)
            give_up(u);
}

static void link_running(struct gw_upstream *u)
{
    struct gw_upstream_loop *loop = u->loop;

    u->running = true;
    u->prev = NULL;
    u->next = loop->running;
    if (loop->running != NULL)
        loop->running->prev = u;
    loop->running = u;
}

static void unlink_running(struct gw_upstream *u)
{
    if (!u->running)
        return;
    if (u->prev != NULL)
        u->prev->next = u->next;
    else
        u->loop->running = u->next;
    if (u->next != NULL)
        u->next->prev = u->prev;
    u->running = false;
}

struct gw_upstream *gw_upstream_acquire(struct gw_upstream_loop *loop, const char *origin)
{
    struct pool_set *set = loop != NULL ? &loop->pools : &shared_pools;
    struct gw_upstream *u = NULL;
    struct upstream_pool *pool;

    pthread_mutex_lock(&set->lock);
    pool = pool_of(set, origin);
    if (pool != NULL && pool->n_idle > 0)
        u = pool->idle[--pool->n_idle];
    pthread_mutex_unlock(&set->lock);
    if (u != NULL || pool == NULL)
        return u;

    u = calloc(1, sizeof *u);
    if (u == NULL)
        return NULL;
    u->pool = pool;
    u->loop = loop;
    u->timer_ns = -1;
    u->easy = curl_easy_init();
    u->multi = new_multi(u);
    if (u->easy == NULL || u->multi == NULL) {
        upstream_free(u);
        return NULL;
    }
    set_handle_options(u);
    return u;
}

void gw_upstream_release(struct gw_upstream *u)
{
    struct pool_set *set;
    struct upstream_pool *pool;

    if (u == NULL)
        return;
    gw_upstream_finish(u);
    set = u->loop != NULL ? &u->loop->pools : &shared_pools;
    pool = u->pool;
    u->idle_since_ns = limiter_now_ns();
    /* Kept even past upstream_max_idle: the next prune closes the excess. Closing it here
     * would close, in a busy moment, the connections the next requests then open anew. */
    pthread_mutex_lock(&set->lock);
    if (!atomic_load(&aborting)) {
        if (pool->n_idle == pool->cap) {
            size_t cap = pool->cap ? 2 * pool->cap : 16;
            struct gw_upstream **grown = realloc(pool->idle, cap * sizeof *grown);

            if (grown != NULL) {
                pool->idle = grown;
                pool->cap = cap;
            }
        }
        if (pool->n_idle < pool->cap) {
            pool->idle[pool->n_idle++] = u;
            u = NULL;
        }
    }
    pthread_mutex_unlock(&set->lock);
    if (u != NULL)
        upstream_free(u); /* its connection closes */
}

static void prune_pools(struct pool_set *set, int64_t now_ns)
{
    int64_t oldest = now_ns - atomic_load(&idle_timeout_ns), settled = now_ns - EXCESS_AFTER_NS;
    size_t keep = atomic_load(&max_idle);
    struct gw_upstream *expired[64];
    size_t n = 0;

    /* Least recently used first: the handles idle too long, and those beyond
     * upstream_max_idle that have been idle a while, are a run at the front of each pool. At most a
     * batch per call, so the lock is never held long; the caller calls again soon. */
    pthread_mutex_lock(&set->lock);
    for (struct upstream_pool *pool = set->pools; pool != NULL; pool = pool->next) {
        size_t k = 0;

        while (k < pool->n_idle && n < sizeof expired / sizeof expired[0] &&
               (pool->idle[k]->idle_since_ns < oldest ||
                (pool->n_idle - k > keep && pool->idle[k]->idle_since_ns < settled)))
            expired[n++] = pool->idle[k++];
        if (k == 0)
            continue;
        memmove(pool->idle, pool->idle + k, (pool->n_idle - k) * sizeof *pool->idle);
        pool->n_idle -= k;
    }
    pthread_mutex_unlock(&set->lock);
    while (n > 0)
        upstream_free(expired[--n]);
}

void gw_proxy_prune(int64_t now_ns)
{
    prune_pools(&shared_pools, now_ns);
}

void gw_upstream_loop_prune(struct gw_upstream_loop *loop, int64_t now_ns)
{
    prune_pools(&loop->pools, now_ns);
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
        u->head_wire = len;
        curl_easy_getinfo(u->easy, CURLINFO_RESPONSE_CODE, &u->status);
        return len;
    }
    if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        u->head_done = u->status >= 200;
        u->progress += u->head_done;
        return len;
    }
    colon = memchr(line, ':', len);
    if (colon == NULL || colon == line || line[0] == ' ' || line[0] == '\t')
        return len; /* not a field (or obsolete folding): dropped */
    name_len = (size_t)(colon - line);
    while (len > name_len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
        len--;
    u->head_wire += len + 2; /* as the client will get it: "Name: value\r\n" */
    if (u->head_wire > u->max_head) {
        u->head_too_large = true;
        return 0; /* fails the transfer: a head this large is not an answer we pass on */
    }
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
    u->progress++;
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
        int running;
        int64_t left_ms;

        curl_multi_perform(u->multi, &running);
        collect(u);
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

/* Called by libcurl right before each time it sends the request: the first time, and again
 * when it retries on a fresh connection after a reused one died. */
static int before_send(void *cls, char *ip, char *local_ip, int port, int local_port)
{
    struct gw_upstream *u = cls;

    (void)ip, (void)local_ip, (void)port, (void)local_port;
    return ++u->sends <= u->max_sends ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT;
}

/* libcurl asks for more of the request body: what the window has, or a pause until
 * gw_upstream_feed() says more came, or 0 at its end (a chunked body's last chunk goes). */
static size_t on_read(char *buf, size_t size, size_t n, void *cls)
{
    struct gw_upstream *u = cls;
    size_t got;

    if (u->request_body == NULL)
        return 0;
    got = gw_body_take(u->request_body, buf, size * n);
    if (got > 0) {
        u->progress++; /* room in the window: a client side waiting for it goes on */
        return got;
    }
    if (gw_body_done(u->request_body))
        return 0;
    u->send_paused = true;
    return CURL_READFUNC_PAUSE;
}

/* libcurl sends the request again (a reused connection died before answering): from the
 * body's start, if the window still holds it. */
static int on_seek(void *cls, curl_off_t offset, int origin)
{
    struct gw_upstream *u = cls;

    if (u->request_body == NULL || offset != 0 || origin != SEEK_SET ||
        !gw_body_rewind(u->request_body))
        return CURL_SEEKFUNC_CANTSEEK;
    return CURL_SEEKFUNC_OK;
}

/* RFC 9110 section 9.2.2: a request that may be sent twice with the effect of once. */
static bool is_idempotent(const char *method)
{
    static const char *const idempotent[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};

    for (size_t i = 0; i < sizeof idempotent / sizeof idempotent[0]; i++)
        if (strcmp(method, idempotent[i]) == 0)
            return true;
    return false;
}

/* What every exchange of a handle shares, set once when the handle is made. */
static void set_handle_options(struct gw_upstream *u)
{
    CURL *e = u->easy;

    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, u);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, u);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, before_send);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, u);
    /* A proxy's answer to CONNECT is no part of the upstream's head. */
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* the path goes out byte for byte */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, u);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, u);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, u);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, u);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, u->error_text);
    /* A transfer dropped while its name is resolved leaves the resolver thread behind rather
     * than waiting for it (which would hold up a loop, or a client's thread). */
    curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
}

/* What differs from one exchange to the next; every such option is set each time, so nothing
 * of the last request's carries over (curl_easy_reset() would redo the above as well). */
static void set_request_options(struct gw_upstream *u, const struct gw_forward *fw)
{
    CURL *e = u->easy;

    /* libcurl resends a request whose reused connection died before any answer; the upstream
     * may have acted on it. Idempotent requests may go twice, others once (502 otherwise). */
    u->sends = 0;
    u->max_sends = is_idempotent(fw->method) ? 2 : 1;
    gw_upstream_set_proxy(e, fw->proxy);
    /* gw_proxy_prune() closes idle connections; this stops their reuse meanwhile. */
    curl_easy_setopt(e, CURLOPT_MAXAGE_CONN,
                     (long)(atomic_load(&idle_timeout_ns) / 1000000000));
    curl_easy_setopt(e, CURLOPT_URL, fw->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, fw->headers);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(fw->connect_timeout_ns / 1000000));
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, fw->tls_verify ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, fw->tls_verify ? 2L : 0L);
    /* The method: back to a plain GET first, then what this request needs. */
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_NOBODY, strcmp(fw->method, "HEAD") == 0 ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST,
                     strcmp(fw->method, "HEAD") != 0 &&
                             (strcmp(fw->method, "GET") != 0 || fw->body != NULL)
                         ? fw->method
                         : NULL);
    if (fw->body != NULL) {
        /* Read through on_read(); with no length libcurl sends the body chunked. */
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)fw->body->length);
    }
}

#define OTHER_DETAIL "the upstream's answer could not be read (other)"

/* Each fault's name, and what a client answered for it is told (never the server's address). */
static const struct {
    const char *name, *detail;
} faults[GW_N_FAULTS] = {
    [GW_FAULT_NONE] = {"", OTHER_DETAIL},
    [GW_FAULT_DNS] = {"dns", "the upstream's name could not be resolved (dns)"},
    [GW_FAULT_REFUSED] = {"refused",
                          "the upstream refused the connection or could not be reached (refused)"},
    [GW_FAULT_CONNECT_TIMEOUT] = {"connect_timeout", "the upstream did not accept the connection "
                                                     "in time (connect_timeout)"},
    [GW_FAULT_TLS] = {"tls", "the TLS handshake with the upstream failed (tls)"},
    [GW_FAULT_RESET] = {"reset", "the upstream closed the connection without answering (reset)"},
    [GW_FAULT_TIMEOUT] = {"timeout", "the upstream did not answer in time (timeout)"},
    [GW_FAULT_CUT] = {"cut", OTHER_DETAIL},
    [GW_FAULT_TOO_LARGE] = {"too_large", "the upstream's response head is larger than this "
                                         "gateway passes on (too_large)"},
    [GW_FAULT_INVALID] = {"invalid", "the upstream's answer was not HTTP/1.1 (invalid)"},
    [GW_FAULT_OTHER] = {"other", OTHER_DETAIL},
};

const char *gw_fault_name(enum gw_fault fault)
{
    return fault < GW_N_FAULTS ? faults[fault].name : "other";
}

const char *gw_fault_detail(enum gw_fault fault)
{
    return fault < GW_N_FAULTS ? faults[fault].detail : OTHER_DETAIL;
}

enum gw_fault gw_fault_of(int code)
{
    CURLcode result = (CURLcode)code;

    switch (result) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return GW_FAULT_DNS;
    case CURLE_COULDNT_CONNECT:
        return GW_FAULT_REFUSED;
    case CURLE_OPERATION_TIMEDOUT: /* only the connect timeout is curl's own */
        return GW_FAULT_CONNECT_TIMEOUT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_USE_SSL_FAILED:
        return GW_FAULT_TLS;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_ABORTED_BY_CALLBACK: /* a reused connection died; the request may not go twice */
        return GW_FAULT_RESET;
    case CURLE_PARTIAL_FILE:
        return GW_FAULT_CUT;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_BAD_CONTENT_ENCODING:
        return GW_FAULT_INVALID;
    default:
        return GW_FAULT_OTHER;
    }
}

enum gw_upstream_error gw_fault_error(enum gw_fault fault)
{
    switch (fault) {
    case GW_FAULT_DNS:
    case GW_FAULT_REFUSED:
    case GW_FAULT_CONNECT_TIMEOUT:
    case GW_FAULT_TLS:
        return GW_UPSTREAM_CONNECT;
    case GW_FAULT_TIMEOUT:
        return GW_UPSTREAM_TIMEOUT;
    case GW_FAULT_TOO_LARGE:
        return GW_UPSTREAM_TOO_LARGE;
    default:
        return GW_UPSTREAM_OTHER;
    }
}

/* Sets the exchange's fault, with our words for it where libcurl has none. */
static void fail_with(struct gw_upstream *u, enum gw_fault fault, const char *ours)
{
    u->fault = fault;
    if (ours != NULL || u->error_text[0] == '\0')
        snprintf(u->error_text, sizeof u->error_text, "%s",
                 ours != NULL ? ours : curl_easy_strerror(u->result));
}

enum gw_fault gw_upstream_fault(const struct gw_upstream *u, const char **text)
{
    *text = u->error_text;
    return u->fault;
}

/* True when a connection this handle holds has something to read (bytes or EOF) while no
 * request is outstanding on it: a stray answer that would be taken for the next request's, or
 * a close. libcurl checks an idle connection only after about a second. On a loop, the
 * loop's epoll set has told already (struct watch). */
static bool holds_stale_connection(const struct gw_upstream *u)
{
    struct pollfd fds[TRACKED_SOCKETS];

    if (u->loop != NULL)
        return u->stale;
    for (size_t i = 0; i < u->n_sockets; i++)
        fds[i] = (struct pollfd){.fd = u->sockets[i], .events = POLLIN};
    return u->n_sockets > 0 && poll(fds, u->n_sockets, 0) > 0;
}

enum gw_upstream_error gw_upstream_start(struct gw_upstream *u, const struct gw_forward *fw,
                                         gw_upstream_notify *notify, void *cls)
{
    gw_upstream_finish(u);
    if (holds_stale_connection(u)) {
        CURLM *fresh = new_multi(u);

        if (fresh == NULL)
            return GW_UPSTREAM_OTHER;
        curl_multi_cleanup(u->multi); /* closes the connection; the next one is new */
        u->multi = fresh;
        u->stale = false;
    }
    set_request_options(u, fw);
    u->request_body = fw->body;
    u->fault = GW_FAULT_NONE;
    u->error_text[0] = '\0';
    u->timeout_ns = fw->timeout_ns;
    u->max_head = fw->max_head;
    if (curl_multi_add_handle(u->multi, u->easy) != CURLM_OK) {
        fail_with(u, GW_FAULT_OTHER, "the transfer could not be started");
        return GW_UPSTREAM_OTHER;
    }
    u->attached = true;
    /* The wait for the head starts once the body has gone; a long upload is not a slow
     * upstream (gw_upstream_feed() bounds each wait for it to take more). */
    if (fw->body == NULL || fw->body->ended) {
        u->wait_deadline_ns = limiter_now_ns() + fw->timeout_ns;
        wake_loop_by(u, u->wait_deadline_ns);
    }
    if (u->loop != NULL) {
        u->notify = notify;
        u->notify_cls = cls;
        link_running(u);
        wake_loop_by(u, u->timer_ns); /* a timer libcurl may not announce again */
    }
    return GW_UPSTREAM_OK;
}

/* Sets the fault of an exchange that ended, or gave up waiting (`waited_for` says for what),
 * without a response head, and ends it. */
static enum gw_upstream_error no_head(struct gw_upstream *u, const char *waited_for)
{
    if (u->timed_out)
        fail_with(u, GW_FAULT_TIMEOUT, waited_for);
    else if (u->head_too_large)
        fail_with(u, GW_FAULT_TOO_LARGE, "the response head is over max_response_header_size");
    else if (u->result == CURLE_OK)
        fail_with(u, GW_FAULT_OTHER, "the transfer ended without a response head");
    else
        fail_with(u, gw_fault_of(u->result), NULL);
    gw_upstream_finish(u);
    return gw_fault_error(u->fault);
}

/* The wait that is starting gives up `timeout` from now, unless one is running already. */
static void arm_wait(struct gw_upstream *u)
{
    if (u->wait_deadline_ns == 0)
        u->wait_deadline_ns = limiter_now_ns() + u->timeout_ns;
    wake_loop_by(u, u->wait_deadline_ns);
}

/* Whether the upstream takes no more of the request body: it answered (libcurl stops sending
 * on a status of 300 or more), or the exchange ended. */
static bool body_refused(const struct gw_upstream *u)
{
    return u->done || u->timed_out || (u->head_done && u->status >= 300);
}

static bool takes_body(const struct gw_upstream *u)
{
    return body_refused(u) || gw_body_room(u->request_body) > 0 || u->request_body->ended;
}

enum gw_upstream_error gw_upstream_feed(struct gw_upstream *u, bool more)
{
    int running;

    if (u->send_paused && !u->done) {
        u->send_paused = false;
        /* The answer's side stays paused if its buffer is full (gw_upstream_read()). */
        curl_easy_pause(u->easy, u->paused ? CURLPAUSE_RECV : CURLPAUSE_CONT);
    }
    if (u->loop == NULL && !u->done) {
        curl_multi_perform(u->multi, &running); /* sends what it can now, waits for nothing */
        collect(u);
    }
    for (;;) {
        if (u->head_done && body_refused(u))
            return GW_UPSTREAM_ANSWERED;
        if (u->done || u->timed_out)
            return no_head(u, "the upstream took no more of the body within the route's timeout");
        if (!more || takes_body(u))
            return GW_UPSTREAM_OK;
        if (u->loop != NULL) {
            arm_wait(u); /* the loop tells when bytes have gone, or the wait ended */
            return GW_UPSTREAM_PENDING;
        }
        if (drive(u, takes_body, limiter_now_ns() + u->timeout_ns) != 0)
            u->timed_out = true;
    }
}

enum gw_upstream_error gw_upstream_head(struct gw_upstream *u)
{
    if (u->loop == NULL && !u->timed_out) {
        arm_wait(u);
        if (drive(u, head_ready, u->wait_deadline_ns) != 0)
            u->timed_out = true;
    }
    if (u->head_done)
        return GW_UPSTREAM_OK;
    if (!u->done && !u->timed_out) {
        arm_wait(u);
        return GW_UPSTREAM_PENDING;
    }
    return no_head(u, "no response head within the route's timeout");
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

const char *gw_upstream_fields(const struct gw_upstream *u, size_t *len)
{
    *len = u->head_len;
    return u->head;
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
        /* May deliver into the buffer at once; the request body's side stays as it was. */
        curl_easy_pause(u->easy, u->send_paused ? CURLPAUSE_SEND : CURLPAUSE_CONT);
    }
    if (!body_ready(u) && !u->done && !u->timed_out) {
        if (u->loop != NULL) {
            arm_wait(u); /* the loop tells of the next bytes, or of this wait's end */
            return GW_UPSTREAM_WOULD_BLOCK;
        }
        if (drive(u, body_ready, limiter_now_ns() + u->timeout_ns) != 0) {
            fail_with(u, GW_FAULT_TIMEOUT, "no more of the body within the route's timeout");
            return -1;
        }
    }
    if (!body_ready(u)) {
        if (u->done && u->result == CURLE_OK)
            return 0;
        if (u->timed_out)
            fail_with(u, GW_FAULT_TIMEOUT, "no more of the body within the route's timeout");
        else
            fail_with(u, GW_FAULT_CUT, NULL); /* whatever libcurl says cut it short */
        return -1;
    }
    n = u->body_len - u->body_off;
    if (n > max)
        n = max;
    memcpy(buf, u->body + u->body_off, n);
    u->body_off += n;
    return (ssize_t)n;
}

/* The socket of the connection libcurl keeps for the next exchange, or CURL_SOCKET_BAD: asked
 * before the transfer is taken out of the multi (libcurl forgets it then). With
 * CURLMOPT_MAXCONNECTS 1 a handle keeps at most that one, and only after a transfer that
 * ended: one taken out before its end has its connection closed. */
static curl_socket_t kept_socket(struct gw_upstream *u)
{
    curl_socket_t fd = CURL_SOCKET_BAD;
    bool ended = u->done;
    CURLMsg *msg;
    int queued;

    while ((msg = curl_multi_info_read(u->multi, &queued)) != NULL)
        ended = ended || msg->msg == CURLMSG_DONE;
    if (!ended || curl_easy_getinfo(u->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK)
        fd = CURL_SOCKET_BAD;
    return fd;
}

/* After an exchange the handle tracks only the socket libcurl kept (`kept`). libcurl closes
 * some sockets without calling close_socket(): 7.88 closes a connection still being made
 * (a client gone before the upstream's connect completed) with plain close(). Their numbers
 * may already be another thread's, so they are forgotten without being touched: the kernel
 * took them out of a loop's epoll set as they closed. (Tracking them on would fill the
 * handle's table, after which open_socket() refuses every connect, which libcurl reports as
 * "Couldn't connect to server" in 0 ms, a healthy server's failure.) */
static void forget_closed_sockets(struct gw_upstream *u, curl_socket_t kept)
{
    for (size_t i = u->n_sockets; i-- > 0;)
        if (u->sockets[i] != kept)
            untrack_socket(u, i, true);
}

void gw_upstream_finish(struct gw_upstream *u)
{
    if (u->loop != NULL)
        unlink_running(u);
    if (u->attached) {
        curl_socket_t kept = kept_socket(u);

        curl_multi_remove_handle(u->multi, u->easy);
        forget_closed_sockets(u, kept);
    }
    u->attached = false;
    u->notify = NULL;
    u->request_body = NULL;
    u->send_paused = false;
    /* timer_ns stays: libcurl announces a timer only when it changes, and the next transfer
     * may start with the one last announced. */
    u->wait_deadline_ns = 0;
    u->timed_out = false;
    u->done = false;
    u->result = CURLE_OK;
    u->status = 0;
    u->head_done = u->head_too_large = false;
    u->head_len = 0;
    u->body_len = u->body_off = 0;
    u->paused = false;
}
