/*
 * store_workers: the Redis store's own threads, each with one connection to Redis of its own,
 * and the queue of calls (store_call.h) they answer. Nothing else runs on them, so the store
 * never waits behind other work (event mode's upgrades have threads of their own).
 *
 * Both serving modes queue their calls here. A thread takes every queued call, up to
 * GW_STORE_BATCH at a time, finishes those whose deadline has passed as failures (they waited
 * too long for a thread: on_store_error decides them, and the store counts each), and sends
 * the rest to Redis as one pipeline (all the EVALSHAs written, then all the answers read), the
 * socket's every wait bounded by the time left before the earliest of their deadlines. So a
 * call's whole wait, queue included, is bounded by limiter.redis.timeout, and a slow Redis
 * costs one round trip per batch rather than per request: with Redis answering in 20 ms, four
 * threads answer up to 4 * 64 calls per 20 ms instead of 4.
 *
 * Connections: one per thread, opened on first use (AUTH and SELECT as configured) and kept;
 * so the gateway holds GW_STORE_THREADS connections to Redis in both modes, however many
 * clients ask at once. A connection is dropped when it fails, and one opened before the store
 * last degraded (store_health.h) is replaced before its next use: whatever broke one most
 * likely broke the others. A connection that was kept idle and fails on first use (Redis, or
 * something between, closed it) says nothing of Redis, so the batch is sent once more on a
 * fresh one, within the time its calls have left; a timeout is never tried again.
 *
 * Redis forgets the script on restart: a NOSCRIPT answer loads it (SCRIPT LOAD) and sends
 * those calls again, within the same time.
 */
#ifndef SLUICE_GATEWAY_STORE_WORKERS_H
#define SLUICE_GATEWAY_STORE_WORKERS_H

#include <stdint.h>

#include "store_call.h"
#include "store_health.h"

#define GW_STORE_THREADS 4
#define GW_STORE_BATCH   64

/* Where and how the threads connect (the store's; it outlives the threads). */
struct gw_store_redis {
    const char *host;
    int port;
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
