/* Upgraded connections joined both ways on one thread; design in tunnel.h. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/upstream/tunnel.h"
#include "limiter/limiter.h"

#define EVENTS       64
#define ROUNDS       16   /* of a tunnel's pumping per wake-up, so that one cannot hold others */
#define IDLE_SCAN_MS 1000 /* how often idle tunnels are looked for */

enum { CLIENT, UPSTREAM };

/* One side of a tunnel, as its epoll events name it. */
struct end {
    struct tunnel *tunnel;
    int which;
    uint32_t events; /* what the epoll set has for it; 0: it is not in the set */
};

/* Bytes on their way from one side to the other: buf[off, len) is still to be written. */
struct flow {
    char *buf;
    size_t off, len, cap;
    bool ended; /* its sender has ended: nothing more comes */
    bool shut;  /* its receiver was told (a half close) */
};

struct tunnel {
    struct gw_tunnel_spec spec;
    CURL *easy;
    int fd[2];           /* CLIENT, UPSTREAM */
    struct flow flow[2]; /* from CLIENT to UPSTREAM, from UPSTREAM to CLIENT */
    struct end ends[2];
    int64_t last_ns; /* when a byte last moved */
    bool closed;     /* freed after the batch of events it may still have some in */
    struct tunnel *prev, *next;
};

struct gw_tunnels {
    pthread_t thread;
    int epoll_fd, wake_fd;
    pthread_mutex_t lock; /* guards `incoming` and the flags below */
    struct tunnel *incoming;
    bool close_all, stop;
    struct tunnel *open;   /* the thread's own */
    struct tunnel *closed; /* closed in this batch of events, freed after it */
    atomic_size_t count;
};

static int flow_init(struct flow *f, const char *early, size_t len)
{
    f->cap = len > GW_TUNNEL_BUFFER ? len : GW_TUNNEL_BUFFER;
    f->buf = malloc(f->cap);
    if (f->buf == NULL)
        return -1;
    if (len > 0)
        memcpy(f->buf, early, len);
    f->len = len;
    return 0;
}

static void tunnel_free(struct tunnel *t)
{
    free(t->flow[CLIENT].buf);
    free(t->flow[UPSTREAM].buf);
    free(t);
}

/* Reads what `from` sends into its flow. 1 when bytes came, 0 when none could, -1 on a
 * failure. */
static int read_side(struct tunnel *t, int from)
{
    struct flow *f = &t->flow[from];
    size_t got = 0;

    if (f->len > f->off || f->ended)
        return 0;
    f->off = f->len = 0;
    if (from == CLIENT) {
        ssize_t n = read(t->fd[CLIENT], f->buf, f->cap);

        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
        got = (size_t)n;
    } else {
        CURLcode rc = curl_easy_recv(t->easy, f->buf, f->cap, &got);

        if (rc == CURLE_AGAIN)
            return 0;
        if (rc != CURLE_OK)
            return -1;
    }
    if (got == 0)
        f->ended = true;
    f->len = got;
    return 1;
}

/* Writes what `from` sent to the other side. 1 when bytes went, 0 when none could, -1 on a
 * failure. */
static int write_side(struct tunnel *t, int from)
{
    struct flow *f = &t->flow[from];
    size_t sent = 0;

    if (f->len > f->off) {
        if (from == UPSTREAM) {
            ssize_t n = send(t->fd[CLIENT], f->buf + f->off, f->len - f->off, MSG_NOSIGNAL);

            if (n < 0 && errno == EPIPE && t->spec.client_tls) {
                /* A TLS client that has ended takes nothing more (tunnel.h): what the upstream
                 * sends goes nowhere while the client's last bytes are still passed on. */
                f->off = f->len;
                return 1;
            }
            if (n < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
            sent = (size_t)n;
        } else {
            CURLcode rc = curl_easy_send(t->easy, f->buf + f->off, f->len - f->off, &sent);

            if (rc == CURLE_AGAIN)
                return 0;
            if (rc != CURLE_OK)
                return -1;
        }
        f->off += sent;
        return sent > 0;
    }
    if (f->ended && !f->shut) {
        /* Passed on whole: the receiver is told that no more comes, where TCP can say it. */
        f->shut = true;
        if (from == UPSTREAM || !t->spec.upstream_tls)
            shutdown(t->fd[from == CLIENT ? UPSTREAM : CLIENT], SHUT_WR);
        return 1;
    }
    return 0;
}

/* Puts the side's socket in the epoll set for what it waits for now, or takes it out when it
 * waits for nothing (a socket in the set would report a hang-up over and over). */
static void watch(struct gw_tunnels *ts, struct tunnel *t, int which)
{
    struct end *e = &t->ends[which];
    const struct flow *in = &t->flow[which], *out = &t->flow[1 - which];
    uint32_t events = 0;
    struct epoll_event ev;
    int op;

    if (in->len == in->off && !in->ended)
        events |= EPOLLIN;
    if (out->len > out->off)
        events |= EPOLLOUT;
    if (events == e->events)
        return;
    op = e->events == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    ev = (struct epoll_event){.events = events, .data.ptr = e};
    epoll_ctl(ts->epoll_fd, op, t->fd[which], &ev);
    e->events = events;
}

static void close_tunnel(struct gw_tunnels *ts, struct tunnel *t)
{
    for (int which = CLIENT; which <= UPSTREAM; which++)
        if (t->ends[which].events != 0)
            epoll_ctl(ts->epoll_fd, EPOLL_CTL_DEL, t->fd[which], NULL);
    if (t->prev != NULL)
        t->prev->next = t->next;
    else
        ts->open = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    curl_easy_cleanup(t->easy); /* closes the upstream connection */
    atomic_fetch_sub(t->spec.gauge, 1);
    atomic_fetch_sub(&ts->count, 1);
    t->spec.closed(t->spec.closed_cls);
    t->closed = true;
    t->next = ts->closed;
    ts->closed = t;
}

/* Whether the tunnel is over (tunnel.h): both ways have ended and were passed on; for a TLS
 * client, either way. */
static bool over(const struct tunnel *t)
{
    bool client = t->flow[CLIENT].shut, upstream = t->flow[UPSTREAM].shut;

    return t->spec.client_tls ? client || upstream : client && upstream;
}

/* Moves what can be moved now, both ways; closes the tunnel when it is over. */
static void pump(struct gw_tunnels *ts, struct tunnel *t, int64_t now)
{
    for (int round = 0; round < ROUNDS; round++) {
        int moved = 0, step;

        for (int from = CLIENT; from <= UPSTREAM; from++) {
            step = read_side(t, from);
            if (step >= 0) {
                moved |= step;
                step = write_side(t, from);
            }
            if (step < 0) {
                close_tunnel(ts, t);
                return;
            }
            moved |= step;
        }
        if (!moved)
            break;
        t->last_ns = now;
    }
    if (over(t)) {
        close_tunnel(ts, t);
        return;
    }
    watch(ts, t, CLIENT);
    watch(ts, t, UPSTREAM);
}

static void take_incoming(struct gw_tunnels *ts, int64_t now)
{
    struct tunnel *t;

    pthread_mutex_lock(&ts->lock);
    t = ts->incoming;
    ts->incoming = NULL;
    pthread_mutex_unlock(&ts->lock);
    while (t != NULL) {
        struct tunnel *next = t->next;

        t->prev = NULL;
        t->next = ts->open;
        if (ts->open != NULL)
            ts->open->prev = t;
        ts->open = t;
        for (int which = CLIENT; which <= UPSTREAM; which++)
            t->ends[which] = (struct end){.tunnel = t, .which = which};
        t->last_ns = now;
        pump(ts, t, now);
        t = next;
    }
}

static void free_closed(struct gw_tunnels *ts)
{
    while (ts->closed != NULL) {
        struct tunnel *t = ts->closed;

        ts->closed = t->next;
        tunnel_free(t);
    }
}

static void close_idle(struct gw_tunnels *ts, int64_t now, bool all)
{
    struct tunnel *t = ts->open;

    while (t != NULL) {
        struct tunnel *next = t->next;

        if (all || now - t->last_ns > t->spec.idle_timeout_ns)
            close_tunnel(ts, t);
        t = next;
    }
}

static void *run(void *arg)
{
    struct gw_tunnels *ts = arg;
    struct epoll_event events[EVENTS];
    int64_t next_scan = limiter_now_ns() + IDLE_SCAN_MS * 1000000LL;

    for (;;) {
        int n = epoll_wait(ts->epoll_fd, events, EVENTS, IDLE_SCAN_MS);
        int64_t now = limiter_now_ns();
        bool stop, close_all;

        for (int i = 0; i < n; i++) {
            struct end *e = events[i].data.ptr;
            uint64_t count;

            if (e == NULL) { /* woken: tunnels to take, or a stop */
                if (read(ts->wake_fd, &count, sizeof count) < 0)
                    count = 0; /* read at the next wake-up */
            } else if (e->tunnel->closed) {
                continue; /* closed earlier in this batch; freed after it */
            } else if (events[i].events & EPOLLERR) {
                close_tunnel(ts, e->tunnel); /* a reset: nothing more passes either way */
            } else {
                pump(ts, e->tunnel, now);
            }
        }
        take_incoming(ts, now);
        pthread_mutex_lock(&ts->lock);
        stop = ts->stop;
        close_all = ts->close_all;
        ts->close_all = false;
        pthread_mutex_unlock(&ts->lock);
        if (close_all || stop || now >= next_scan) {
            close_idle(ts, now, close_all || stop);
            next_scan = now + IDLE_SCAN_MS * 1000000LL;
        }
        free_closed(ts);
        if (stop)
            return NULL;
    }
}

struct gw_tunnels *gw_tunnels_new(void)
{
    struct gw_tunnels *ts = calloc(1, sizeof *ts);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

    if (ts == NULL)
        return NULL;
    ts->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    ts->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&ts->lock, NULL);
    if (ts->epoll_fd < 0 || ts->wake_fd < 0 ||
        epoll_ctl(ts->epoll_fd, EPOLL_CTL_ADD, ts->wake_fd, &ev) != 0 ||
        pthread_create(&ts->thread, NULL, run, ts) != 0) {
        if (ts->epoll_fd >= 0)
            close(ts->epoll_fd);
        if (ts->wake_fd >= 0)
            close(ts->wake_fd);
        pthread_mutex_destroy(&ts->lock);
        free(ts);
        return NULL;
    }
    return ts;
}

static void wake(struct gw_tunnels *ts)
{
    uint64_t one = 1;

    if (write(ts->wake_fd, &one, sizeof one) < 0)
        return; /* the counter is full: the thread is woken anyway */
}

int gw_tunnel_open(struct gw_tunnels *ts, const struct gw_tunnel_spec *spec)
{
    struct tunnel *t = calloc(1, sizeof *t);

    if (t == NULL || flow_init(&t->flow[CLIENT], spec->client_early, spec->client_early_len) != 0 ||
        flow_init(&t->flow[UPSTREAM], spec->upstream->early, spec->upstream->early_len) != 0) {
        if (t != NULL)
            tunnel_free(t);
        return -1;
    }
    /* Checked and queued under one lock: gw_tunnels_stop() takes the queue after it sets `stop`,
     * so a tunnel is either refused here or closed there. */
    pthread_mutex_lock(&ts->lock);
    if (ts->stop) {
        pthread_mutex_unlock(&ts->lock);
        tunnel_free(t);
        return -1;
    }
    t->spec = *spec;
    t->spec.upstream = NULL;
    t->easy = spec->upstream->easy;
    /* Its error buffer was the upgrade's, which may be freed before the tunnel ends. */
    curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, NULL);
    t->fd[CLIENT] = spec->client_fd;
    t->fd[UPSTREAM] = spec->upstream->fd;
    spec->upstream->easy = NULL; /* the tunnel's now */
    fcntl(t->fd[CLIENT], F_SETFL, fcntl(t->fd[CLIENT], F_GETFL) | O_NONBLOCK);
    atomic_fetch_add(spec->gauge, 1);
    atomic_fetch_add(&ts->count, 1);
    t->next = ts->incoming;
    ts->incoming = t;
    pthread_mutex_unlock(&ts->lock);
    wake(ts);
    return 0;
}

size_t gw_tunnels_count(struct gw_tunnels *ts)
{
    return atomic_load(&ts->count);
}

void gw_tunnels_close_all(struct gw_tunnels *ts)
{
    pthread_mutex_lock(&ts->lock);
    ts->close_all = true;
    pthread_mutex_unlock(&ts->lock);
    wake(ts);
}

void gw_tunnels_stop(struct gw_tunnels *ts)
{
    bool running;

    if (ts == NULL)
        return;
    pthread_mutex_lock(&ts->lock);
    running = !ts->stop;
    ts->stop = true;
    pthread_mutex_unlock(&ts->lock);
    if (!running)
        return;
    wake(ts);
    pthread_join(ts->thread, NULL);
    take_incoming(ts, limiter_now_ns()); /* any that came while it stopped */
    close_idle(ts, 0, true);
    free_closed(ts);
}

void gw_tunnels_free(struct gw_tunnels *ts)
{
    if (ts == NULL)
        return;
    gw_tunnels_stop(ts);
    close(ts->epoll_fd);
    close(ts->wake_fd);
    pthread_mutex_destroy(&ts->lock);
    free(ts);
}
