/* The client's bytes through sluice's strict reader before libmicrohttpd; design in wire.h. */
#undef _FORTIFY_SOURCE /* recv() is defined here; a fortified header would inline its own */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "wire.h"

#define STAND_IN_LEN (sizeof GW_WIRE_STAND_IN - 1)

struct gw_wire {
    int fd;
    struct gw_head head;
    char *held; /* the start of a head not yet whole (head.max_head bytes), or NULL */
    size_t held_len;
    size_t stand_in_sent; /* bytes of the stand-in head handed over so far */
};

static _Atomic(struct gw_wire *) *table;
static size_t table_len;

int gw_wire_init(void)
{
    struct rlimit files;

    /* libmicrohttpd finds recv() the way dlsym() does: if that is not this file's, bytes
     * would reach it unread, so sluice does not start. */
    if (dlsym(RTLD_DEFAULT, "recv") != (void *)recv)
        return -1;
    if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY ||
        files.rlim_cur > (rlim_t)(1 << 24))
        files.rlim_cur = 1 << 20;
    table = calloc(files.rlim_cur, sizeof *table);
    if (table == NULL)
        return -1;
    table_len = files.rlim_cur;
    return 0;
}

void gw_wire_cleanup(void)
{
    table_len = 0;
    free(table);
    table = NULL;
}

struct gw_wire *gw_wire_attach(int fd, uint32_t max_head)
{
    struct gw_wire *w;

    if (fd < 0 || (size_t)fd >= table_len)
        return NULL;
    w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->fd = fd;
    gw_head_init(&w->head, max_head);
    atomic_store_explicit(&table[fd], w, memory_order_release);
    return w;
}

void gw_wire_detach(struct gw_wire *w)
{
    if (w == NULL)
        return;
    atomic_store_explicit(&table[w->fd], NULL, memory_order_release);
    free(w->held);
    free(w);
}

const struct gw_head *gw_wire_head(const struct gw_wire *w)
{
    return &w->head;
}

static ssize_t again(void)
{
    errno = EAGAIN;
    return -1;
}

/* After a refused head: the stand-in head, and from then on whatever the client still sends
 * is read and dropped. `buf` holds `ready` bytes to hand over first. */
static ssize_t after_fault(struct gw_wire *w, char *buf, size_t ready, size_t len, int flags)
{
    size_t left = STAND_IN_LEN - w->stand_in_sent, give = left < len - ready ? left : len - ready;
    ssize_t n;

    memcpy(buf + ready, GW_WIRE_STAND_IN + w->stand_in_sent, give);
    w->stand_in_sent += give;
    /* The rest of the stand-in must be asked for, and libmicrohttpd polls before it reads:
     * with the read side shut, the socket stays readable. */
    if (give < left)
        shutdown(w->fd, SHUT_RD);
    if (ready + give > 0)
        return (ssize_t)(ready + give);
    n = recvfrom(w->fd, buf, len, flags, NULL, NULL);
    return n > 0 ? again() : n;
}

/* Feeds `n` bytes in `in` (a head kept back, then what was just read), and hands libmicrohttpd
 * what it passed, in `buf`: never more than `len`, and nothing left over for a later call
 * that, with the socket drained, might not come. */
static ssize_t feed(struct gw_wire *w, char *in, size_t n, char *buf, size_t len, int flags)
{
    struct gw_head_step step = gw_head_feed(&w->head, in, n);
    size_t kept = n - step.keep_from;

    if (in != buf)
        memcpy(buf, in, step.ready);
    if (w->head.fault != 0 && w->head.fault_in_body) {
        /* libmicrohttpd cannot answer in the middle of a body: what came before the fault
         * goes through, then the stream ends (the shut read side makes it ask again). */
        shutdown(w->fd, SHUT_RD);
        return (ssize_t)step.ready;
    }
    if (w->head.fault != 0)
        return after_fault(w, buf, step.ready, len, flags);
    if (kept == 0) {
        free(w->held);
        w->held = NULL;
    } else {
        if (w->held == NULL)
            w->held = malloc(w->head.max_head);
        if (w->held == NULL)
            return -1; /* errno ENOMEM: libmicrohttpd drops the connection */
        memmove(w->held, in + step.keep_from, kept);
    }
    w->held_len = kept;
    w->head.held = (uint32_t)kept;
    return step.ready > 0 ? (ssize_t)step.ready : again();
}

static ssize_t read_checked(struct gw_wire *w, char *buf, size_t len, int flags)
{
    size_t kept = w->held_len, room = len < w->head.max_head ? len : w->head.max_head;
    ssize_t n;

    if (w->head.fault != 0 && w->head.fault_in_body)
        return 0;
    if (w->head.fault != 0)
        return after_fault(w, buf, 0, len, flags);
    if (kept == 0) {
        n = recvfrom(w->fd, buf, len, flags, NULL, NULL);
        return n > 0 ? feed(w, buf, (size_t)n, buf, len, flags) : n;
    }
    /* A head kept back: what follows is read in behind it, as much as libmicrohttpd could
     * take of the two together. */
    if (kept >= room) {
        gw_head_refuse(&w->head, 431, "the request head is larger than this gateway accepts");
        return after_fault(w, buf, 0, len, flags);
    }
    n = recvfrom(w->fd, w->held + kept, room - kept, flags, NULL, NULL);
    return n > 0 ? feed(w, w->held, kept + (size_t)n, buf, len, flags) : n;
}

/* libmicrohttpd's reads of client sockets land here (wire.h); all others pass straight to
 * the C library. */
ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    struct gw_wire *w = NULL;

    if (fd >= 0 && (size_t)fd < table_len)
        w = atomic_load_explicit(&table[fd], memory_order_acquire);
    if (w == NULL || len == 0)
        return recvfrom(fd, buf, len, flags, NULL, NULL);
    return read_checked(w, buf, len, flags);
}
