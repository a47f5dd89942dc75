/*
 * consumers: the table that turns an API key into the consumer who holds it (config.h,
 * "Consumers and plans").
 *
 * The table holds the SHA-256 digest of each consumer's key, never the key: a request's key is
 * hashed (libsodium's crypto_hash_sha256, well under a microsecond for a key of API-key size)
 * and the digest looked up in an open-addressed table indexed by its first 8 bytes. The digest
 * found there is compared whole in constant time (sodium_memcmp), so neither the time a look-up
 * takes nor which slots it visits depends on how much of a guessed key is right: the slots
 * follow from the digest of the guess, which tells nothing of any held key.
 *
 * Built once per loaded config and then only read, by any number of threads at once, with no
 * lock. 100,000 consumers take about 3 MiB (the digests are in the config; the table holds a
 * 4-byte index per slot, at most half of them used).
 */
#ifndef SLUICE_GATEWAY_CONSUMERS_H
#define SLUICE_GATEWAY_CONSUMERS_H

#include <stddef.h>

#include "config/config.h"

struct gw_consumers;

/* The consumer a key belongs to: its name and the index of its plan in config->plans. */
struct gw_consumer {
    const char *name; /* the config's */
    size_t plan;
};

/* A table of `config`'s consumers, which must outlive it. NULL when memory is short. Freed
 * with gw_consumers_free(). */
struct gw_consumers *gw_consumers_build(const struct config *config);
void gw_consumers_free(struct gw_consumers *consumers);

/* The consumer holding the key of `len` bytes at `key`, or NULL when none does. */
const struct gw_consumer *gw_consumers_find(const struct gw_consumers *consumers, const char *key,
                                            size_t len);

/* By name, for `sluice simulate`, which replays access log lines that name a consumer, never
 * its key: `config`'s consumers sorted by name, each with its plan as gw_consumers_build()
 * finds it. An array of config->n_consumers that the caller frees with free(); NULL when
 * memory is short. */
struct gw_consumer *gw_consumers_by_name(const struct config *config);

/* The consumer called `name` in `sorted` (n of them, from gw_consumers_by_name()), or NULL. */
const struct gw_consumer *gw_consumers_named(const struct gw_consumer *sorted, size_t n,
                                             const char *name);

#endif
