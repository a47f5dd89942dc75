/* An event loop of event mode; design in loop.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gateway/front/loop.h"
#include "gateway/upstream/proxy.h"
#include "limiter/limiter.h"

#define EVENTS_PER_WAIT 64

struct gw_loop {
    int epoll_fd, wake_fd;
    struct gw_upstream_loop *upstream;
    struct MHD_Daemon *daemon;
    gw_loop_tick *tick;
    void *tick_cls;
    gw_loop_ready *ready; /* gw_loop_watch() */
    void *ready_cls;
    pthread_t thread;
    bool started;
    atomic_bool stopping;
    /* Tags of the loop's own epoll entries; anything else is an upstream socket's. */
    char daemon_tag, wake_tag, watch_tag;
};

struct gw_loop *gw_loop_new(void)
{
    struct gw_loop *loop = calloc(1, sizeof *loop);
    struct epoll_event wake = {.events = EPOLLIN};

    if (loop == NULL)
        return NULL;
    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    wake.data.ptr = &loop->wake_tag;
    if (loop->epoll_fd < 0 || loop->wake_fd < 0 ||
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->wake_fd, &wake) != 0 ||
        (loop->upstream = gw_upstream_loop_new(loop->epoll_fd)) == NULL) {
        gw_loop_free(loop);
        return NULL;
    }
    return loop;
}

struct gw_upstream_loop *gw_loop_upstream(struct gw_loop *loop)
{
    return loop->upstream;
}

/* Milliseconds from `now` until `at`, rounded up so the wait never ends before it. */
static int ms_until(int64_t at, int64_t now)
{
    int64_t ms = (at - now + 999999) / 1000000;

    return ms < 0 ? 0 : ms > 1000 ? 1000 : (int)ms;
}

static void *run(void *arg)
{
    struct gw_loop *loop = arg;
    struct epoll_event events[EVENTS_PER_WAIT];
    int64_t next_tick = 0;

    while (!atomic_load_explicit(&loop->stopping, memory_order_relaxed)) {
        int64_t now = limiter_now_ns(), next;
        MHD_UNSIGNED_LONG_LONG daemon_ms;
        bool woken = false;
        int n, wait_ms;

        next = gw_upstream_loop_run_timers(loop->upstream, now);
        if (now >= next_tick) {
            loop->tick(loop->tick_cls, now);
            next_tick = now + GW_LOOP_TICK_NS;
        }
        if (next < 0 || next > next_tick)
            next = next_tick;
        wait_ms = ms_until(next, now);
        if (MHD_get_timeout(loop->daemon, &daemon_ms) == MHD_YES && daemon_ms < (unsigned)wait_ms)
            wait_ms = (int)daemon_ms;
        /* A connection resumed by the timers above waits for MHD_run(), which nothing would
         * wake the loop for: libmicrohttpd signals resumptions only to its own threads. */
        if (gw_upstream_loop_told(loop->upstream))
            wait_ms = 0;
        n = epoll_wait(loop->epoll_fd, events, EVENTS_PER_WAIT, wait_ms);
        for (int i = 0; i < n; i++) {
            void *tag = events[i].data.ptr;

            if (tag == &loop->wake_tag) {
                uint64_t count;

                woken = read(loop->wake_fd, &count, sizeof count) > 0;
            } else if (tag == &loop->watch_tag) {
                loop->ready(loop->ready_cls);
            } else if (tag != &loop->daemon_tag) {
                gw_upstream_loop_event(loop->upstream, tag, events[i].events);
            }
        }
        /* Every turn: it also picks up the connections resumed just above. */
        MHD_run(loop->daemon);
        if (woken)
            next_tick = 0;
    }
    /* Whatever still waits for an upstream is answered (502, or its body cut) and resumed,
     * since libmicrohttpd cannot stop with connections suspended. */
    gw_upstream_loop_abort(loop->upstream);
    MHD_run(loop->daemon);
    return NULL;
}

int gw_loop_watch(struct gw_loop *loop, int fd, gw_loop_ready *ready, void *cls)
{
    struct epoll_event event = {.events = EPOLLIN};

    event.data.ptr = &loop->watch_tag;
    if (loop->ready != NULL || epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0)
        return -1;
    loop->ready = ready;
    loop->ready_cls = cls;
    return 0;
}

int gw_loop_start(struct gw_loop *loop, struct MHD_Daemon *daemon, gw_loop_tick *tick, void *cls)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    struct epoll_event event = {.events = EPOLLIN};

    event.data.ptr = &loop->daemon_tag;
    if (info == NULL || epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, info->epoll_fd, &event) != 0)
        return -1;
    loop->daemon = daemon;
    loop->tick = tick;
    loop->tick_cls = cls;
    if (pthread_create(&loop->thread, NULL, run, loop) != 0)
        return -1;
    loop->started = true;
    return 0;
}

void gw_loop_wake(struct gw_loop *loop)
{
    uint64_t one = 1;

    if (write(loop->wake_fd, &one, sizeof one) < 0) {
        /* The counter is full: the loop is being woken already. */
    }
}

void gw_loop_stop(struct gw_loop *loop)
{
    if (loop == NULL || !loop->started)
        return;
    atomic_store(&loop->stopping, true);
    gw_loop_wake(loop);
    pthread_join(loop->thread, NULL);
    loop->started = false;
}

void gw_loop_free(struct gw_loop *loop)
{
    if (loop == NULL)
        return;
    gw_upstream_loop_free(loop->upstream);
    if (loop->wake_fd >= 0)
        close(loop->wake_fd);
    if (loop->epoll_fd >= 0)
        close(loop->epoll_fd);
    free(loop);
}
