/* Denials counted per client; design in client_counts.h. */
#include <stdlib.h>

#include "gateway/ops/client_counts.h"

/* Doubles the table. 0, or -1 when memory is short (the table is as it was). */
static int grow(struct gw_client_counts *c)
{
    size_t cap = c->cap ? c->cap * 2 : 64, i;
    uint64_t *hashes = calloc(cap, sizeof *hashes), *counts = calloc(cap, sizeof *counts);
    const char **names = calloc(cap, sizeof *names);

    if (hashes == NULL || counts == NULL || names == NULL) {
        free(hashes);
        free(counts);
        free(names);
        return -1;
    }
    for (size_t j = 0; j < c->cap; j++)
        if (c->denials[j] > 0) {
            for (i = c->hashes[j] & (cap - 1); counts[i] > 0; i = (i + 1) & (cap - 1))
                ;
            hashes[i] = c->hashes[j];
            counts[i] = c->denials[j];
            names[i] = c->names[j];
        }
    gw_client_counts_free(c);
    c->hashes = hashes;
    c->denials = counts;
    c->names = names;
    c->cap = cap;
    return 0;
}

int gw_client_counts_add(struct gw_client_counts *c, uint64_t hash, uint64_t denials,
                         const char *name)
{
    size_t i;

    if (c->n * 2 >= c->cap) {
        if (c->n >= c->max) {
            c->unnamed += denials;
            return 0;
        }
        if (grow(c) != 0)
            return -1;
    }
    for (i = hash & (c->cap - 1); c->denials[i] > 0 && c->hashes[i] != hash;
         i = (i + 1) & (c->cap - 1))
        ;
    if (c->denials[i] == 0)
        c->n++;
    c->hashes[i] = hash;
    c->denials[i] += denials;
    if (c->names[i] == NULL)
        c->names[i] = name;
    return 0;
}

uint64_t gw_client_counts_get(const struct gw_client_counts *c, uint64_t hash)
{
    for (size_t i = c->cap ? hash & (c->cap - 1) : 0; c->cap > 0 && c->denials[i] > 0;
         i = (i + 1) & (c->cap - 1))
        if (c->hashes[i] == hash)
            return c->denials[i];
    return 0;
}

size_t gw_client_counts_top(const struct gw_client_counts *c, size_t top[GW_CLIENT_COUNTS_TOP])
{
    size_t n = 0;

    for (size_t i = 0; i < c->cap; i++) {
        size_t at;

        if (c->denials[i] == 0)
            continue;
        for (at = n; at > 0 && c->denials[top[at - 1]] < c->denials[i]; at--)
            if (at < GW_CLIENT_COUNTS_TOP)
                top[at] = top[at - 1];
        if (at < GW_CLIENT_COUNTS_TOP)
            top[at] = i;
        if (n < GW_CLIENT_COUNTS_TOP)
            n++;
    }
    return n;
}

void gw_client_counts_free(struct gw_client_counts *c)
{
    free(c->hashes);
    free(c->denials);
    free(c->names);
}
