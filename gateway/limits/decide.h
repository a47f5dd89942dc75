/*
 * decide: a request's limits, chosen and asked, with no HTTP in it. The gateway calls it with
 * what it read of a request (the limit module, gateway/modules/limit), `sluice simulate` with
 * what an access log line says of one (gateway/ops/simulate.c): both hold a request to the
 * same limits and read the same answer from them, by the same code.
 *
 * Choosing (gw_limits_select()): a route's requests are held to its own limit: (or plan:), or,
 * on a route whose key names consumers (config.h, "Consumers and plans"), to the route's
 * version of the consumer's plan; a key no consumer holds takes the anonymous plan, or the
 * route's own limits without one, unless unknown_key is reject and the client is not exempt.
 * Each limit of the set counts the client under the route's key (on a consumer route: the
 * consumer's name) when it names the same key (config marks it at load:
 * config_limit.route_key), else under its own; and takes the request's
 * cost for its method (cost:, 1 by default), and may wait for its turn as long as the limit's
 * delay: says.
 *
 * Deciding: in this process (gw_limits_decide_local()), every limit at once, all or none, at
 * `now`; or from the shared store's answer (gw_limits_decide_shared()), which the caller asked
 * for (gateway/store: at once, or in two steps in event mode) into the decision's `each`. When
 * the store failed, limiter.on_store_error says what happens: `local` decides in this process,
 * `deny` refuses for a second, `allow` lets the request pass uncounted.
 *
 * The binding limit is the one the RateLimit fields and Retry-After report: when denied, the
 * limit that makes the client wait longest; when allowed, the one with the fewest requests left.
 * Example: "burst" 10/s and "daily" 1000/d both refuse, burst for 400 ms and daily for 5 h:
 * daily binds, since a retry after 400 ms would be refused again.
 *
 * The limiters themselves are built per route where a config is loaded (the gateway keeps
 * them across reloads, gateway/modules/limit/limit_sets.c; simulate builds its own), each from
 * the parameters gw_limits_local_params() gives. Nothing here reads a clock, allocates, or keeps
 * anything of its arguments.
 */
#ifndef SLUICE_GATEWAY_LIMITS_DECIDE_H
#define SLUICE_GATEWAY_LIMITS_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "gateway/identity/consumers.h"
#include "gateway/identity/keys.h"
#include "gateway/store/store.h"
#include "limiter/limiter.h"

/* gw_limits_selection.plan for the route's own limit: (or plan:). */
#define GW_LIMITS_OWN (-1)

/* The limits a request is held to. */
struct gw_limits_selection {
    long plan; /* index into config->plans (the route's version of it), or GW_LIMITS_OWN */
    const struct config_limit *limits; /* the set's limits, the route's (the config's) */
    size_t n_limits;
    bool route_key[LIMITER_MAX_PER_REQUEST]; /* counts under the route's key, else its own
                                                (config_limit.route_key) */
    uint64_t costs[LIMITER_MAX_PER_REQUEST]; /* the units the request takes of each limit */
    /* delay: how long it may wait for its turn at each limit (0: not at all), and whether it
     * may wait at all: some limit has a delay, unless the caller turns it off (a dry_run
     * route, a full queue). */
    int64_t max_wait_ns[LIMITER_MAX_PER_REQUEST];
    bool waits;
};

enum gw_limits_outcome {
    GW_LIMITS_ALLOWED,       /* every limit allowed it */
    GW_LIMITS_DENIED,        /* one or more refused it: each[i].allowed says which */
    GW_LIMITS_FAILED_CLOSED, /* refused uncounted: no memory for the client's state, or the
                                store failed under on_store_error: deny */
    GW_LIMITS_FAILED_OPEN,   /* the store failed under on_store_error: allow: nothing counted,
                                nothing to report */
};

/* What a request's limits answered. */
struct gw_limits_decision {
    struct limiter_decision each[LIMITER_MAX_PER_REQUEST]; /* one per limit of the selection */
    size_t binding;     /* the one to report (each[binding]); not set when FAILED_OPEN */
    int64_t decided_ns; /* `now` when decided in this process, or when the store's answer came;
                           left as it was when the store failed and nothing was decided */
    enum gw_limits_outcome outcome;
};

/* Whether `route`'s own limit: (or plan:) can decide a request, and its plans. A route that
 * names no consumers holds every request to its own limits and never to a plan; one that
 * does holds a consumer to its plan, and an unknown key to the anonymous plan, or to its own
 * limits only when it has none and unknown_key is anonymous (with reject, an unknown key is
 * refused first). A set that cannot decide is not built, counted or reported. */
bool gw_limits_own_decide(const struct config_route *route);
bool gw_limits_plans_decide(const struct config_route *route);

/* The limits of `route` a request is held to, its key read as `consumer` (NULL: no consumer
 * holds it, or the route names none), sent with `method`, into `out`. 0, or -1 when the route
 * refuses the request first: its key names no consumer, unknown_key is reject, and the client
 * is not `exempt`. */
int gw_limits_select(const struct config_route *route, const struct gw_consumer *consumer,
                     bool exempt, const char *method, struct gw_limits_selection *out);

/* Where the key `limit` of `route` counts a client under comes from, as the access log names
 * it (gw_key_source()): the route's key ("consumer" on a route that names consumers), or the
 * limit's own. */
void gw_limits_key_source(const struct config_route *route, const struct config_limit *limit,
                          char out[GW_KEY_SOURCE_LEN]);

/* `limit` as the shared store runs it: its parameters, the burst of a bucket (token_bucket,
 * gcra) defaulted to its requests. */
struct limiter_params gw_limits_store_params(const struct config_limit *limit);

/* `limit` as a limiter of this process runs it under `config`: as the store runs it, and
 * limiter.max_clients; on a route in the shared store (`shared`), the local fallback, with this
 * replica's share of the quota and burst (divided by limiter.replicas, at least 1; with
 * replicas: auto the whole quota, shared by gw_limits_share() instead). Example: 100 a minute,
 * burst 20, three replicas: each falls back to 33 a minute, burst 6. */
struct limiter_params gw_limits_local_params(const struct config *config,
                                             const struct config_limit *limit, bool shared);

/* With limiter.replicas: auto the local fallback's limiters hold each whole quota (above), and
 * a request is charged its cost times the `replicas` alive instead: the same share of the
 * quota per replica, whatever their number now (a cost above the share takes the whole quota,
 * as a share is at least 1). Changes `selection`'s costs; nothing for `replicas` 0 or 1.
 * Example: 100 a minute, 4 replicas alive: each request takes 4 units, so each replica
 * passes 25 a minute. */
void gw_limits_share(struct gw_limits_selection *selection, struct limiter *const *limiters,
                     uint32_t replicas);

/* Asks `limiters` (one per limit of `selection`) at `now_ns` for the clients `ids` (likewise),
 * into `d`: when the selection waits, a request the limits would deny now but allow within
 * its waits is ALLOWED after waiting its turn (limiter_reserve_all(): each[i].wait_ns).
 * Returns d->outcome: ALLOWED, DENIED, or FAILED_CLOSED when memory is short. */
enum gw_limits_outcome gw_limits_decide_local(struct gw_limits_decision *d,
                                              struct limiter *const *limiters,
                                              const char *const *ids,
                                              const struct gw_limits_selection *selection,
                                              int64_t now_ns);

/* Concludes from the shared store's `result`: GW_STORE_OK with its answer in d->each, or a
 * failure that `on_error` decides (local: gw_limits_decide_local() with the other arguments).
 * Returns d->outcome. */
enum gw_limits_outcome
gw_limits_decide_shared(struct gw_limits_decision *d, enum gw_store_result result,
                        enum config_store_error on_error, struct limiter *const *limiters,
                        const char *const *ids, const struct gw_limits_selection *selection,
                        int64_t now_ns);

#endif
