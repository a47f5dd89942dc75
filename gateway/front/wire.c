/* The client's bytes through sluice's strict reader before libmicrohttpd; design in wire.h. */
#undef _FORTIFY_SOURCE /* recv() is defined here; a fortified header would inline its own */
#include <dlfcn.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "gateway/front/wire.h"

#define STAND_IN_LEN (sizeof GW_WIRE_STAND_IN - 1)

typedef ssize_t record_recv_fn(gnutls_session_t session, void *buf, size_t len);

struct gw_wire {
    int fd;
    gnutls_session_t tls; /* NULL for plain HTTP */
    int tls_error;        /* GnuTLS's last error on `tls`, for the caller of gnutls_record_recv */
    bool upgraded;        /* what follows is not HTTP: passed on unread */
    int app_fd;           /* upgraded over TLS: the tunnel's end of libmicrohttpd's pair, or -1 */
    bool read_shut;       /* this file shut the read side */
    bool ended;           /* a read found the end of the stream, or an error */
    bool parking;         /* gw_wire_park() */
    bool shut_parking;    /* libmicrohttpd shut the socket while parking: it is closing it */
    int epoll_fd;         /* gw_wire_edge()'s, or -1 */
    void *connection;
    bool more;  /* the last read from the socket or GnuTLS may have left bytes */
    void *kept; /* gw_wire_keep() */
    void (*release_kept)(void *kept);
    struct gw_head head;
    char *held; /* the start of a head not yet whole (head.max_head bytes), or NULL */
    size_t held_len;
    size_t stand_in_sent; /* bytes of the stand-in head handed over so far */
};

static _Atomic(struct gw_wire *) *table;
static size_t table_len;
static record_recv_fn *real_record_recv; /* GnuTLS's gnutls_record_recv() */

int gw_wire_init(void)
{
    struct rlimit files;

    /* libmicrohttpd finds recv() the way dlsym() does: if that is not this file's, bytes
     * would reach it unread, so sluice does not start. */
    if (dlsym(RTLD_DEFAULT, "recv") != (void *)recv ||
        dlsym(RTLD_DEFAULT, "gnutls_record_recv") != (void *)gnutls_record_recv ||
        dlsym(RTLD_DEFAULT, "shutdown") != (void *)shutdown)
        return -1;
    real_record_recv = (record_recv_fn *)dlsym(RTLD_NEXT, "gnutls_record_recv");
    if (real_record_recv == NULL)
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

struct gw_wire *gw_wire_attach(int fd, uint32_t max_head, uint32_t hold, gnutls_session_t tls)
{
    struct gw_wire *w;

    if (fd < 0 || (size_t)fd >= table_len)
        return NULL;
    w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->fd = fd;
    w->epoll_fd = -1;
    w->app_fd = -1;
    w->tls = tls;
    gw_head_init(&w->head, max_head, hold);
    atomic_store_explicit(&table[fd], w, memory_order_release);
    return w;
}

void gw_wire_detach(struct gw_wire *w)
{
    if (w == NULL)
        return;
    atomic_store_explicit(&table[w->fd], NULL, memory_order_release);
    if (w->release_kept != NULL)
        w->release_kept(w->kept);
    free(w->held);
    free(w);
}

void gw_wire_edge(struct gw_wire *w, int epoll_fd, void *connection)
{
    w->epoll_fd = epoll_fd;
    w->connection = connection;
}

const struct gw_head *gw_wire_head(const struct gw_wire *w)
{
    return &w->head;
}

static struct gw_wire *wire_of_fd(int fd)
{
    if (fd < 0 || (size_t)fd >= table_len)
        return NULL;
    return atomic_load_explicit(&table[fd], memory_order_acquire);
}

struct gw_wire *gw_wire_of_tls(gnutls_session_t tls)
{
    struct gw_wire *w = wire_of_fd(gnutls_transport_get_int(tls));

    return w != NULL && w->tls == tls ? w : NULL;
}

void gw_wire_keep(struct gw_wire *w, void *kept, void (*release)(void *kept))
{
    if (w->release_kept != NULL)
        w->release_kept(w->kept);
    w->kept = kept;
    w->release_kept = release;
}

void gw_wire_upgraded(int fd, int app_fd)
{
    struct gw_wire *w = wire_of_fd(fd);

    if (w == NULL)
        return;
    w->upgraded = true;
    if (w->tls != NULL)
        w->app_fd = app_fd;
}

/* An upgraded TLS connection's read: when the client's side has ended (close_notify, a FIN
 * without one, a reset, any error), libmicrohttpd stops reading it but keeps carrying the
 * tunnel's bytes to the client, so the tunnel would never learn of the end. Shutting the
 * sending side of the tunnel's end of the pair ends that direction too: libmicrohttpd passes
 * on what it still holds both ways, then breaks the pair, which the tunnel reads as the
 * client's end (wire.h). Once only: the pair is libmicrohttpd's to close later, on this
 * thread, after its last read here. */
static ssize_t upgraded_record_recv(struct gw_wire *w, void *buf, size_t len)
{
    ssize_t n = real_record_recv(w->tls, buf, len);

    if (len > 0 && n <= 0 && n != GNUTLS_E_AGAIN && n != GNUTLS_E_INTERRUPTED && w->app_fd >= 0) {
        shutdown(w->app_fd, SHUT_WR);
        w->app_fd = -1;
    }
    return n;
}

bool gw_wire_park(struct gw_wire *w)
{
    w->parking = w->tls == NULL && !w->upgraded && !w->read_shut && !w->ended &&
                 w->head.fault == 0 && w->held_len == 0 && w->head.heads == w->head.messages;
    return w->parking;
}

bool gw_wire_unpark(struct gw_wire *w)
{
    if (!w->parking || w->shut_parking)
        return false;
    w->parking = false;
    return true;
}

bool gw_wire_parking(const struct gw_wire *w)
{
    return w->parking && !w->ended && w->held_len == 0 && w->head.fault == 0;
}

static ssize_t again(void)
{
    errno = EAGAIN;
    return -1;
}

static void shut_read(struct gw_wire *w)
{
    w->read_shut = true;
    shutdown(w->fd, SHUT_RD);
}

/* What the client sent next, as recv() says it: from the socket, or the plaintext of its
 * TLS records. GnuTLS's codes become EAGAIN and EINTR, or -1 with the code in tls_error; the
 * end of a socket whose read side this file shut is an end of stream, not a truncation. A
 * TLS read takes as much as GnuTLS already holds decrypted, up to `len`: libmicrohttpd asks
 * again without polling only when a read filled its buffer, so plaintext left in GnuTLS
 * after a shorter one would wait for the client's next bytes. */
static ssize_t raw_read(struct gw_wire *w, char *buf, size_t len, int flags)
{
    size_t got = 0;
    ssize_t n;

    if (w->tls == NULL) {
        n = recvfrom(w->fd, buf, len, flags, NULL, NULL);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            w->ended = true;
        w->more = n > 0 && (size_t)n == len;
        return n;
    }
    do {
        n = real_record_recv(w->tls, buf + got, len - got);
        if (n > 0)
            got += (size_t)n;
    } while (n > 0 && got < len && gnutls_record_check_pending(w->tls) > 0);
    w->more = n > 0; /* GnuTLS reads a record at a time: the socket may hold the next */
    if (got > 0 || n == 0 || (n == GNUTLS_E_PREMATURE_TERMINATION && w->read_shut))
        return (ssize_t)got;
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
        errno = n == GNUTLS_E_AGAIN ? EAGAIN : EINTR;
        return -1;
    }
    w->tls_error = (int)n;
    errno = EPROTO;
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
        shut_read(w);
    if (ready + give > 0)
        return (ssize_t)(ready + give);
    n = raw_read(w, buf, len, flags);
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
        shut_read(w);
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
        /* Over TLS GnuTLS holds a record's plaintext whole: it cannot be left in the socket. */
        n = raw_read(w, buf, w->tls == NULL ? gw_head_take(&w->head, len) : len, flags);
        return n > 0 ? feed(w, buf, (size_t)n, buf, len, flags) : n;
    }
    /* A head kept back: what follows is read in behind it, as much as libmicrohttpd could
     * take of the two together. */
    if (kept >= room) {
        gw_head_refuse(&w->head, 431, "the request head is larger than this gateway accepts");
        return after_fault(w, buf, 0, len, flags);
    }
    n = raw_read(w, w->held + kept, room - kept, flags);
    return n > 0 ? feed(w, w->held, kept + (size_t)n, buf, len, flags) : n;
}

/* read_checked() over TLS: again while GnuTLS holds plaintext and libmicrohttpd's buffer has
 * room (see raw_read()), since what the reader passed may be shorter than what it read. A
 * head kept back that would not fit the room left stops it (its own call will come: the
 * client's bytes are not all read). */
static ssize_t read_checked_tls(struct gw_wire *w, char *buf, size_t len)
{
    size_t given = 0;
    ssize_t n;

    do {
        n = read_checked(w, buf + given, len - given, 0);
        if (n > 0)
            given += (size_t)n;
    } while ((n > 0 || (n < 0 && errno == EAGAIN)) && given < len && w->head.fault == 0 &&
             w->held_len < len - given && gnutls_record_check_pending(w->tls) > 0);
    return given > 0 ? (ssize_t)given : n;
}

/* After a read that libmicrohttpd takes as draining the socket (event mode; wire.h): if the
 * socket or GnuTLS may hold more, the connection's event comes again at once if it is readable.
 * errno is kept for the caller. */
static void rearm(struct gw_wire *w)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLET,
                             .data.ptr = w->connection};
    int saved = errno;

    if (w->epoll_fd < 0 || !w->more)
        return;
    w->more = false;
    /* libmicrohttpd 0.9.75 registers every connection so (daemon.c, internal_add_connection);
     * a suspended one is out of the set, ENOENT, and resuming it marks it readable anyway. */
    epoll_ctl(w->epoll_fd, EPOLL_CTL_MOD, w->fd, &ev);
    errno = saved;
}

/* libmicrohttpd's reads of client sockets land here (wire.h); all others pass straight to
 * the C library. */
ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    struct gw_wire *w = wire_of_fd(fd);
    ssize_t n;

    /* A TLS connection's socket carries records: GnuTLS reads them here, and its plaintext
     * comes through gnutls_record_recv() below. */
    if (w == NULL || w->tls != NULL || w->upgraded || len == 0)
        return recvfrom(fd, buf, len, flags, NULL, NULL);
    gw_head_read(&w->head);
    n = read_checked(w, buf, len, flags);
    if (n < 0 ? errno == EAGAIN : (size_t)n < len)
        rearm(w);
    return n;
}

/* libmicrohttpd's reads of a TLS client's plaintext land here: the same reader as recv(),
 * with its outcomes in GnuTLS's terms, which libmicrohttpd's recv_tls_adapter() maps back
 * (connection_https.c): EAGAIN and EINTR as GNUTLS_E_AGAIN and _INTERRUPTED, the end of the
 * stream as 0, no memory as GNUTLS_E_MEMORY_ERROR, and GnuTLS's own errors as they were. */
ssize_t gnutls_record_recv(gnutls_session_t session, void *buf, size_t len)
{
    struct gw_wire *w = gw_wire_of_tls(session);
    ssize_t n;

    if (w != NULL && w->upgraded)
        return upgraded_record_recv(w, buf, len);
    if (w == NULL || len == 0)
        return real_record_recv(session, buf, len);
    gw_head_read(&w->head);
    w->tls_error = 0;
    n = read_checked_tls(w, buf, len);
    if (n >= 0)
        return n;
    if (errno == EAGAIN) {
        rearm(w); /* over TLS only this tells libmicrohttpd that the socket is drained */
        return GNUTLS_E_AGAIN;
    }
    if (errno == EINTR)
        return GNUTLS_E_INTERRUPTED;
    if (errno == ENOMEM)
        return GNUTLS_E_MEMORY_ERROR;
    return w->tls_error != 0 ? w->tls_error : GNUTLS_E_PULL_ERROR;
}

/* Every shutdown() in the process lands here: libmicrohttpd's of a parking connection's socket
 * does nothing (wire.h); all others reach the kernel. */
int shutdown(int fd, int how)
{
    struct gw_wire *w = wire_of_fd(fd);

    if (w != NULL && gw_wire_parking(w)) {
        w->shut_parking = true;
        return 0;
    }
    return (int)syscall(SYS_shutdown, fd, how);
}
