/*
 * listener: the proxy port's listening sockets, and the acceptor that reads the PROXY
 * protocol header before libmicrohttpd sees a connection.
 *
 * sluice binds its listening sockets itself and hands them to libmicrohttpd
 * (MHD_OPTION_LISTEN_SOCKET), so that a bind error says which it was: the address in use, a
 * port below 1024 without the right to it, or an address no interface here has. In event mode
 * each loop's daemon gets a socket of its own on the same port (SO_REUSEPORT).
 *
 * With server.proxy_protocol on, libmicrohttpd listens on nothing: one acceptor thread
 * accepts every connection, closes it at once unless its peer is in proxy_protocol_from, and
 * waits (epoll, edge-triggered) for the header (proxy_header.h) by peeking at what arrived,
 * never consuming a byte past it. Once it is whole the connection goes to a daemon with
 * MHD_add_connection() and the header's source address, which is the client's from then on
 * for keys, exemptions, deny lists, connection caps and X-Forwarded-For. A connection whose
 * header is malformed, of a version not accepted, or not whole within server.client_timeout
 * is closed, and so is the newest one while max_connections headers are already awaited.
 * Closed connections are counted (sluice_proxy_protocol_refused_total) and logged at most
 * once a second.
 */
#ifndef SLUICE_GATEWAY_LISTENER_H
#define SLUICE_GATEWAY_LISTENER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config/config.h"

#define GW_LISTENER_ERR_LEN 512
#define GW_ADDRESS_LEN      64 /* "[v6 address]:port" */

/* A listening socket bound to `where` on `port` (0: any free port), SO_REUSEPORT when
 * `share_port`. The fd (the caller's to close, or libmicrohttpd's once handed over), or -1
 * with `err` filled. */
int gw_listen_socket(const struct config_endpoint *where, uint16_t port, int share_port,
                     char err[GW_LISTENER_ERR_LEN]);

/* The address `fd` is bound to, "127.0.0.1:8080" or "[::1]:8080", into `out`; returns it. The
 * port alone is in *port when `port` is not NULL. */
const char *gw_socket_address(int fd, char out[GW_ADDRESS_LEN], uint16_t *port);

struct gw_acceptor;

/* Hands over a connection whose header has been read: `fd` (non-blocking) and the client's
 * address. Called on the acceptor's thread; the callee owns `fd` from then on. */
typedef void gw_acceptor_hand(void *cls, int fd, const struct sockaddr *addr, socklen_t len);

/* A counter the acceptor adds one to per connection it closed (the metric's). */
typedef void gw_acceptor_refused(void *cls);

/* Starts accepting on `listen_fd` (taken over) for the versions `mode` names (not OFF), from
 * peers in `from` (which must outlive the acceptor). NULL when memory, files or threads are short.
 */
struct gw_acceptor *gw_acceptor_start(int listen_fd, enum config_proxy_protocol mode,
                                      const struct config_cidrs *from, int64_t timeout_ns,
                                      uint32_t max_pending, gw_acceptor_hand *hand,
                                      gw_acceptor_refused *refused, void *cls);

/* Closes the listening socket and every connection whose header is still awaited, and joins
 * the thread. Then gw_acceptor_free(). Either takes NULL. */
void gw_acceptor_stop(struct gw_acceptor *acceptor);
void gw_acceptor_free(struct gw_acceptor *acceptor);

#endif
