/*
 * identify: who the client is to a route's limits, read off a request in memory (no HTTP
 * library): the value of a key header or query parameter, the consumer it names, and the key
 * each limit counts the client under (keys.h). Part of the limit module (limit.h).
 *
 * A key is refused rather than guessed (400) when it is given more than once, when a query
 * parameter reads two ways (target.h), or when the Connection field names the key header
 * (the upstream would then serve as anonymous a request counted under a key of the client's
 * choice).
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_IDENTIFY_H
#define SLUICE_GATEWAY_MODULES_LIMIT_IDENTIFY_H

#include "gateway/core/request.h"
#include "gateway/identity/consumers.h"
#include "gateway/identity/keys.h"

/* The value of the key of `kind` and `name` in `rq` into `*value` (NULL when absent or
 * empty for an ip key); a query parameter's is decoded into `*decoded`, which the caller
 * frees. 0, or -1 when the request is refused (gw_req_refuse()). */
int gw_identify_value(struct gw_req *rq, enum config_key_kind kind, const char *name,
                      const char **value, char **decoded);

/* The key a limit of `kind` and `name` counts `rq` under (keys.h), into `out`: the value's,
 * or the client's address when the request lacks it. 0, or -1 when refused. */
int gw_identify_key(struct gw_req *rq, enum config_key_kind kind, const char *name,
                    char out[GW_KEY_LEN]);

/* On a route whose key names consumers: the consumer holding the request's key, or NULL, into
 * `*out`, and rq->consumer and rq->plan with it. 0, or -1 when refused for the key's spelling. */
int gw_identify_consumer(struct gw_req *rq, const struct gw_consumer **out);

#endif
