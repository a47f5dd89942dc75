/* Each serving mode's periodic work: thread_per_connection's reaper thread, and an event
 * loop's tick (loop.h). Both time out clients that read their requests too slowly and prune
 * idle upstream connections; the tick also takes in handed-over connections, quiesces its
 * daemon for a drain, parks idle connections and lets go of a replaced runtime. Design in
 * server.h. */
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/core/runtime.h"
#include "gateway/front/loop.h"
#include "gateway/front/server_private.h"
#include "gateway/ops/metrics.h"
#include "gateway/upstream/proxy.h"
#include "limiter/limiter.h"

/* libmicrohttpd's timeout is an idle one: a client sending a byte now and then would keep
 * its connection, and its thread, forever. Every connection must deliver a whole request
 * head within client_timeout of the connection opening or of the last answer, and then its
 * body without a pause longer than that (on_request()); the reaper shuts down the socket of
 * one that does not, and libmicrohttpd then closes it as broken. */
static void reap_slow_clients(struct front *f, int64_t now)
{
    pthread_mutex_lock(&f->watch_lock);
    for (struct watched *w = f->watched; w != NULL; w = w->next) {
        int64_t deadline = atomic_load_explicit(&w->read_deadline_ns, memory_order_relaxed);

        if (deadline != 0 && now > deadline &&
            atomic_compare_exchange_strong(&w->read_deadline_ns, &deadline, 0))
            shutdown(w->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&f->watch_lock);
}

/* thread_per_connection's housekeeping thread. */
static void *reaper(void *arg)
{
    struct gw_server *s = arg;
    struct pollfd stop = {s->reaper_stop[0], POLLIN, 0};

    while (poll(&stop, 1, (int)(GW_LOOP_TICK_NS / 1000000)) == 0) {
        int64_t now = limiter_now_ns();

        gw_proxy_prune(now);
        reap_slow_clients(&s->fronts[0], now);
    }
    return NULL;
}

int gw_reaper_start(struct gw_server *s)
{
    if (pipe(s->reaper_stop) != 0) {
        s->reaper_stop[0] = s->reaper_stop[1] = 0;
        return -1;
    }
    if (pthread_create(&s->reaper, NULL, reaper, s) != 0) {
        close(s->reaper_stop[0]);
        close(s->reaper_stop[1]);
        s->reaper_stop[0] = s->reaper_stop[1] = 0;
        return -1;
    }
    return 0;
}

void gw_reaper_stop(struct gw_server *s)
{
    if (s->reaper_stop[1] <= 0)
        return;
    if (write(s->reaper_stop[1], "x", 1) == 1)
        pthread_join(s->reaper, NULL);
    close(s->reaper_stop[0]);
    close(s->reaper_stop[1]);
}

void gw_front_tick(void *cls, int64_t now)
{
    struct front *f = cls;
    struct gw_server *s = f->server;

    gw_handoff_take_in(f);
    gw_upstream_loop_prune(gw_loop_upstream(f->loop), now);
    /* The first tick comes before the loop's first request. Shard 0 is other threads'. */
    gw_metrics_use_shard((unsigned)(f - s->fronts) + 1);
    reap_slow_clients(f, now);
    if (atomic_load(&s->draining) && !f->quiesced) {
        MHD_socket listener = MHD_quiesce_daemon(f->daemon);

        if (listener != MHD_INVALID_SOCKET)
            close(listener);
        f->quiesced = true;
    }
    if (f->park != NULL) {
        /* A drain closes idle connections at once, as a stopping daemon would. */
        gw_conn_close_parked(f, f->quiesced ? INT64_MAX : now);
        if (!f->quiesced)
            gw_conn_park_idle(f, now);
    }
    /* Lets go of a replaced runtime even when no request comes. */
    if (f->runtime != NULL && f->generation != atomic_load(&s->generation)) {
        gw_runtime_release(f->runtime);
        f->runtime = NULL;
    }
}
