/* Upstream handles on an event loop: each handle's multi reports its sockets into the loop's
 * epoll set, tagged with a watch that leads back to the handle, and its timer to the loop;
 * the loop acts for exactly the handle an event or a timer is for, and ends the waits that
 * passed their timeout (design in proxy.h). */
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "gateway/upstream/handle.h"
#include "gateway/upstream/proxy.h"
#include "limiter/limiter.h"

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

void gw_upstream_free_watch(struct gw_upstream_loop *loop, struct watch *w)
{
    w->owner = NULL;
    w->next_free = loop->free_watches;
    loop->free_watches = w;
}

void gw_upstream_drop_watch(struct gw_upstream *u, struct watch *w)
{
    watch_for(u->loop, w, 0);
    gw_upstream_free_watch(u->loop, w);
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
        gw_upstream_drop_watch(u, w);
        return 0;
    }
    w->wanted = what != CURL_POLL_REMOVE;
    curl_multi_assign(u->multi, fd, w->wanted ? w : NULL);
    if (!w->wanted)
        return watch_for(u->loop, w, EPOLLIN);
    return watch_for(u->loop, w,
                     (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0));
}

void gw_upstream_wake_loop_by(struct gw_upstream *u, int64_t at)
{
    if (u->loop != NULL && at >= 0 && at < u->loop->earliest_ns)
        u->loop->earliest_ns = at;
}

static int on_timer(CURLM *multi, long timeout_ms, void *cls)
{
    struct gw_upstream *u = cls;

    (void)multi;
    u->timer_ns = timeout_ms < 0 ? -1 : limiter_now_ns() + (int64_t)timeout_ms * 1000000;
    gw_upstream_wake_loop_by(u, u->timer_ns);
    return 0;
}

void gw_upstream_loop_watch_multi(CURLM *multi, struct gw_upstream *u)
{
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, u);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, u);
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
    gw_upstream_pools_free(loop);
    pthread_mutex_destroy(&loop->pools.lock);
    while (loop->blocks != NULL) {
        struct watch_block *block = loop->blocks;

        loop->blocks = block->next;
        free(block);
    }
    free(loop);
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
    gw_upstream_collect(u);
}

/* Ends the exchange's wait as failed (a timeout, or shutdown), and tells its request. */
static void give_up(struct gw_upstream *u)
{
    u->timed_out = true;
    u->progress++;
    gw_upstream_collect(u);
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
            gw_upstream_collect(u);
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

void gw_upstream_link_running(struct gw_upstream *u)
{
    struct gw_upstream_loop *loop = u->loop;

    u->running = true;
    u->prev = NULL;
    u->next = loop->running;
    if (loop->running != NULL)
        loop->running->prev = u;
    loop->running = u;
}

void gw_upstream_unlink_running(struct gw_upstream *u)
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
