/*
 * store_workers: the Redis store's own threads, each with one connection to Redis of its own,
 * and the queue of calls (store_call.h) they answer. Nothing else runs on them, so the store
 * never waits behind other work (event mode's upgrades have threads of their own).
 *
 * Both serving modes queue their calls here. A thread takes what is queued and sends it on its
 * connection at once, behind whatever it already has under way there (up to
 * GW_STORE_IN_FLIGHT calls): Redis answers in order, so each answer goes to the oldest call
 * still waiting. Meanwhile the thread waits for Redis and for more calls together (poll on the
 * socket and an eventfd the queue writes when no thread is idle), so a call is sent the moment
 * it is queued even while Redis is slow, and pays one round trip, not a place in a line. With
 * every answer 20 ms late, four threads doing one call at a time capped the gateway at 188
 * requests a second; this way the cap is Redis's own speed.
 *
 * Deadlines: a call that waited in the queue past its deadline is not sent (it fails: on_store_
 * error decides it, and the store counts it); every wait on the socket (connecting, sending,
 * answers) ends at the earliest deadline of the calls under way. When that passes with its
 * answer still missing, Redis is slow: every call under way on that connection fails and the
 * connection is dropped (its late answers cannot be told apart).
 *
 * Connections: one per thread, opened when the thread first has a call to send (AUTH, SELECT,
 * SCRIPT LOAD as needed; with sentinels, to the master they name, checked with ROLE:
 * store_sentinel.h) and kept; so the gateway holds GW_STORE_THREADS connections to Redis
 * in both modes, however many clients ask at once. One opened before the store last degraded
 * (store_health.h) is replaced before it is used again: whatever broke one connection most
 * likely broke the others. When a connection breaks (a kept one that Redis, or something
 * between, closed while it was idle says nothing of Redis), each call under way on it is
 * queued again once, with the time it has left; a timeout is never tried again.
 *
 * Redis forgets the script on restart: a NOSCRIPT answer sends SCRIPT LOAD and then the call
 * again, once, on the same connection, within the same time.
 */
#ifndef SLUICE_GATEWAY_STORE_WORKERS_H
#define SLUICE_GATEWAY_STORE_WORKERS_H

#include <stdint.h>

#include "config/config.h"
#include "gateway/store/store_call.h"
#include "gateway/store/store_health.h"

#define GW_STORE_THREADS   4
#define GW_STORE_IN_FLIGHT 256 /* calls under way on one connection */

/* Where and how the threads connect (the store's; it outlives the threads). */
struct gw_store_redis {
    const char *host; /* without sentinels */
    int port;
    const struct config_endpoint *sentinels; /* Sentinel's, asked for the master: NULL: none */
    size_t n_sentinels;
    const char *master, *sentinel_password;
    const char *password; /* NULL: none */
    uint32_t db;
    int64_t timeout_ns;
};

struct gw_store_workers;

/* The queue, its threads started with the first call. NULL when memory is short. Both
 * arguments must outlive it. Freed with gw_store_workers_free(). */
struct gw_store_workers *gw_store_workers_new(const struct gw_store_redis *redis,
                                              struct gw_store_health *health);
void gw_store_workers_free(struct gw_store_workers *workers);

/* Queues `call`, which is then the threads' (one of them finishes it). -1 when the threads
 * are stopped or none could start: the call is still the caller's. */
int gw_store_workers_queue(struct gw_store_workers *workers, struct gw_store_call *call);

/* Stops the threads once every call queued so far is finished; later calls are refused. */
void gw_store_workers_stop(struct gw_store_workers *workers);

#endif
