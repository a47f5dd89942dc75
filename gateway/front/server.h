/*
 * server: sluice's two HTTP fronts on libmicrohttpd. The proxy port is served in one of two
 * modes (server.mode); the admin port, when set, serves GET /metrics, /healthz and /readyz
 * from one polling thread and never proxies, and, with an admin token, a client's quota
 * looked at and changed (GET and DELETE /quota, POST /quota/grant: modules/limit/quota.h),
 * each call checked against the token of the runtime current at the time, so that a reload
 * rotates it. That thread waits on the shared store for an operator's call (at most
 * limiter.redis.timeout); no request waits on it.
 *
 * thread_per_connection: one daemon gives each client connection a thread (max_connections
 * of them); a reaper thread enforces client_timeout and prunes idle upstream connections.
 *
 * event: server.workers loops (loop.h), each with a daemon of its own in external-epoll mode
 * on the same port (SO_REUSEPORT), its own idle upstream connections and its own metrics
 * shard; each loop's tick enforces client_timeout for its connections and parks the plain
 * ones idle since their last answer outside its daemon (park.h). max_connections and
 * max_connections_per_ip are counted across the loops (admission.h); the Redis store is asked
 * from a few threads of its own (offload.h) so that no loop waits on it.
 *
 * TLS (server.tls): every client daemon of either mode speaks TLS (MHD_USE_TLS) with the
 * config's priority string, and asks certs.h for each handshake's certificate, so a reload
 * swaps certificates without touching a daemon; a TLS client's plaintext is read strictly as
 * plain HTTP is (wire.h). The admin port stays plain HTTP. Turning TLS on or off, and its
 * versions and ciphers, take effect on restart.
 *
 * Both modes run the same request code (request.h), which is written against the asynchronous
 * upstream interface (proxy.h): in thread_per_connection a wait blocks the connection's thread,
 * in event mode it suspends the connection until the loop tells it of the upstream's next step.
 *
 * libmicrohttpd hands over each request's raw URI first (kept byte for byte for forwarding):
 * that is when the request takes a reference to the current runtime (runtime.h), which it
 * keeps to the end. Per-request state lives in libmicrohttpd's req_cls and is freed in the
 * completion callback (request.h); per-connection state in the connection's socket context. A
 * reload swaps the current runtime under a mutex held for that pointer alone; a loop takes the
 * new one when the generation counter moves, without the mutex on its request path.
 *
 * The server's files, one concept each, are listed in server_private.h.
 */
#ifndef SLUICE_GATEWAY_SERVER_H
#define SLUICE_GATEWAY_SERVER_H

#include <stdint.h>

#include "config/config.h"

#define GW_ERR_LEN 512

struct gw_server;

/* Builds the runtime for `config` (which it takes over) and starts listening on
 * server.listen, and on server.admin_listen when set. Returns the server, or NULL with the
 * reason in `err`. */
struct gw_server *gw_server_start(struct config *config, char err[GW_ERR_LEN]);

/* The version of libmicrohttpd this process runs with (static), for sluice_build_info. */
const char *gw_server_library_version(void);

/* The ports actually bound (useful when the config says port 0); admin is 0 when off. */
uint16_t gw_server_port(const struct gw_server *server);
uint16_t gw_server_admin_port(const struct gw_server *server);

/* The addresses bound, "127.0.0.1:8080" or "[::1]:8080", owned by the server; the admin one
 * is NULL when off. */
const char *gw_server_address(const struct gw_server *server);
const char *gw_server_admin_address(const struct gw_server *server);

/* Runs `config` (taken over) from now on: requests already started finish on the old one.
 * Settings that need a restart are logged and keep their running values. 0, or -1 with
 * `err` filled (then nothing changed). Counted in sluice_config_reloads_total. Call from
 * one thread only. */
int gw_server_reload(struct gw_server *server, struct config *config, char err[GW_ERR_LEN]);

/* Counts a reload that failed before reaching the server (an invalid file). */
void gw_server_reload_failed(struct gw_server *server);

/* Stops accepting connections, fails /readyz, and waits up to server.drain_timeout for
 * requests in flight to end. Returns how many were still running. */
unsigned gw_server_drain(struct gw_server *server);

/* Closes every connection and frees the server. */
void gw_server_stop(struct gw_server *server);

#endif
