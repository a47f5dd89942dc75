/*
 * park: event mode's idle keep-alive connections, held outside libmicrohttpd.
 *
 * libmicrohttpd gives each connection one memory pool (front.c sizes it: 52 KiB with the
 * default head limits) and zeroes the whole of it after every request, so a keep-alive
 * connection that has served a request keeps all of it resident while it waits for the next:
 * 10,000 such clients held 546 MiB. An event loop therefore parks a plain-HTTP connection that
 * has been idle for server.park_idle_after with nothing read since its last answer (wire.h): it
 * sets the connection's libmicrohttpd timeout to lapse at once and runs its daemon, which closes
 * its side (pool and all; wire.h keeps libmicrohttpd's shutdown() from reaching the client);
 * the socket, kept open by a duplicate descriptor taken first, then waits in the loop's park,
 * which costs a descriptor and a few dozen bytes. Its first readable event (the next request,
 * or the client's close) takes it out and hands it back to the loop's daemon with
 * MHD_add_connection(). To sluice it is one connection throughout: it stays counted in
 * max_connections, max_connections_per_ip and sluice_connections_active, keeps its address
 * (the PROXY protocol's too) and its deadline (client_timeout from its last answer, after
 * which the loop closes it), and is closed at once when a drain starts.
 *
 * Coming back costs a new libmicrohttpd connection: 30 to 60 µs of CPU more for that request
 * (a fresh pool's page faults and zeroing, the epoll changes; tests/bench/park.sh), hence a
 * default of 5 s rather than at once: a client that sends more often than that never parks.
 *
 * A park belongs to one loop and is used on that loop's thread only. Its descriptor is an
 * epoll set, level-triggered, readable while any parked connection is: the loop watches it
 * (gw_loop_watch()). Parked connections are kept in the order they came, which is the order
 * of their deadlines to within a loop tick.
 */
#ifndef SLUICE_GATEWAY_PARK_H
#define SLUICE_GATEWAY_PARK_H

#include <stddef.h>
#include <stdint.h>

struct gw_park;

/* An empty park; freed with gw_park_free(). NULL when out of memory or descriptors. */
struct gw_park *gw_park_new(void);

/* Frees the park. It must be empty (take everything out first: gw_park_take_expired()). */
void gw_park_free(struct gw_park *park);

/* The epoll set to watch: readable while a parked connection is. */
int gw_park_fd(const struct gw_park *park);

/* The connections parked now. */
size_t gw_park_count(const struct gw_park *park);

/* Parks the socket `fd` until it is readable or `deadline_ns` passes, with `owner` (the
 * caller's state, returned when it is taken out). 0, or -1 (then nothing is kept: `fd` is
 * still the caller's). */
int gw_park_add(struct gw_park *park, int fd, int64_t deadline_ns, void *owner);

/* Takes out a parked connection that is readable: its owner, with its socket in `*fd`, now
 * the caller's. NULL when none is. */
void *gw_park_take_ready(struct gw_park *park, int *fd);

/* Takes out the oldest parked connection whose deadline is at or before `now_ns` (INT64_MAX:
 * any): its owner, with its socket in `*fd`. NULL when none is due. */
void *gw_park_take_expired(struct gw_park *park, int64_t now_ns, int *fd);

#endif
