/*
 * loop: one event loop thread of event mode (server.mode: event).
 *
 * A loop owns one epoll set and waits on it alone. In the set are: the epoll fd of one
 * libmicrohttpd daemon run in external-epoll mode (its own listening socket, sharing the port
 * with the other loops' through SO_REUSEPORT, and its client connections), the sockets of
 * the upstream transfers running on the loop (proxy.h, gw_upstream_loop), an eventfd by
 * which other threads wake it, and the set of connections its owner parked (park.h). Each turn it
 * runs libcurl's due timers, waits for events until the next timer (libcurl's, libmicrohttpd's, or
 * its own tick), hands each event to the transfer it belongs to, and runs the daemon. A request
 * waiting for its upstream has its connection suspended and is resumed on the same loop when the
 * upstream takes a step, so a request never changes thread and nothing on a loop blocks on the
 * network.
 *
 * Every GW_LOOP_TICK_NS, and whenever woken, the loop calls its owner's `tick` on its own
 * thread (housekeeping.c uses it for client deadlines, idle upstream connections, draining and
 * reloads). gw_loop_stop() fails the transfers still running, lets the daemon answer them and
 * joins the thread; the daemon is then the caller's to stop.
 */
#ifndef SLUICE_GATEWAY_LOOP_H
#define SLUICE_GATEWAY_LOOP_H

#include <microhttpd.h>
#include <stdint.h>

#define GW_LOOP_TICK_NS (250 * (int64_t)1000000)

struct gw_loop;
struct gw_upstream_loop;

typedef void gw_loop_tick(void *cls, int64_t now_ns);
typedef void gw_loop_ready(void *cls);

/* A loop, not yet running. NULL when out of memory or file descriptors. */
struct gw_loop *gw_loop_new(void);

/* The upstream side of the loop, for the requests that run on it. */
struct gw_upstream_loop *gw_loop_upstream(struct gw_loop *loop);

/* Before gw_loop_start(): `ready(cls)` runs on the loop's thread, before the daemon, whenever
 * `fd` (an epoll set, level-triggered) is readable. One such fd per loop. 0, or -1. */
int gw_loop_watch(struct gw_loop *loop, int fd, gw_loop_ready *ready, void *cls);

/* Starts the loop's thread on `daemon` (external epoll, MHD_ALLOW_SUSPEND_RESUME). 0, or -1. */
int gw_loop_start(struct gw_loop *loop, struct MHD_Daemon *daemon, gw_loop_tick *tick, void *cls);

/* From any thread: makes the loop tick soon. */
void gw_loop_wake(struct gw_loop *loop);

/* Stops the thread (see above). Then the caller stops the daemon, then frees the loop. */
void gw_loop_stop(struct gw_loop *loop);
void gw_loop_free(struct gw_loop *loop);

#endif
