#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "gateway/ops/watch.h"

#define QUIET_MS 200

struct gw_watch {
    int inotify;
    int stop[2]; /* a pipe: writing to it ends the thread */
    char *name;  /* the file's name within its directory */
    pthread_t thread;
};

/* Reads the pending events; true when one concerns the config file. */
static bool drain_events(struct gw_watch *w)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool relevant = false;
    ssize_t n;

    while ((n = read(w->inotify, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;

            if (e->len > 0 && (strcmp(e->name, w->name) == 0 || strcmp(e->name, "..data") == 0))
                relevant = true;
            p += sizeof *e + e->len;
        }
    }
    return relevant;
}

static int64_t now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Quiet is counted from the file's last change: changes to other files of the directory (a
 * busy /tmp) must not put the reload off. */
static void *watch_loop(void *arg)
{
    struct gw_watch *w = arg;
    struct pollfd fds[2] = {{w->inotify, POLLIN, 0}, {w->stop[0], POLLIN, 0}};
    bool pending = false;
    int64_t quiet_at = 0; /* when `pending`: the reload's time */

    for (;;) {
        int64_t left = pending ? quiet_at - now_ms() : 0;
        int ready = poll(fds, 2, !pending ? -1 : left > 0 ? (int)left : 0);

        if (ready < 0 && errno != EINTR)
            break;
        if (fds[1].revents != 0)
            break;
        if (ready > 0 && (fds[0].revents & POLLIN)) {
            if (drain_events(w)) {
                pending = true;
                quiet_at = now_ms() + QUIET_MS;
            }
            continue; /* wait for quiet */
        }
        if (pending && now_ms() >= quiet_at) {
            pending = false;
            kill(getpid(), SIGHUP);
        }
    }
    return NULL;
}

struct gw_watch *gw_watch_start(const char *path)
{
    struct gw_watch *w = calloc(1, sizeof *w);
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];

    if (w == NULL)
        return NULL;
    w->stop[0] = w->stop[1] = -1;
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    w->name = strdup(slash ? slash + 1 : path);
    w->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->name == NULL || w->inotify < 0 || pipe(w->stop) != 0 ||
        inotify_add_watch(w->inotify, dir, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0 ||
        pthread_create(&w->thread, NULL, watch_loop, w) != 0) {
        int saved = errno;

        if (w->inotify >= 0)
            close(w->inotify);
        if (w->stop[0] >= 0) {
            close(w->stop[0]);
            close(w->stop[1]);
        }
        free(w->name);
        free(w);
        errno = saved;
        return NULL;
    }
    return w;
}

void gw_watch_stop(struct gw_watch *w)
{
    if (w == NULL)
        return;
    if (write(w->stop[1], "x", 1) == 1)
        pthread_join(w->thread, NULL);
    close(w->stop[0]);
    close(w->stop[1]);
    close(w->inotify);
    free(w->name);
    free(w);
}
