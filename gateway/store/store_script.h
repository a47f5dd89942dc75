/*
 * store_script: the one Lua script that keeps the limits in Redis (store.h), the EVALSHA
 * arguments that ask it about one request, and the reading of its answer.
 *
 * It does these things, each for all of a request's limits in one call: decide (charge all
 * or none), give back what a decision charged (limiter_refund()'s rules, read against
 * Redis's clock: the instant the decision says it charged at is the one Redis gave), renew
 * the leases of a request's concurrency slots; and, for an operator, peek at a client's
 * limits (limiter_peek()), reset them (limiter_reset()) or grant units back at them
 * (limiter_grant()), with the local limiters' rules against Redis's clock.
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

#include "gateway/store/store.h"
#include "limiter/limiter.h"

#define GW_SCRIPT_HEAD     3 /* numbers before the limits': n, the op, the lease's length */
#define GW_SCRIPT_FIELDS   7 /* numbers per limit */
#define GW_SCRIPT_MAX_ARGS (7 + LIMITER_MAX_PER_REQUEST * (1 + GW_SCRIPT_FIELDS))

/* EVALSHA's arguments for one request. argv[1], the script's digest, is left NULL for the
 * sender to fill; the other entries point into the struct itself, which must not move. */
struct gw_script_args {
    const char *argv[GW_SCRIPT_MAX_ARGS];
    int argc;
    enum gw_store_op op;
    size_t n_limits;
    uint64_t requests[LIMITER_MAX_PER_REQUEST]; /* each limit's quota, for the decisions */
    char keys[LIMITER_MAX_PER_REQUEST][320];
    char lease[GW_STORE_LEASE_LEN];
    char numbers[GW_SCRIPT_HEAD + LIMITER_MAX_PER_REQUEST * GW_SCRIPT_FIELDS][24];
};

/* The script's text, for SCRIPT LOAD. */
extern const char gw_script_text[];

/* Fills `args` for `ask`, its keys under `prefix`, a lease lasting `lease_ns`. Nothing passed
 * in is kept. */
void gw_script_args_make(struct gw_script_args *args, const char *prefix, int64_t lease_ns,
                         const struct gw_store_ask *ask);

/* `from` into `to`, its arguments pointing into `to`. */
void gw_script_args_copy(struct gw_script_args *to, const struct gw_script_args *from);

/* The same request's limits asked to do `op` instead. */
void gw_script_args_set_op(struct gw_script_args *args, enum gw_store_op op);

/* Reads the script's answer `reply` to `args`: for a decision, one per limit into `out`
 * (charged_ns the instant Redis decided at, for an allowed one); for a peek the same, with
 * charged_ns and wait_ns 0 (nothing was charged); the others answer nothing.
 * 0, or -1 when it is not the shape the script returns. */
int gw_script_answer(const redisReply *reply, const struct gw_script_args *args,
                     struct limiter_decision *out);

#endif
