/*
 * offload: a small set of threads for the blocking calls an event loop must not make.
 *
 * In event mode a loop thread serves many connections, so it never waits on the network
 * itself; the Redis store's calls (store.h: hiredis, blocking, bounded by limiter.redis's
 * timeout) are handed here instead. A job is queued, one of GW_OFFLOAD_THREADS threads runs it,
 * and the job itself tells its loop (the request resumes its connection and wakes the loop;
 * request.c). The queue is a list under one mutex; the threads sleep on a condition variable
 * while it is empty. The threads share the store's connection pool, so as many calls can be
 * under way at once as there are threads.
 *
 * (hiredis's asynchronous API on each loop was the alternative: no hand-off, but a second
 * implementation of the store's pool, backoff and script handling beside the blocking one
 * that thread_per_connection keeps.)
 */
#ifndef SLUICE_GATEWAY_OFFLOAD_H
#define SLUICE_GATEWAY_OFFLOAD_H

#define GW_OFFLOAD_THREADS 4

struct gw_offload;

struct gw_offload_job {
    void (*run)(struct gw_offload_job *job); /* on one of the threads */
    struct gw_offload_job *next;
};

/* The threads, started. NULL when they cannot be. Stopped and freed with gw_offload_free(),
 * after the last job was queued; jobs still queued are run first. */
struct gw_offload *gw_offload_new(void);
void gw_offload_free(struct gw_offload *offload);

/* Queues `job` (which must live until its run() returns). */
void gw_offload_queue(struct gw_offload *offload, struct gw_offload_job *job);

#endif
