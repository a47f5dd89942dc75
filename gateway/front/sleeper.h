/*
 * sleeper: requests that wait for an instant (a limit's delay:), all on one thread.
 *
 * A request that waits is set aside as for any wait (its connection suspended on its loop in
 * event mode; its connection's thread blocked in thread_per_connection), and handed here with
 * its client's socket and the instant it may go on. One thread keeps them in a heap by
 * instant and their sockets in an epoll set, watching for the client's leaving (the peer's
 * close or half-close, a reset): it hands each request back when its instant comes, or at
 * once when its client leaves, saying which. So 1,000 waiting requests cost 1,000 heap
 * entries and epoll registrations, and one thread, whatever the mode.
 *
 * Stopping hands every request still waiting back at once (GW_WOKEN_REFUSED).
 */
#ifndef SLUICE_GATEWAY_FRONT_SLEEPER_H
#define SLUICE_GATEWAY_FRONT_SLEEPER_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/core/request.h"

struct gw_sleeper;

/* A sleeper, its thread started with the first request. NULL when memory or descriptors are
 * short. */
struct gw_sleeper *gw_sleeper_new(void);

/* Hands back every request still waiting (GW_WOKEN_REFUSED), and ends the thread; later
 * requests are refused. */
void gw_sleeper_stop(struct gw_sleeper *sleeper);
void gw_sleeper_free(struct gw_sleeper *sleeper);

/* Calls `wake(arg, why)` on the sleeper's thread once: at `until_ns` (limiter_now_ns()'s
 * clock), when the peer of socket `fd` leaves first, or when the sleeper stops. 0, or -1
 * when it cannot (memory, a socket epoll refuses, stopped): `wake` is then never called. */
int gw_sleeper_add(struct gw_sleeper *sleeper, int fd, int64_t until_ns,
                   void (*wake)(void *arg, enum gw_woken why), void *arg);

/* Requests waiting now. */
size_t gw_sleeper_count(struct gw_sleeper *sleeper);

#endif
