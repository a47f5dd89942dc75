/*
 * tunnel: the two connections of an upgraded request (a WebSocket, say) joined both ways,
 * byte for byte, until both have ended, or the tunnel was idle for its route's
 * tunnel_idle_timeout, or the gateway stops.
 *
 * One thread runs every tunnel, in both serving modes, with one epoll set: a tunnel is a long
 * stream of small messages, and the requests' own threads and loops are then free of it (in
 * thread_per_connection the connection's thread ends at the upgrade, so an open tunnel costs
 * no thread). Each direction has a buffer of its own (GW_TUNNEL_BUFFER): while it holds bytes
 * the receiving side is written to and the sending side not read, so a slow reader holds the
 * writer back through TCP and a tunnel's memory is flat. The client's socket is read with
 * read(), past the strict HTTP reader (wire.h), since what follows an upgrade is not HTTP; the
 * upstream's through libcurl (curl_easy_recv and curl_easy_send), which keeps TLS working.
 *
 * Ends: when one side has ended its sending (end of file) and everything it sent was passed
 * on, the other side's sending direction is shut too (a half close; on a TLS upstream the
 * upstream's connection stays until it ends), and the tunnel closes once both have ended. A
 * TLS client's bytes come through libmicrohttpd over a socket pair, and libmicrohttpd passes
 * on no half close either way (0.9.75), so such a tunnel closes when either side has ended
 * and its bytes were passed on:
 *   - the upstream ended: the client, waiting for the end of the stream, would otherwise wait
 *     for its own timeout;
 *   - the client ended (close_notify, a FIN alone, or a reset): the strict reader's TLS read
 *     sees it and has libmicrohttpd break the pair once it has passed on what it holds
 *     (wire.h), so the end of the pair comes after the client's last byte. The upstream gets
 *     those bytes, then its half close (a FIN, as over plain HTTP), then the close. What the
 *     upstream sends meanwhile can no longer reach the client and is dropped.
 * A client that vanishes without a packet (its host lost, a cable pulled) is seen by neither
 * TCP nor libmicrohttpd: the route's tunnel_idle_timeout ends its tunnel. A failure of either
 * side closes the tunnel at once. Closing releases the upstream connection and hands the
 * client's socket back (the `closed` callback, on the tunnels' thread), whose owner
 * (libmicrohttpd) closes it.
 */
#ifndef SLUICE_GATEWAY_TUNNEL_H
#define SLUICE_GATEWAY_TUNNEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/upstream/upgrade.h"

#define GW_TUNNEL_BUFFER (16 * 1024)

struct gw_tunnels;

struct gw_tunnel_spec {
    int client_fd;               /* the client's socket, which its owner closes after `closed` */
    struct gw_upgrade *upstream; /* its connection and early bytes are taken over */
    bool upstream_tls;           /* no half close toward it */
    bool client_tls;             /* nor toward the client: either side's end ends the tunnel */
    const char *client_early;    /* bytes the client sent after its request, for the upstream */
    size_t client_early_len;
    int64_t idle_timeout_ns;
    _Atomic int64_t *gauge; /* counts the tunnel while it is open (sluice_tunnels_open) */
    void (*closed)(void *cls);
    void *closed_cls;
};

/* Starts the tunnels' thread. NULL when it cannot. */
struct gw_tunnels *gw_tunnels_new(void);

/* Joins `spec`'s two connections. 0; or -1 when memory is short, and then nothing was taken
 * over (the caller still holds the upstream connection and the client's socket). */
int gw_tunnel_open(struct gw_tunnels *tunnels, const struct gw_tunnel_spec *spec);

/* Tunnels open now. */
size_t gw_tunnels_count(struct gw_tunnels *tunnels);

/* Closes every tunnel (the end of a drain); returns at once, the closing follows. */
void gw_tunnels_close_all(struct gw_tunnels *tunnels);

/* Closes every tunnel and stops the thread; gw_tunnel_open() refuses from then on (its caller
 * closes the connections), so upgrades still finishing as the gateway stops are safe. */
void gw_tunnels_stop(struct gw_tunnels *tunnels);

/* gw_tunnels_stop(), then frees; once nothing can call gw_tunnel_open() any more. */
void gw_tunnels_free(struct gw_tunnels *tunnels);

#endif
