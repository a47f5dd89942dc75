/*
 * offload: a small set of threads for the blocking calls an event loop must not make: the
 * upstream's side of an upgrade (upgrade.h: connect, send the request, read the answer's
 * head, bounded by the route's timeout).
 *
 * In event mode a loop thread serves many connections, so it never waits on the network
 * itself. A job is queued, one of GW_OFFLOAD_THREADS threads runs it, and the job itself
 * tells its loop (the request resumes its connection and wakes the loop; request.c). The
 * queue is a list under one mutex; the threads sleep on a condition variable while it is
 * empty.
 *
 * The Redis store does not use these threads: it has its own (store.h), so upgrades to a slow
 * upstream, which may hold all four for a route's timeout, never delay a decision in Redis.
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
