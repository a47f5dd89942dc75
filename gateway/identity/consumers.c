#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/identity/consumers.h"

struct gw_consumers {
    const struct config_consumer *config; /* config->consumers */
    struct gw_consumer *found;            /* one per consumer, what a look-up returns */
    uint32_t *slots;                      /* consumer index + 1; 0: empty */
    size_t mask;                          /* slots - 1, a power of two minus one */
};

static size_t slot_of(const unsigned char digest[32], size_t mask)
{
    uint64_t start;

    memcpy(&start, digest, sizeof start);
    return (size_t)start & mask;
}

static int plan_of(const struct config *config, const char *name, size_t *plan)
{
    for (size_t i = 0; i < config->n_plans; i++)
        if (strcmp(config->plans[i].name, name) == 0) {
            *plan = i;
            return 0;
        }
    return -1;
}

struct gw_consumers *gw_consumers_build(const struct config *config)
{
    struct gw_consumers *table = calloc(1, sizeof *table);
    size_t n_slots = 16;

    if (table == NULL)
        return NULL;
    while (n_slots < 2 * config->n_consumers)
        n_slots *= 2;
    table->config = config->consumers;
    table->mask = n_slots - 1;
    table->slots = calloc(n_slots, sizeof *table->slots);
    table->found = calloc(config->n_consumers + 1, sizeof *table->found);
    if (table->slots == NULL || table->found == NULL) {
        gw_consumers_free(table);
        return NULL;
    }
    for (size_t i = 0; i < config->n_consumers; i++) {
        const struct config_consumer *c = &config->consumers[i];
        size_t at = slot_of(c->key_sha256, table->mask);

        table->found[i].name = c->name;
        if (plan_of(config, c->plan, &table->found[i].plan) != 0) {
            gw_consumers_free(table); /* config_load() checked every plan: not reached */
            return NULL;
        }
        while (table->slots[at] != 0)
            at = (at + 1) & table->mask;
        table->slots[at] = (uint32_t)i + 1;
    }
    return table;
}

void gw_consumers_free(struct gw_consumers *table)
{
    if (table == NULL)
        return;
    free(table->slots);
    free(table->found);
    free(table);
}

const struct gw_consumer *gw_consumers_find(const struct gw_consumers *table, const char *key,
                                            size_t len)
{
    unsigned char digest[crypto_hash_sha256_BYTES];

    crypto_hash_sha256(digest, (const unsigned char *)key, len);
    /* Keys are distinct (config_load() refuses two alike), so at most one slot matches. */
    for (size_t at = slot_of(digest, table->mask); table->slots[at] != 0;
         at = (at + 1) & table->mask) {
        uint32_t i = table->slots[at] - 1;

        if (sodium_memcmp(table->config[i].key_sha256, digest, sizeof digest) == 0)
            return &table->found[i];
    }
    return NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct gw_consumer *)a)->name, ((const struct gw_consumer *)b)->name);
}

struct gw_consumer *gw_consumers_by_name(const struct config *config)
{
    struct gw_consumer *sorted = calloc(config->n_consumers + 1, sizeof *sorted);

    for (size_t i = 0; sorted != NULL && i < config->n_consumers; i++) {
        sorted[i].name = config->consumers[i].name;
        if (plan_of(config, config->consumers[i].plan, &sorted[i].plan) != 0) {
            free(sorted); /* config_load() checked every plan: not reached */
            return NULL;
        }
    }
    if (sorted != NULL)
        qsort(sorted, config->n_consumers, sizeof *sorted, by_name);
    return sorted;
}

const struct gw_consumer *gw_consumers_named(const struct gw_consumer *sorted, size_t n,
                                             const char *name)
{
    struct gw_consumer wanted = {name, 0};

    return bsearch(&wanted, sorted, n, sizeof *sorted, by_name);
}
