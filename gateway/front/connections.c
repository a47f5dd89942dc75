/* A client connection outside its requests: counted in and out under the caps (admission.h),
 * on its front's list for the reaper and the tick, parked and handed back (park.h). Design in
 * server.h and park.h. */
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/front/admission.h"
#include "gateway/front/park.h"
#include "gateway/front/server_private.h"
#include "gateway/front/wire.h"
#include "gateway/identity/keys.h"
#include "gateway/ops/metrics.h"

void gw_conn_release(struct gw_server *s, struct watched *w)
{
    if (w == NULL)
        return;
    if (s->admission != NULL)
        gw_admission_leave(s->admission, w->has_peer ? &w->peer : NULL);
    free(w);
}

struct watched *gw_conn_admit(struct gw_server *s, const struct sockaddr *client)
{
    struct watched *w = calloc(1, sizeof *w);

    gw_metrics_connection(s->metrics, 1);
    if (w == NULL)
        return NULL;
    w->has_peer = client != NULL && gw_addr_from_sockaddr(client, &w->peer) == 0;
    if (w->has_peer) {
        w->address_len =
            client->sa_family == AF_INET ? sizeof w->address.in : sizeof w->address.in6;
        memcpy(&w->address, client, w->address_len);
    }
    /* Each loop's daemon sees only its own connections: the caps count them all. */
    if (s->admission != NULL &&
        gw_admission_enter(s->admission, w->has_peer ? &w->peer : NULL) != 0) {
        gw_mhd_count_refusal(s);
        free(w);
        return NULL;
    }
    return w;
}

void gw_conn_watch(struct front *f, struct watched *w)
{
    pthread_mutex_lock(&f->watch_lock);
    w->prev = NULL;
    w->next = f->watched;
    if (f->watched != NULL)
        f->watched->prev = w;
    f->watched = w;
    pthread_mutex_unlock(&f->watch_lock);
}

void gw_conn_unwatch(struct front *f, struct watched *w)
{
    pthread_mutex_lock(&f->watch_lock);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        f->watched = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&f->watch_lock);
}

bool gw_conn_park(struct front *f, struct watched *w)
{
    int fd = fcntl(w->fd, F_DUPFD_CLOEXEC, 0);

    if (fd < 0)
        return false;
    if (gw_park_add(f->park, fd, atomic_load(&w->read_deadline_ns), w) != 0) {
        close(fd);
        return false;
    }
    gw_conn_unwatch(f, w);
    gw_wire_detach(w->wire);
    w->wire = NULL;
    w->connection = NULL;
    w->fd = fd;
    gw_metrics_parked(f->server->metrics, 1);
    return true;
}

void gw_conn_close_parked(struct front *f, int64_t now)
{
    struct gw_server *s = f->server;

    for (;;) {
        int fd;
        struct watched *w = gw_park_take_expired(f->park, now, &fd);

        if (w == NULL)
            break;
        close(fd);
        gw_metrics_parked(s->metrics, -1);
        gw_metrics_connection(s->metrics, -1);
        gw_conn_release(s, w);
    }
}

void gw_conn_unpark_ready(void *cls)
{
    struct front *f = cls;
    struct gw_server *s = f->server;

    for (;;) {
        int fd;
        struct watched *w = gw_park_take_ready(f->park, &fd);

        if (w == NULL)
            break;
        gw_metrics_parked(s->metrics, -1);
        w->fd = fd;
        f->unparking = w;
        MHD_add_connection(f->daemon, fd, &w->address.sa, w->address_len);
        if (f->unparking == w) { /* refused before it started: libmicrohttpd closed `fd` */
            f->unparking = NULL;
            gw_metrics_connection(s->metrics, -1);
            gw_conn_release(s, w);
        }
    }
}

/* With their timeout set to lapse at once, the daemon starts closing its side of the idle
 * connections (and finishes on its next run: on_connection() then parks them); any it does
 * not close get their timeout back. */
void gw_conn_park_idle(struct front *f, int64_t now)
{
    int64_t after = atomic_load_explicit(&f->server->park_idle_after_ns, memory_order_relaxed);
    unsigned parking = 0;

    if (after == 0)
        return;
    pthread_mutex_lock(&f->watch_lock);
    for (struct watched *w = f->watched; w != NULL; w = w->next) {
        if (w->idle_since_ns == 0 || now - w->idle_since_ns < after || w->address_len == 0 ||
            gw_wire_head(w->wire)->messages != w->requests || !gw_wire_park(w->wire))
            continue;
        MHD_set_connection_option(w->connection, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
        parking++;
    }
    pthread_mutex_unlock(&f->watch_lock);
    if (parking == 0)
        return;
    MHD_run(f->daemon);
    pthread_mutex_lock(&f->watch_lock);
    for (struct watched *w = f->watched; w != NULL; w = w->next) {
        if (!gw_wire_unpark(w->wire))
            continue;
        MHD_set_connection_option(w->connection, MHD_CONNECTION_OPTION_TIMEOUT,
                                  gw_server_client_timeout_s(f->server));
    }
    pthread_mutex_unlock(&f->watch_lock);
}
