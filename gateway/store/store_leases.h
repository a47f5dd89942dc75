/*
 * store_leases: the leases of the concurrency slots requests hold in Redis.
 *
 * A slot in Redis is a member of a sorted set scored by when its lease runs out (the script,
 * store_script.c): a replica that dies, or loses Redis, with slots held does not hold them for
 * ever, they lapse within limiter.redis.lease. A live request keeps its slots: one thread
 * renews each lease held here a third of that time after it was taken or last renewed (it
 * looks every sixth; one call per request, renewing the request's slots at Redis's clock), so
 * a lease is renewed at most half a lease after the last time, and a renewal lost to one slow
 * call is made up by the next before the lease runs out. Requests that began together are renewed
 * together, others not: the calls follow the requests, not one burst for all. When the request
 * ends, its slots are given back in one call and renewals stop; a renewal crossing that call renews
 * nothing (it only updates members still there). A store that is degraded (store_health.h) is not
 * asked to renew: a request admitted before Redis failed may then outlive its lease, which
 * lets another replica admit one more until Redis is back. When the store stops, every lease
 * still held is given back while its threads can send it.
 */
#ifndef SLUICE_GATEWAY_STORE_LEASES_H
#define SLUICE_GATEWAY_STORE_LEASES_H

#include <stdint.h>

#include "gateway/store/store_health.h"
#include "gateway/store/store_script.h"
#include "gateway/store/store_workers.h"

struct gw_store_leases;
struct gw_store_lease;

/* The renewer of leases lasting `lease_ns`, its calls queued on `workers` under `health`, each
 * given `timeout_ns`. Its thread starts with the first lease. NULL when memory is short. */
struct gw_store_leases *gw_store_leases_new(struct gw_store_workers *workers,
                                            struct gw_store_health *health, int64_t lease_ns,
                                            int64_t timeout_ns);

/* Stops renewing (the thread ends); leases ended later are still given back. */
void gw_store_leases_stop(struct gw_store_leases *leases);
void gw_store_leases_free(struct gw_store_leases *leases);

/* Renews, until gw_store_lease_end(), the slots a decision just took for a request: `renew`,
 * made for GW_STORE_RENEW of the request's concurrency limits (copied). NULL when memory is
 * short: the slots lapse with their lease. */
struct gw_store_lease *gw_store_lease_hold(struct gw_store_leases *leases,
                                           const struct gw_script_args *renew);

/* The request ended: its slots are given back, and its lease is freed. */
void gw_store_lease_end(struct gw_store_leases *leases, struct gw_store_lease *lease);

/* Leases held now. */
uint64_t gw_store_leases_held(const struct gw_store_leases *leases);

#endif
