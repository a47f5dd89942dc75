/*
 * store_sentinel: where the master is, asked of Redis Sentinel (limiter.redis.sentinels and
 * master), for a store thread about to connect (store_workers.h).
 *
 * The sentinels are asked in the order the config gives them, each with SENTINEL
 * get-master-addr-by-name MASTER (after AUTH when sentinel_password is set), and the first
 * that answers with an address is taken; each wait (resolving a sentinel's name, connecting,
 * asking) is bounded by the call's deadline. The thread then connects to that address and
 * checks with ROLE that it is the master before it writes anything: a sentinel's view may be
 * a moment old, and sluice never writes to a replica.
 *
 * A failover is followed without a notice of its own: the old master, demoted, answers a
 * script's writes with READONLY, or the connection to it breaks; either fails the calls under
 * way, so the store degrades (store_health.h), and the call that probes it opens a new
 * connection, which asks the sentinels again. Until then on_store_error decides; the gap is
 * the sentinels' failover time plus at most the store's backoff (5 s).
 */
#ifndef SLUICE_GATEWAY_STORE_SENTINEL_H
#define SLUICE_GATEWAY_STORE_SENTINEL_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/store/store_resolve.h"
#include "gateway/store/store_workers.h"

/* The master's address into `host` and `*port`, asked of `redis`'s sentinels by `deadline_ns`,
 * each sentinel's name resolved through lookups[i] (as gw_store_resolve(); the caller's, one
 * per sentinel, freed with gw_store_lookup_end()). 0; or -1 with a sentence in `why` (each
 * sentinel's trouble, the last one's), `*timed_out` when the deadline passed. */
int gw_store_sentinel_master(const struct gw_store_redis *redis, struct gw_store_lookup **lookups,
                             int64_t deadline_ns, char host[INET6_ADDRSTRLEN + 1], int *port,
                             bool *timed_out, char *why, size_t why_len);

#endif
