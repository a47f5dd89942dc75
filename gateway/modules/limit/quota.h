/*
 * quota: one client's quota on one route, looked at and changed by an operator (the admin
 * listener's /quota endpoints, gateway/front/admin_quota.c). Part of the limit module
 * (limit.h): it finds the client as a request would be found, in the same limit sets.
 *
 * Finding the client. The operator names the route and the client as a request presents it:
 *
 *   key=K        the value of the route's key (an API key, a query value), or, on a route
 *                keyed by address, the client's address; hashed exactly as the gateway
 *                hashes a request's (keys.h), so the same state is found. On a route whose key
 *                names consumers, K is the API key and finds its consumer (or none).
 *   consumer=C   on such a route, the consumer by name instead.
 *   ip=A, header:NAME=V, query:NAME=V
 *                the keys of limits that count under a key of their own (config.h's
 *                config_limit key:), NAME the header's or parameter's name (a header's
 *                in any case, as the access log writes it in lower case). A limit
 *                whose own key is not given counts, as for a request that lacks it, under
 *                ip= when given; otherwise it is listed but not looked up ("looked_up":
 *                false) and not changed.
 *   method=M     the method whose cost: (1 by default) a request would pay: GET unless given.
 *   limit=L      one limit of the client's set (by its name in the config); else all of them.
 *
 * What it does, without charging anything:
 *
 *   show   each limit's algorithm, quota, remaining (what the client may spend now),
 *          reset_ms, retry_after_ms (what a request of `method` would be told now), and
 *          whether it would pass; in the shared store (scope "shared") as every replica sees
 *          it, else this replica's (scope "replica"). A key never seen answers as a fresh
 *          client.
 *   reset  the client's state made a fresh client's, at one limit or all of them (limiter.h's
 *          limiter_reset(), or the store's RESET: every replica at once). A concurrency limit
 *          is left alone: requests in flight give their slots back as they end.
 *   grant  `n` units given back at one limit (limiter_grant(), or the store's GRANT), never
 *          beyond a fresh client's allowance.
 *
 * The answer is JSON (docs/admin-openapi.yaml describes it), or a table for a person when
 * asked for text (`sluice quota` without --format json); or a problem+json body with the
 * status saying what was wrong: 400 for a bad or missing parameter, 404 for an unknown route,
 * consumer or limit, 409 when the limit cannot be changed (concurrency), 503 when the shared
 * store did not answer.
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_QUOTA_H
#define SLUICE_GATEWAY_MODULES_LIMIT_QUOTA_H

#include <stdint.h>

#include "gateway/core/runtime.h"

enum gw_quota_op { GW_QUOTA_SHOW, GW_QUOTA_RESET, GW_QUOTA_GRANT };

/* The longest parameter name read: header:NAME with a name of up to 120 bytes. */
#define GW_QUOTA_PARAM_LEN 128

/* "show", "reset" or "grant": the answer's "action", and the log's word. */
const char *gw_quota_action(enum gw_quota_op op);

/* The value of the parameter `name`, or NULL when the operator gave none. */
typedef const char *gw_quota_arg_fn(void *cls, const char *name);

/* What was done, for the caller's log line and counters. */
struct gw_quota_done {
    char route[128];
    char limits[256]; /* the names of the limits changed, comma-separated */
    char client[17];  /* the digest of the route's key (gw_access_key_hash()) */
    bool changed;     /* a reset or grant took effect */
};

/* Runs `op` on the client that `arg` names (above) in `rt`: the answer's status into
 * `*status`, its body into `*body` (JSON, or with `text` a table for a person; the caller
 * frees it; NULL when memory is short), and
 * whether that body is a problem (application/problem+json; with `text`, its detail alone)
 * into `*problem`; what was done
 * into `done`. */
void gw_quota_run(struct gw_runtime *rt, enum gw_quota_op op, gw_quota_arg_fn *arg, void *cls,
                  bool text, unsigned *status, char **body, bool *problem,
                  struct gw_quota_done *done);

#endif
