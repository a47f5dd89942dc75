/*
 * The client table: a bounded, concurrent map from a client's 128-bit key to its state.
 *
 * Layout. The table is split into shards (a power of two, each holding max_clients/shards
 * slots), picked by the key's high word. A shard is an array of 64-byte slots, one cache line
 * each, and a chained hash index: `buckets[hash & mask]` holds a 1-based slot number and each
 * slot's `next` continues the chain (0 ends it). Slots and buckets are mapped lazily, so memory
 * grows with the clients actually seen: about 64 + 8 bytes per client.
 *
 * Locking. Looking up a known client reads the chain without any lock, then takes only that
 * client's slot lock and checks the key again under it. A miss (a new client, or a chain being
 * relinked under the reader's feet) falls back to the shard mutex, which serialises inserts,
 * reclamation and eviction within the shard; it is taken shard first, slot second, never the
 * other way. Slots are never unmapped while the table lives, so a reader holding a stale slot
 * number reads a valid slot, and the check under the slot lock catches a slot reused for
 * another client.
 *
 * Eviction. A full shard scans up to EVICT_SCAN slots from a rotating hand: every slot whose
 * state has become indistinguishable from a fresh client's is reclaimed (lossless); if none
 * is, the least recently used slot of the scan is evicted and counted. With a shard of at most
 * EVICT_SCAN slots this is exact LRU; beyond that it is the sampled LRU Redis uses.
 */
#ifndef SLUICE_LIMITER_TABLE_H
#define SLUICE_LIMITER_TABLE_H

#include <stdatomic.h>
#include <stdint.h>

#include "limiter/limiter.h"
#include "limiter/state.h"

struct client_slot {
    _Atomic uint32_t lock;
    _Atomic uint32_t next;   /* chain link, 1-based; written under the shard mutex */
    _Atomic uint64_t key[2]; /* written under the slot lock, read lock-free by lookups */
    int64_t last_used_ns;    /* for LRU; under the slot lock */
    union client_state state;
    uint32_t occupied; /* under the slot lock */
};

_Static_assert(sizeof(struct client_slot) == 64, "a slot is one cache line");

struct client_table;

/* Creates a table of `max_clients` slots whose states belong to `owner` (its ops decide when a
 * state is idle and free what it owns). NULL with `err` filled when memory is short. Freed
 * with limiter_table_free(). */
struct client_table *limiter_table_create(uint32_t max_clients, const struct limiter *owner,
                                          char err[LIMITER_ERR_LEN]);

/* Releases every state and the table itself. */
void limiter_table_free(struct client_table *table);

/* Returns the slot of `key`, locked, inserting a fresh zeroed state when the client is new
 * (reclaiming or evicting another when the shard is full). Never NULL. The caller must
 * release it with limiter_table_unlock_client(). */
struct client_slot *limiter_table_lock_client(struct client_table *table, const uint64_t key[2],
                                              int64_t now_ns);

/* The slot of `key`, locked, or NULL when the table holds no such client (nothing is
 * inserted). Released with limiter_table_unlock_client(). */
struct client_slot *limiter_table_find_client(struct client_table *table, const uint64_t key[2]);

/* Records the use at `now_ns` and unlocks the slot. */
void limiter_table_unlock_client(struct client_slot *slot, int64_t now_ns);

/* Adds the table's counters to `out`. */
void limiter_table_stats(const struct client_table *table, struct limiter_stats *out);

#endif
