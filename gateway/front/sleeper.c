/* Requests waiting for an instant, on one thread; design in sleeper.h. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gateway/front/sleeper.h"
#include "limiter/limiter.h"

#define EVENTS_PER_WAIT 64

struct sleeping {
    int64_t until_ns;
    int fd;
    size_t index; /* in the heap */
    void (*wake)(void *arg, enum gw_woken why);
    void *arg;
};

struct gw_sleeper {
    pthread_mutex_t lock; /* the heap and the flags */
    struct sleeping **heap;
    size_t n, cap;
    int epoll_fd, wake_fd;
    char wake_tag;
    bool started, stopping;
    pthread_t thread;
};

/* --- the heap, earliest first, under the lock --------------------------------------------- */

static void place(struct gw_sleeper *s, size_t i, struct sleeping *e)
{
    s->heap[i] = e;
    e->index = i;
}

static void sift_up(struct gw_sleeper *s, size_t i)
{
    struct sleeping *e = s->heap[i];

    while (i > 0 && s->heap[(i - 1) / 2]->until_ns > e->until_ns) {
        place(s, i, s->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    place(s, i, e);
}

static void sift_down(struct gw_sleeper *s, size_t i)
{
    struct sleeping *e = s->heap[i];

    for (;;) {
        size_t child = 2 * i + 1;

        if (child >= s->n)
            break;
        if (child + 1 < s->n && s->heap[child + 1]->until_ns < s->heap[child]->until_ns)
            child++;
        if (s->heap[child]->until_ns >= e->until_ns)
            break;
        place(s, i, s->heap[child]);
        i = child;
    }
    place(s, i, e);
}

/* Takes `e` out of the heap and the epoll set. */
static void take_out(struct gw_sleeper *s, struct sleeping *e)
{
    size_t i = e->index;

    epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, e->fd, NULL);
    s->n--;
    if (i == s->n)
        return;
    place(s, i, s->heap[s->n]);
    sift_down(s, i);
    sift_up(s, s->heap[i]->index);
}

/* --- the thread ---------------------------------------------------------------------------- */

/* Takes out what is due at `now` (all, when stopping) into `due`, up to `cap`: how many. */
static size_t take_due(struct gw_sleeper *s, int64_t now, struct sleeping **due, size_t cap)
{
    size_t n = 0;

    while (n < cap && s->n > 0 && (s->stopping || s->heap[0]->until_ns <= now)) {
        due[n] = s->heap[0];
        take_out(s, due[n++]);
    }
    return n;
}

/* Milliseconds until the earliest instant, rounded up (-1: none). */
static int wait_ms(const struct gw_sleeper *s, int64_t now)
{
    int64_t ms;

    if (s->n == 0)
        return -1;
    ms = (s->heap[0]->until_ns - now + 999999) / 1000000;
    return ms < 0 ? 0 : ms > 1000 ? 1000 : (int)ms;
}

/* Hands each of `list` back, after the lock is let go (a request may be freed once woken). */
static void wake_all(struct sleeping **list, size_t n, enum gw_woken why)
{
    for (size_t i = 0; i < n; i++) {
        list[i]->wake(list[i]->arg, why);
        free(list[i]);
    }
}

static void *run(void *arg)
{
    struct gw_sleeper *s = arg;
    struct epoll_event events[EVENTS_PER_WAIT];
    struct sleeping *woken[EVENTS_PER_WAIT];

    pthread_mutex_lock(&s->lock);
    while (!s->stopping || s->n > 0) {
        int64_t now = limiter_now_ns();
        bool stopping = s->stopping;
        size_t n_due = take_due(s, now, woken, EVENTS_PER_WAIT), n_left = 0;
        int timeout = n_due > 0 || stopping ? 0 : wait_ms(s, now), n;

        pthread_mutex_unlock(&s->lock);
        wake_all(woken, n_due, stopping ? GW_WOKEN_REFUSED : GW_WOKEN_ON_TIME);
        n = epoll_wait(s->epoll_fd, events, EVENTS_PER_WAIT, timeout);
        pthread_mutex_lock(&s->lock);
        for (int i = 0; i < n; i++) {
            struct sleeping *e = events[i].data.ptr;

            if (events[i].data.ptr == &s->wake_tag) {
                uint64_t count;

                if (read(s->wake_fd, &count, sizeof count) < 0) {
                    /* nothing to read: another event woke it already */
                }
                continue;
            }
            take_out(s, e);
            woken[n_left++] = e;
        }
        pthread_mutex_unlock(&s->lock);
        wake_all(woken, n_left, GW_WOKEN_CLIENT_LEFT);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void poke(struct gw_sleeper *s)
{
    uint64_t one = 1;

    if (write(s->wake_fd, &one, sizeof one) < 0) {
        /* the counter is full: the thread is being woken already */
    }
}

/* --- the interface --------------------------------------------------------------------------- */

struct gw_sleeper *gw_sleeper_new(void)
{
    struct gw_sleeper *s = calloc(1, sizeof *s);
    struct epoll_event wake = {.events = EPOLLIN};

    if (s == NULL)
        return NULL;
    pthread_mutex_init(&s->lock, NULL);
    s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    wake.data.ptr = &s->wake_tag;
    if (s->epoll_fd < 0 || s->wake_fd < 0 ||
        epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->wake_fd, &wake) != 0) {
        gw_sleeper_free(s);
        return NULL;
    }
    return s;
}

/* Room for one more in the heap, and the thread running. 0, or -1. Under the lock. */
static int make_room(struct gw_sleeper *s)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct sleeping **grown = realloc(s->heap, cap * sizeof *grown);

        if (grown == NULL)
            return -1;
        s->heap = grown;
        s->cap = cap;
    }
    if (!s->started)
        s->started = pthread_create(&s->thread, NULL, run, s) == 0;
    return s->started ? 0 : -1;
}

int gw_sleeper_add(struct gw_sleeper *s, int fd, int64_t until_ns,
                   void (*wake)(void *arg, enum gw_woken why), void *arg)
{
    struct sleeping *e = malloc(sizeof *e);
    struct epoll_event event = {.events = EPOLLRDHUP};
    bool first;

    if (e == NULL)
        return -1;
    *e = (struct sleeping){.until_ns = until_ns, .fd = fd, .wake = wake, .arg = arg};
    event.data.ptr = e;
    pthread_mutex_lock(&s->lock);
    if (s->stopping || make_room(s) != 0 ||
        epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        pthread_mutex_unlock(&s->lock);
        free(e);
        return -1;
    }
    place(s, s->n++, e);
    sift_up(s, e->index);
    first = e->index == 0;
    pthread_mutex_unlock(&s->lock);
    if (first) /* an earlier instant than the thread waits for */
        poke(s);
    return 0;
}

size_t gw_sleeper_count(struct gw_sleeper *s)
{
    size_t n;

    pthread_mutex_lock(&s->lock);
    n = s->n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void gw_sleeper_stop(struct gw_sleeper *s)
{
    bool started;

    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    started = s->started;
    s->started = false;
    pthread_mutex_unlock(&s->lock);
    poke(s);
    if (started)
        pthread_join(s->thread, NULL);
}

void gw_sleeper_free(struct gw_sleeper *s)
{
    if (s == NULL)
        return;
    gw_sleeper_stop(s);
    if (s->wake_fd >= 0)
        close(s->wake_fd);
    if (s->epoll_fd >= 0)
        close(s->epoll_fd);
    free(s->heap);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
