/* The bounded concurrent client table; the design is in table.h. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "limiter/algorithm.h"
#include "limiter/table.h"

#define SLOTS_PER_SHARD_MIN 1024 /* below this many slots per shard, use fewer shards */
#define MAX_SHARDS          256
#define EVICT_SCAN          64 /* slots examined per eviction */
#define MAX_CHAIN_STEPS     64 /* a longer lock-free walk gives up and takes the shard mutex */
#define SPINS_BEFORE_YIELD  128

struct shard {
    pthread_mutex_t mutex;
    struct client_slot *slots; /* `capacity` slots, numbered from 1 */
    _Atomic uint32_t *buckets; /* bucket_mask + 1 chain heads */
    uint32_t capacity;
    uint32_t bucket_mask;
    uint32_t never_used; /* slots past this were never handed out */
    uint32_t free_head;  /* reclaimed slots, linked through `next` */
    uint32_t hand;       /* where the next eviction scan starts */
    _Atomic uint64_t clients, reclaimed, evictions;
};

struct client_table {
    const struct limiter *owner;
    uint32_t shard_mask;
    struct client_slot *slot_memory;
    size_t slot_bytes;
    _Atomic uint32_t *bucket_memory;
    struct shard shards[];
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* A test-and-test-and-set lock. Critical sections are a few dozen instructions, but with a
 * thread per connection the holder may be preempted, so a waiter yields its core after a short
 * spin instead of burning the holder's time slice. */
static void slot_lock(struct client_slot *slot)
{
    unsigned spins = 0;

    while (atomic_exchange_explicit(&slot->lock, 1, memory_order_acquire) != 0) {
        while (atomic_load_explicit(&slot->lock, memory_order_relaxed) != 0) {
            if (++spins < SPINS_BEFORE_YIELD)
                cpu_relax();
            else
                sched_yield();
        }
    }
}

static void slot_unlock(struct client_slot *slot)
{
    atomic_store_explicit(&slot->lock, 0, memory_order_release);
}

static bool key_matches(struct client_slot *slot, const uint64_t key[2])
{
    return atomic_load_explicit(&slot->key[0], memory_order_relaxed) == key[0] &&
           atomic_load_explicit(&slot->key[1], memory_order_relaxed) == key[1];
}

static uint32_t round_up_pow2(uint32_t n)
{
    uint32_t p = 1;

    while (p < n)
        p <<= 1;
    return p;
}

struct client_table *limiter_table_create(uint32_t max_clients, const struct limiter *owner,
                                          char err[LIMITER_ERR_LEN])
{
    uint32_t n_shards = 1, buckets_per_shard, first = 0;
    struct client_table *table;

    while (n_shards < MAX_SHARDS && max_clients / (n_shards * 2) >= SLOTS_PER_SHARD_MIN)
        n_shards *= 2;
    /* Load factor at most 1: every shard gets as many buckets as its largest capacity. */
    buckets_per_shard = round_up_pow2(max_clients / n_shards + 1);

    table = calloc(1, sizeof *table + n_shards * sizeof table->shards[0]);
    if (table == NULL)
        goto oom;
    table->owner = owner;
    table->shard_mask = n_shards - 1;
    for (uint32_t i = 0; i < n_shards; i++)
        pthread_mutex_init(&table->shards[i].mutex, NULL);
    /* Anonymous mappings are zeroed and backed only where touched, so an empty table costs
     * address space, not memory. */
    table->slot_bytes = (size_t)max_clients * sizeof(struct client_slot);
    table->slot_memory =
        mmap(NULL, table->slot_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (table->slot_memory == MAP_FAILED) {
        table->slot_memory = NULL;
        goto oom;
    }
    table->bucket_memory = calloc((size_t)n_shards * buckets_per_shard, sizeof(uint32_t));
    if (table->bucket_memory == NULL)
        goto oom;

    for (uint32_t i = 0; i < n_shards; i++) {
        struct shard *s = &table->shards[i];

        s->capacity = max_clients / n_shards + (i < max_clients % n_shards);
        s->slots = table->slot_memory + first;
        s->buckets = table->bucket_memory + (size_t)i * buckets_per_shard;
        s->bucket_mask = buckets_per_shard - 1;
        first += s->capacity;
    }
    return table;

oom:
    limiter_set_error(err, "out of memory for a table of %u clients", max_clients);
    limiter_table_free(table);
    return NULL;
}

void limiter_table_free(struct client_table *table)
{
    void (*release)(union client_state *);

    if (table == NULL)
        return;
    release = table->owner->ops->release;
    for (uint32_t i = 0; i <= table->shard_mask; i++) {
        struct shard *s = &table->shards[i];

        for (uint32_t n = 0; n < s->never_used; n++)
            if (s->slots[n].occupied && release != NULL)
                release(&s->slots[n].state);
        pthread_mutex_destroy(&s->mutex);
    }
    if (table->slot_memory != NULL)
        munmap(table->slot_memory, table->slot_bytes);
    free(table->bucket_memory);
    free(table);
}

static _Atomic uint32_t *bucket_of(struct shard *s, const uint64_t key[2])
{
    return &s->buckets[key[0] & s->bucket_mask];
}

/* Walks the key's chain for at most `max_steps` slots and returns the key's slot locked, or
 * NULL. Safe without the shard mutex: every slot number read is valid, and the key is checked
 * again under the slot lock. Under the mutex chains hold still, so a NULL is a true miss. */
static struct client_slot *find_and_lock(struct shard *s, const uint64_t key[2], uint32_t max_steps)
{
    uint32_t n = atomic_load_explicit(bucket_of(s, key), memory_order_acquire);

    for (uint32_t steps = 0; n != 0 && steps < max_steps; steps++) {
        struct client_slot *slot = &s->slots[n - 1];

        if (key_matches(slot, key)) {
            slot_lock(slot);
            if (slot->occupied && key_matches(slot, key))
                return slot;
            slot_unlock(slot);
            return NULL;
        }
        n = atomic_load_explicit(&slot->next, memory_order_acquire);
    }
    return NULL;
}

/* Removes slot number `n` (locked by the caller) from its chain and frees its state. The slot
 * keeps its `next`, so a reader standing on it still reaches the rest of the chain. Shard
 * mutex held. */
static void unlink_slot(struct client_table *t, struct shard *s, uint32_t n)
{
    struct client_slot *slot = &s->slots[n - 1];
    uint64_t key[2] = {atomic_load_explicit(&slot->key[0], memory_order_relaxed),
                       atomic_load_explicit(&slot->key[1], memory_order_relaxed)};
    _Atomic uint32_t *link = bucket_of(s, key);

    while (atomic_load_explicit(link, memory_order_relaxed) != n)
        link = &s->slots[atomic_load_explicit(link, memory_order_relaxed) - 1].next;
    atomic_store_explicit(link, atomic_load_explicit(&slot->next, memory_order_relaxed),
                          memory_order_release);

    if (t->owner->ops->release != NULL)
        t->owner->ops->release(&slot->state);
    memset(&slot->state, 0, sizeof slot->state);
    atomic_store_explicit(&slot->key[0], 0, memory_order_relaxed);
    atomic_store_explicit(&slot->key[1], 0, memory_order_relaxed);
    slot->occupied = 0;
    atomic_fetch_sub_explicit(&s->clients, 1, memory_order_relaxed);
}

static void push_free(struct shard *s, uint32_t n)
{
    atomic_store_explicit(&s->slots[n - 1].next, s->free_head, memory_order_release);
    s->free_head = n;
}

/* Frees room in a full shard: reclaims every idle state in the scan, or else evicts the least
 * recently used one seen. Shard mutex held. */
static void make_room(struct client_table *t, struct shard *s, int64_t now_ns)
{
    uint32_t scan = s->capacity < EVICT_SCAN ? s->capacity : EVICT_SCAN;
    uint32_t lru = 0;
    int64_t lru_used_ns = INT64_MAX;

    for (uint32_t i = 0; i < scan; i++) {
        uint32_t n = s->hand + 1;
        struct client_slot *slot = &s->slots[s->hand];

        s->hand = (s->hand + 1) % s->capacity;
        slot_lock(slot);
        if (t->owner->ops->idle_at(t->owner, &slot->state) <= now_ns) {
            unlink_slot(t, s, n);
            push_free(s, n);
            atomic_fetch_add_explicit(&s->reclaimed, 1, memory_order_relaxed);
        } else if (slot->last_used_ns < lru_used_ns) {
            lru = n;
            lru_used_ns = slot->last_used_ns;
        }
        slot_unlock(slot);
    }
    if (s->free_head != 0)
        return;

    slot_lock(&s->slots[lru - 1]);
    unlink_slot(t, s, lru);
    slot_unlock(&s->slots[lru - 1]);
    push_free(s, lru);
    atomic_fetch_add_explicit(&s->evictions, 1, memory_order_relaxed);
}

/* A free slot number for a new client. Shard mutex held. */
static uint32_t take_slot(struct client_table *t, struct shard *s, int64_t now_ns)
{
    uint32_t n;

    if (s->free_head == 0 && s->never_used < s->capacity)
        return ++s->never_used;
    if (s->free_head == 0)
        make_room(t, s, now_ns);
    n = s->free_head;
    s->free_head = atomic_load_explicit(&s->slots[n - 1].next, memory_order_relaxed);
    return n;
}

struct client_slot *limiter_table_lock_client(struct client_table *table, const uint64_t key[2],
                                              int64_t now_ns)
{
    struct shard *s = &table->shards[key[1] & table->shard_mask];
    struct client_slot *slot = find_and_lock(s, key, MAX_CHAIN_STEPS);
    _Atomic uint32_t *bucket;
    uint32_t n;

    if (slot != NULL)
        return slot;

    /* New client, or a lookup that lost a race with relinking: search again where no chain
     * can change, and insert if still missing. */
    pthread_mutex_lock(&s->mutex);
    slot = find_and_lock(s, key, UINT32_MAX);
    if (slot == NULL) {
        n = take_slot(table, s, now_ns);
        slot = &s->slots[n - 1];
        bucket = bucket_of(s, key);
        slot_lock(slot);
        atomic_store_explicit(&slot->key[0], key[0], memory_order_relaxed);
        atomic_store_explicit(&slot->key[1], key[1], memory_order_relaxed);
        slot->occupied = 1;
        atomic_store_explicit(&slot->next, atomic_load_explicit(bucket, memory_order_relaxed),
                              memory_order_relaxed);
        /* Publishes the key and link: a reader that sees `n` in the bucket sees both. */
        atomic_store_explicit(bucket, n, memory_order_release);
        atomic_fetch_add_explicit(&s->clients, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->mutex);
    return slot;
}

struct client_slot *limiter_table_find_client(struct client_table *table, const uint64_t key[2])
{
    struct shard *s = &table->shards[key[1] & table->shard_mask];
    struct client_slot *slot = find_and_lock(s, key, MAX_CHAIN_STEPS);

    if (slot == NULL) { /* a true miss only where no chain can change */
        pthread_mutex_lock(&s->mutex);
        slot = find_and_lock(s, key, UINT32_MAX);
        pthread_mutex_unlock(&s->mutex);
    }
    return slot;
}

void limiter_table_unlock_client(struct client_slot *slot, int64_t now_ns)
{
    slot->last_used_ns = now_ns;
    slot_unlock(slot);
}

void limiter_table_stats(const struct client_table *table, struct limiter_stats *out)
{
    for (uint32_t i = 0; i <= table->shard_mask; i++) {
        const struct shard *s = &table->shards[i];

        out->clients += atomic_load_explicit(&s->clients, memory_order_relaxed);
        out->reclaimed += atomic_load_explicit(&s->reclaimed, memory_order_relaxed);
        out->evictions += atomic_load_explicit(&s->evictions, memory_order_relaxed);
    }
}
