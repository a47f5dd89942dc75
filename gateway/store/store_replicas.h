/*
 * store_replicas: the replicas sharing the store, counted in Redis (limiter.replicas: auto),
 * so that the local fallback of on_store_error divides each quota by the replicas really
 * serving, however an autoscaler changes them.
 *
 * Each replica announces itself once a second, under a random id of its own, in one sorted set
 * (PREFIX "replicas"), each member scored by when it lapses (GW_STORE_BEAT_TTL_NS later): one
 * call of the store's script (GW_STORE_BEAT) adds it, drops the lapsed and answers how many are
 * left. A replica that stops (or dies) drops out within the lapse. While the store is
 * degraded no beat is sent, and the last count is kept: the fallback divides by the replicas
 * there were when Redis was last seen.
 */
#ifndef SLUICE_GATEWAY_STORE_REPLICAS_H
#define SLUICE_GATEWAY_STORE_REPLICAS_H

#include <stdint.h>

#define GW_STORE_BEAT_NS     1000000000LL /* between beats */
#define GW_STORE_BEAT_TTL_NS 3000000000LL /* a replica missing three beats is gone */

struct gw_store;
struct gw_store_replicas;

/* Starts beating for `store` (which outlives it). NULL when memory or a thread is short. */
struct gw_store_replicas *gw_store_replicas_start(struct gw_store *store);

/* The replicas alive at the last beat answered, this one among them; 0 before any answer. */
uint32_t gw_store_replicas_alive(const struct gw_store_replicas *replicas);

/* Stops beating (the set forgets this replica within GW_STORE_BEAT_TTL_NS), once; the count
 * stays readable until gw_store_replicas_free(). Both take NULL. */
void gw_store_replicas_stop(struct gw_store_replicas *replicas);
void gw_store_replicas_free(struct gw_store_replicas *replicas);

#endif
