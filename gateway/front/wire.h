/*
 * wire: every byte libmicrohttpd reads from a client passes through sluice's strict reader
 * (head.h) first.
 *
 * libmicrohttpd reads client sockets with recv() and offers no hook between the socket and
 * its parser. sluice therefore defines recv() itself; the dynamic linker binds
 * libmicrohttpd's calls to it (the binary exports the symbol: see the Makefile). For a socket
 * that gw_wire_attach() registered, the bytes read are fed to that connection's reader and
 * only what it passed comes back to libmicrohttpd: heads whole and rewritten (trailing
 * whitespace gone), bodies as they are. Every other socket (libcurl's to the upstream,
 * hiredis's) is read as if recv() were the C library's, after one array look-up.
 *
 * A head that arrives in pieces is held back here until it is whole, in a buffer allocated
 * for that time only; it must fit server.max_header_size and libmicrohttpd's read buffer
 * (half the connection pool, which front.c sizes to hold it), else 431. Each call hands
 * back at most what it read, so nothing waits here while the socket is drained:
 * libmicrohttpd, which polls before it reads again, would not ask (when it must, after a
 * fault, the read side is shut so that the socket stays readable).
 *
 * When the reader refuses a head, libmicrohttpd is handed a stand-in head instead
 * (GW_WIRE_STAND_IN), so that it calls the request handler, which sees the fault (head.h)
 * and answers with its status and `Connection: close`; what the client sends after the
 * refused head is read and dropped. When it refuses a chunked body halfway, the stream ends
 * there for libmicrohttpd, which closes the connection without an answer (it cannot answer
 * in the middle of a body).
 *
 * TLS: libmicrohttpd reads a TLS client's plaintext with gnutls_record_recv(), and GnuTLS reads
 * the records from the socket with recv(). Both are defined here (the binary exports both), so
 * the socket of a connection attached with its GnuTLS session passes recv() untouched, and
 * its plaintext goes through the reader instead, in gnutls_record_recv(), which calls
 * GnuTLS's own (found with dlsym(RTLD_NEXT)) and gives its outcomes as GnuTLS's codes. The
 * stand-in head and the shut read side work as for plain HTTP: the end of a socket whose read
 * side sluice shut reads as the end of the stream, not as a truncation attack. One thing
 * differs: GnuTLS decrypts a whole record (up to 16 KiB) at a time, and libmicrohttpd, in
 * thread_per_connection, reads again without polling the socket only when a read filled its
 * buffer (recv_tls_adapter() in connection_https.c). What the reader hands over can be less
 * than it read (a head rewritten, or one not yet whole kept back), so a read here goes on
 * while GnuTLS holds plaintext and the buffer has room; and the buffer (front.c sizes it)
 * holds a whole record beside the largest head, so that a head kept back always fits the
 * room left and a read never ends short with plaintext left in GnuTLS, which no poll would
 * announce. (When the buffer is partly full, holding body bytes the request has not taken
 * yet, a pipelined head behind that body can still find too little room: its request waits
 * for the client's next bytes, or client_timeout, in either mode: the plaintext waits in
 * GnuTLS, where neither a poll nor the epoll event below sees it.)
 *
 * Event mode: libmicrohttpd watches a connection in its epoll set edge-triggered, and takes a
 * read that returns less than it asked for (over TLS: GNUTLS_E_AGAIN) as the sign that the
 * socket is drained: it reads again only after the next edge, which comes when more bytes
 * arrive. This file's reads can be short for reasons of its own while the client's next bytes
 * already wait: a head rewritten shorter, the start of a head kept back at the end of a full
 * read, a read capped at max_header_size while a head is kept back, a read capped so that
 * what waits behind a request leaves room for its answer (gw_head_take()), a head split over
 * TLS records. A client that then waits for its answer would wait until client_timeout. So when
 * a read ends so and the socket (or GnuTLS) may hold more, the connection is modified in
 * libmicrohttpd's epoll set with the very event libmicrohttpd registered it with
 * (gw_wire_edge()): the kernel reports it again at once if it is readable.
 *
 * After an upgrade (gw_wire_upgraded()) what follows is not HTTP: plain connections' tunnels
 * read the socket with read(), past this file; a TLS connection's plaintext, which
 * libmicrohttpd itself carries to the tunnel over a socket pair, is passed on unread from then
 * on. One thing is added there: libmicrohttpd 0.9.75 stops reading a TLS client that has
 * ended (close_notify, a FIN alone, a reset) but tells the tunnel nothing, and goes on
 * carrying the tunnel's bytes to the client, so the pair would stay open until
 * tunnel_idle_timeout. The first read that finds the end shuts the sending side of the
 * tunnel's end of the pair: libmicrohttpd then passes on what it holds both ways and breaks
 * the pair, and the tunnel reads the client's end after the client's last byte (tunnel.h).
 *
 * Parking (event mode; park.h): a plain connection idle between requests, whose every byte read
 * so far belonged to requests libmicrohttpd has finished, may be marked parking. While it is,
 * libmicrohttpd's shutdown() of its socket, which would send the client a FIN as libmicrohttpd
 * closes its side, does nothing (sluice defines shutdown() too, for that alone), so that the
 * socket, kept open by a duplicate descriptor, can wait outside libmicrohttpd for the
 * client's next request.
 *
 * A connection is read by one thread at a time (its own thread, or its event loop), so a
 * connection's state needs no lock; the fd table is written when a connection starts and
 * ends, before its first and after its last read.
 */
#ifndef SLUICE_GATEWAY_WIRE_H
#define SLUICE_GATEWAY_WIRE_H

#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/front/head.h"

#define GW_WIRE_STAND_IN "GET / HTTP/1.1\r\nHost: refused.invalid\r\n\r\n"

/* The most plaintext one TLS record carries (RFC 8446 5.1). */
#define GW_WIRE_TLS_RECORD (16 * 1024)

struct gw_wire;

/* Sizes the fd table from RLIMIT_NOFILE. Once, before the first connection. 0, or -1 when
 * memory is short or libmicrohttpd would not call this recv() and gnutls_record_recv(). */
int gw_wire_init(void);
void gw_wire_cleanup(void);

/* Starts reading `fd` (a new client connection) strictly: its bytes, or with `tls` (its
 * GnuTLS session, else NULL) its plaintext; `max_head` and `hold` as for gw_head_init(). NULL when
 * memory is short or the fd is beyond the table (the caller then drops the connection). Freed by
 * gw_wire_detach(), which must come before the fd is closed. */
struct gw_wire *gw_wire_attach(int fd, uint32_t max_head, uint32_t hold, gnutls_session_t tls);
void gw_wire_detach(struct gw_wire *wire);

/* Event mode: libmicrohttpd watches the connection in the epoll set `epoll_fd`, registered
 * edge-triggered with `connection` (its MHD_Connection) as the event's data; see above. */
void gw_wire_edge(struct gw_wire *wire, int epoll_fd, void *connection);

/* The connection attached with the TLS session `tls`, or NULL. */
struct gw_wire *gw_wire_of_tls(gnutls_session_t tls);

/* Keeps `kept` for as long as the connection lasts: `release(kept)` runs when it is detached
 * (or when another thing is kept in its place). */
void gw_wire_keep(struct gw_wire *wire, void *kept, void (*release)(void *kept));

/* The connection on `fd` (if attached) switched protocols: its bytes pass unread from now.
 * `app_fd`: over TLS, the socket libmicrohttpd handed the tunnel (its end of the pair). */
void gw_wire_upgraded(int fd, int app_fd);

/* Marks the connection parking if it can be (see above): plain HTTP, not upgraded, no fault,
 * nothing held back, the client not gone, and every head read passed whole with its body. */
bool gw_wire_park(struct gw_wire *wire);
/* Ends the connection's parking: true when it was parking and libmicrohttpd has not shut its
 * socket since; false when it was not parking, or is being closed for it. */
bool gw_wire_unpark(struct gw_wire *wire);
/* Parking, and still fit to park: nothing was read since gw_wire_park(). */
bool gw_wire_parking(const struct gw_wire *wire);

/* The connection's reader: its counts and its fault, if any (head.h). */
const struct gw_head *gw_wire_head(const struct gw_wire *wire);

#endif
