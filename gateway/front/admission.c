/* Connection caps across event loops; design in admission.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/front/admission.h"

#define BUCKETS 4096 /* a power of two */

struct peer_count {
    struct gw_addr addr;
    uint32_t count;
    struct peer_count *next;
};

struct gw_admission {
    pthread_mutex_t lock;
    uint32_t max_total, max_per_ip, total;
    struct peer_count *buckets[BUCKETS];
};

struct gw_admission *gw_admission_new(uint32_t max_total, uint32_t max_per_ip)
{
    struct gw_admission *a = calloc(1, sizeof *a);

    if (a == NULL)
        return NULL;
    pthread_mutex_init(&a->lock, NULL);
    a->max_total = max_total;
    a->max_per_ip = max_per_ip;
    return a;
}

void gw_admission_free(struct gw_admission *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < BUCKETS; i++)
        while (a->buckets[i] != NULL) {
            struct peer_count *entry = a->buckets[i];

            a->buckets[i] = entry->next;
            free(entry);
        }
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* FNV-1a over the address: the table is keyed by addresses clients choose, but a chain only
 * costs its own clients' connect time, under a lock held per connection. */
static size_t bucket_of(const struct gw_addr *addr)
{
    uint32_t hash = 2166136261u;

    for (size_t i = 0; i < sizeof addr->bytes; i++)
        hash = (hash ^ addr->bytes[i]) * 16777619u;
    return (hash ^ (uint32_t)addr->family) & (BUCKETS - 1);
}

static struct peer_count **find(struct gw_admission *a, const struct gw_addr *addr)
{
    struct peer_count **at = &a->buckets[bucket_of(addr)];

    while (*at != NULL && !((*at)->addr.family == addr->family &&
                            memcmp((*at)->addr.bytes, addr->bytes, sizeof addr->bytes) == 0))
        at = &(*at)->next;
    return at;
}

int gw_admission_enter(struct gw_admission *a, const struct gw_addr *peer)
{
    struct peer_count **at = NULL;
    int rc = -1;

    pthread_mutex_lock(&a->lock);
    if (a->total >= a->max_total)
        goto out;
    if (peer != NULL && a->max_per_ip > 0) {
        at = find(a, peer);
        if (*at != NULL && (*at)->count >= a->max_per_ip)
            goto out;
        if (*at == NULL) {
            *at = calloc(1, sizeof **at);
            if (*at == NULL)
                goto out;
            (*at)->addr = *peer;
        }
        (*at)->count++;
    }
    a->total++;
    rc = 0;
out:
    pthread_mutex_unlock(&a->lock);
    return rc;
}

void gw_admission_leave(struct gw_admission *a, const struct gw_addr *peer)
{
    struct peer_count **at, *entry;

    pthread_mutex_lock(&a->lock);
    a->total--;
    if (peer != NULL && a->max_per_ip > 0) {
        at = find(a, peer);
        entry = *at;
        if (entry != NULL && --entry->count == 0) {
            *at = entry->next;
            free(entry);
        }
    }
    pthread_mutex_unlock(&a->lock);
}
