/*
 * store_script: the one Lua script that decides a request in Redis (store.h), the EVALSHA
 * arguments that ask it about one request, and the reading of its answer.
 *
 * The arguments are made once, when the request asks (its keys hashed, its numbers written),
 * into a struct that holds them whole, so the store's threads send them later without
 * touching the request: a request that stopped waiting (store.h) may be gone by then.
 */
#ifndef SLUICE_GATEWAY_STORE_SCRIPT_H
#define SLUICE_GATEWAY_STORE_SCRIPT_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "limiter/limiter.h"

#define GW_SCRIPT_MAX_ARGS (4 + LIMITER_MAX_PER_REQUEST * 6)

/* EVALSHA's arguments for one request. argv[1], the script's digest, is left NULL for the
 * sender to fill; the other entries point into the struct itself, which must not move. */
struct gw_script_args {
    const char *argv[GW_SCRIPT_MAX_ARGS];
    int argc;
    size_t n_limits;
    uint64_t requests[LIMITER_MAX_PER_REQUEST]; /* each limit's quota, for the decisions */
    char keys[LIMITER_MAX_PER_REQUEST][320];
    char numbers[1 + LIMITER_MAX_PER_REQUEST * 5][24];
};

/* The script's text, for SCRIPT LOAD. */
extern const char gw_script_text[];

/* Fills `args` for one request on `route` against `n` limits (1 to LIMITER_MAX_PER_REQUEST),
 * as gw_store_prepare() describes them, its keys under `prefix`. Nothing passed in is kept. */
void gw_script_args_make(struct gw_script_args *args, const char *prefix, const char *route,
                         const char *const *names, const struct limiter_params *const *limits,
                         const uint64_t *costs, size_t n, const char *const *client_keys);

/* Reads the script's answer `reply` to `args` into one decision per limit. 0, or -1 when it
 * is not the shape the script returns. */
int gw_script_answer(const redisReply *reply, const struct gw_script_args *args,
                     struct limiter_decision *out);

#endif
