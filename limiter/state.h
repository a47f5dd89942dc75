/*
 * Per-client state of each algorithm, one union so that the client table can hold any of them
 * in a fixed-size slot. All-zero is a fresh client for every algorithm: a new or reclaimed slot
 * is simply zeroed. Each algorithm touches only its own member, and only while the slot is
 * locked.
 */
#ifndef SLUICE_LIMITER_STATE_H
#define SLUICE_LIMITER_STATE_H

#include <stdint.h>

union client_state {
    struct {
        int64_t deficit; /* credit missing from a full bucket (see token_bucket.c) */
        int64_t last_ns; /* time the deficit was measured at */
    } bucket;
    struct {
        int64_t tat_ns; /* theoretical arrival time */
    } gcra;
    struct {
        int64_t window_start_ns;
        uint32_t count;
    } fixed;
    struct {
        int64_t window_start_ns;
        uint32_t curr_count;
        uint32_t prev_count;
    } counter;
    struct {
        uint64_t in_flight; /* units held by requests not yet ended (concurrency.c) */
    } slots;
    struct {
        int64_t *times_ns; /* ring of request times, oldest at `head`; owned, NULL if empty */
        uint32_t head;
        uint32_t count;
        uint32_t capacity;
    } log;
};

_Static_assert(sizeof(union client_state) <= 24, "client state must fit its slot");

#endif
