/*
 * forward module: an allowed request sent upstream (proxy.h) and its answer streamed back;
 * or, for an upgrade the route allows, the two connections joined (upgrade.h, tunnel.h).
 *
 *   ROUTE    an Upgrade the route lists (HTTP/1.1, Connection naming upgrade) makes the
 *            request an upgrade, which carries no body (400); a Content-Length over
 *            server.max_body is refused (413) before any of it is read.
 *   SEND     a body of known length goes upstream as it arrives: the exchange starts now.
 *   body     each piece into the body's window (body.h) and on upstream; past max_body 413.
 *   CONTENT  the upstream's answer (or its failure: 502, 504), with retries on another
 *            server as the route's retries: say, and the answer's fields without the
 *            hop-by-hop ones; for an upgrade, the 101 and then the tunnel.
 *   log      the upstream's status, time to its head, the last server and its fault.
 *
 * Its YAML keys: upstream, servers, balance, retries, timeout, connect_timeout, proxy, host,
 * strip_prefix, set_headers, remove_headers, upgrades, tunnel_idle_timeout, tls_verify
 * (config/upstream.c, config/forward.c). Its per-route state: the servers, their pools and
 * the retry budget the runtime builds (runtime.h, backends.h).
 *
 * The header list sent upstream is a plain function of the request (upstream_headers.h).
 */
#ifndef SLUICE_GATEWAY_MODULES_FORWARD_H
#define SLUICE_GATEWAY_MODULES_FORWARD_H

#include "gateway/core/module.h"

extern struct gw_module gw_forward_module;

#endif
