/*
 * limiter: per-client rate limiting, five algorithms behind one interface.
 *
 * A limiter owns one quota ("requests per per") and one bounded table of client states. Each
 * call names a client (an IP address, an API key...) and the current time; the limiter decides
 * for that client alone and says how much quota is left and when it comes back. Denied requests
 * never consume quota.
 *
 *   token_bucket            a bucket of `burst` tokens (default `requests`) refilled at
 *                           requests/per; starts full; refill computed lazily from elapsed time.
 *   gcra                    the same contract as the bucket, kept as one 64-bit theoretical
 *                           arrival time per client.
 *   fixed_window            at most `requests` per window; windows are aligned to multiples of
 *                           `per` since the epoch, so separate gateways agree on the boundaries.
 *   sliding_window_log      exact: at most `requests` in any trailing `per`. Keeps one 8-byte
 *                           timestamp per request in the window, so a client costs up to
 *                           8 * requests bytes beyond its table slot.
 *   sliding_window_counter  allows while curr + prev * (1 - elapsed/per) < requests, with the
 *                           same aligned windows as fixed_window.
 *   concurrency             at most `requests` in flight at once: a request holds its units
 *                           from its decision until limiter_refund() gives them back (no
 *                           `per`, per_ns 0); a denial says retry after 1 s.
 *
 * Worked example, token_bucket with requests=10, per=1s, burst=5: a fresh client may send 5 at
 * once; the 6th is denied with retry_after_ms=100 (one token takes 1s/10); 250 ms later 2 more
 * are allowed (2.5 tokens have come back); after 500 ms idle the bucket is full again.
 *
 * Time is an argument: limiter_decide() takes `now_ns`, so tests step a clock by hand. The
 * gateway passes limiter_now_ns(), which is CLOCK_MONOTONIC shifted once to the wall clock: it
 * never jumps, yet window boundaries fall on wall-clock multiples of `per`. Should a caller's
 * clock step backwards anyway, no algorithm hands out extra quota.
 *
 * Threads: every function may be called from any number of threads at once, except
 * limiter_free(). Clients are spread over shards; looking up a known client takes no shared
 * lock, and each client's state has its own small lock, so one client never waits for another.
 * Memory is bounded by `max_clients`: when the table is full, states that have gone idle long
 * enough to equal a fresh client's are reclaimed first (nothing is lost), and only then is the
 * least recently used client evicted (counted in limiter_stats.evictions).
 */
#ifndef SLUICE_LIMITER_H
#define SLUICE_LIMITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LIMITER_ERR_LEN             256
#define LIMITER_DEFAULT_MAX_CLIENTS 100000
#define LIMITER_MAX_REQUESTS        1000000000ULL                /* requests and burst */
#define LIMITER_MIN_PER_NS          1000000LL                    /* 1 ms */
#define LIMITER_MAX_PER_NS          (366LL * 86400 * 1000000000) /* 366 days */

struct limiter;

/* The algorithms. Callers outside limiter/ ask the functions below what an algorithm is (a
 * bucket? its name?) rather than compare names. */
enum limiter_algorithm {
    LIMITER_ALGORITHM_UNKNOWN, /* no name, or one no algorithm has */
    LIMITER_TOKEN_BUCKET,
    LIMITER_GCRA,
    LIMITER_FIXED_WINDOW,
    LIMITER_SLIDING_WINDOW_LOG,
    LIMITER_SLIDING_WINDOW_COUNTER,
    LIMITER_CONCURRENCY,
};

/* The names, for a message that lists what is expected. */
#define LIMITER_ALGORITHM_LIST                                                                     \
    "token_bucket, gcra, fixed_window, sliding_window_log, sliding_window_counter or concurrency"

/* What a limiter enforces. The caller keeps ownership of `algorithm`; the limiter copies
 * what it needs. */
struct limiter_params {
    const char *algorithm; /* token_bucket | gcra | fixed_window | sliding_window_log |
                              sliding_window_counter | concurrency: what limiter_create() reads */
    uint64_t requests;     /* quota per `per`; for concurrency, in flight at once */
    int64_t per_ns;        /* window or refill period; 0 for concurrency */
    uint64_t burst;        /* token_bucket and gcra only; 0 means `requests` */
    uint32_t max_clients;  /* 0 means LIMITER_DEFAULT_MAX_CLIENTS */
    /* `algorithm` resolved once (limiter_algorithm_from_name()), so that code deciding by it
     * asks limiter_algorithm_takes_burst() and the like instead of comparing names:
     * limiter_create() fills it in the limiter's copy (limiter_get_params()), and config as it
     * checks a limit. limiter_create() itself ignores it. */
    enum limiter_algorithm algorithm_id;
};

/* One decision. Times are rounded up to whole milliseconds, so waiting them is enough. */
struct limiter_decision {
    bool allowed;
    uint64_t limit;         /* the quota, `requests` */
    uint64_t remaining;     /* further requests this client may send right now */
    int64_t reset_ms;       /* until the client's full quota is back */
    int64_t retry_after_ms; /* 0 when allowed; when denied, the wait after which the
                               client's next request is allowed */
    int64_t charged_ns;     /* allowed: the instant the charge was counted at, for
                               limiter_refund() (now_ns, or later where a clock that went back
                               made the algorithm count it later) */
    int64_t wait_ns;        /* allowed after waiting its turn (limiter_reserve_all()): how long
                               from the decision until it may pass; else 0 */
};

struct limiter_stats {
    uint64_t clients;   /* client states held now */
    uint64_t reclaimed; /* idle states freed to make room (lossless) */
    uint64_t evictions; /* live states evicted to make room (lossy) */
};

/* Creates a limiter, or returns NULL with the reason in `err` (a bad algorithm name, a zero
 * or out-of-range number, burst on a window algorithm...). The caller frees it with
 * limiter_free(). */
struct limiter *limiter_create(const struct limiter_params *params, char err[LIMITER_ERR_LEN]);

/* Frees the limiter and every client state. No other call may be running on it. */
void limiter_free(struct limiter *limiter);

/* Decides one request of `client_id` (a non-empty NUL-terminated string) at `now_ns`
 * (0 <= now_ns <= LIMITER_MAX_NOW_NS) and fills `out`. Returns 0, or -1 with errno EINVAL for
 * bad arguments and ENOMEM when a sliding_window_log cannot grow; on -1 the request is to be
 * treated as denied and `out` says so. */
#define LIMITER_MAX_NOW_NS (INT64_C(1) << 62)
int limiter_decide(struct limiter *limiter, const char *client_id, int64_t now_ns,
                   struct limiter_decision *out);

/* Several limits on one request, as one decision: the request is allowed only if every
 * limiter allows it, and when any denies, none of them is charged. Each limiter counts the
 * request under its own client id, `client_ids[i]` for `limiters[i]` (non-empty strings; they
 * may differ, so that one request is counted per API key by one limit and per address by
 * another, or be the same). The client's state in every limiter is held locked (in one global
 * order) while they are checked and then charged, so concurrent requests cannot slip between
 * the check and the charge. `limiters` must be distinct, at most LIMITER_MAX_PER_REQUEST;
 * `out` receives one decision per limiter (on a denial, the allowing ones report as if
 * charged). Nothing is kept of `client_ids` after the call. Returns as limiter_decide().
 *
 * Example: limiters {per_key: 100/min, per_ip: 300/min}, client_ids {"header:k1",
 * "ip:203.0.113.7"}. A client rotating keys gets a fresh per_key state each time, but every
 * one of its requests is charged to the same per_ip state, so it is held to 300 a minute. */
#define LIMITER_MAX_PER_REQUEST 8
int limiter_decide_all(struct limiter *const *limiters, size_t n, const char *const *client_ids,
                       int64_t now_ns, struct limiter_decision *out);

/* limiter_decide_all() for requests that cost more than one unit (Envoy's hits_addend): limit
 * i charges `costs[i]` (NULL: 1 each), all or none as above. A cost of k is decided as k
 * requests at the same instant would be, and remaining and retry_after_ms speak of units (the
 * wait until k units are free). A cost of 0 or above limiter_quota() is EINVAL: such a request
 * could never pass. */
int limiter_decide_all_cost(struct limiter *const *limiters, size_t n,
                            const char *const *client_ids, const uint64_t *costs, int64_t now_ns,
                            struct limiter_decision *out);

/* limiter_decide_all_cost() for a request that may wait for its turn rather than be denied
 * (delay:). When the limiters deny it at `now_ns`, but each would allow it within its
 * `max_wait_ns[i]` (0: it may not wait) and each can keep its place for later (the buckets,
 * token_bucket and gcra: a window would count it in a window other than the one it passes
 * in), it is admitted at the earliest instant T all of them allow it, and charged at T at
 * once: out[i] as allowed at T (charged_ns T), `*admit_ns` T. Requests decided after it find
 * its place taken and queue behind it; a request that will not wait for its turn after all
 * is given back with limiter_refund(charged_ns T), which frees its place. Otherwise as
 * limiter_decide_all_cost(), `*admit_ns` `now_ns`.
 *
 * Example: gcra 10 per second, burst 10, max_wait 1 s; 30 at once: 10 pass at once, the next
 * 10 are admitted 100 ms apart over the following second, the last 10 are denied. */
int limiter_reserve_all(struct limiter *const *limiters, size_t n, const char *const *client_ids,
                        const uint64_t *costs, int64_t now_ns, const int64_t *max_wait_ns,
                        int64_t *admit_ns, struct limiter_decision *out);

/* Gives back the `cost` units a decision charged `client_id` at `charged_ns` (the decision's
 * charged_ns), seen at `now_ns`: for a request whose answer shows it should not count.
 * The client's state becomes what it would be had the request never been charged; where a
 * later charge or a clock that went back leaves that unknowable, one no more generous. So a
 * refund never lifts a client above a fresh client's allowance, and a charge already given
 * back by time (its window passed, its tokens refilled) gives nothing more:
 *   token_bucket            the tokens go back in, less the refill since `charged_ns` (which
 *                           may have made up for them already), no further than full;
 *   gcra                    the theoretical arrival time moves back `cost` intervals, less
 *                           the time since `charged_ns`;
 *   fixed_window            the count of the window holding `charged_ns` goes down, while
 *                           it is the client's current window;
 *   sliding_window_counter  the same, in the current window or the previous one;
 *   sliding_window_log      up to `cost` times stamped `charged_ns` leave the log;
 *   concurrency             the request's units come back: it has ended.
 * Refund each charge once, with the cost it was charged: a second refund would give back
 * units another request paid for. Returns 0, or -1 with errno EINVAL for bad arguments (as
 * limiter_decide_all_cost()). A state evicted meanwhile gives back nothing. */
int limiter_refund(struct limiter *limiter, const char *client_id, uint64_t cost,
                   int64_t charged_ns, int64_t now_ns);

/* What limiter_decide_all_cost() would answer for one request of `client_id` costing `cost`
 * units at `now_ns`, without charging anything or making room for a client the table does not
 * hold (which answers as a fresh client): for a look at a client's quota. `out->allowed` says
 * whether such a request would pass. Returns as limiter_decide(). */
int limiter_peek(struct limiter *limiter, const char *client_id, uint64_t cost, int64_t now_ns,
                 struct limiter_decision *out);

/* Starts `client_id` afresh at `now_ns`: its state becomes a fresh client's (what it owned
 * freed), as if it had never sent anything, for an operator who lifts a client's limit by
 * hand. A client the table does not hold is fresh already: nothing is done, and no room is
 * made for it. Returns 1 when the client had spent something (its state was not yet a fresh
 * client's), 0 when it had not, or -1 with errno EINVAL for bad arguments (as
 * limiter_decide()) or a concurrency limiter, whose units come back only as the requests
 * holding them end (limiter_refund()), never by hand. */
int limiter_reset(struct limiter *limiter, const char *client_id, int64_t now_ns);

/* Gives `units` back to `client_id` at `now_ns`, whatever charged them: it may send `units`
 * more now than it could before, but never more than a fresh client could. Unlike
 * limiter_refund() no charge is named, so the units come off what the client holds now:
 *   token_bucket            `units` tokens go back in, no further than full;
 *   gcra                    the theoretical arrival time moves back `units` intervals, no
 *                           earlier than a full bucket;
 *   fixed_window            the current window's count goes down by `units`, not below 0;
 *   sliding_window_counter  the current window's count goes down by `units`, not below 0;
 *                           whatever is left of `units` lowers the previous window's count by
 *                           as much as that count weighs now: by ceil(rest * per / (per -
 *                           elapsed)), elapsed the time into the current window, not below 0;
 *   sliding_window_log      the `units` newest times leave the log.
 * A place a bucket keeps ahead for a waiting request (limiter_reserve_all()) is not given away:
 * as for limiter_refund() of a charge made at `now_ns`, what comes back is less the time from
 * `now_ns` to the last such place. `units` is 1 or more; more than limiter_quota() is taken as
 * limiter_quota(), which is all any client can have spent. A client the table does not hold is
 * fresh already: nothing is done and no room is made for it. Returns as limiter_reset(). */
int limiter_grant(struct limiter *limiter, const char *client_id, uint64_t units, int64_t now_ns);

/* The most one request may cost: the burst of a bucket (token_bucket, gcra), else
 * `requests`. */
uint64_t limiter_quota(const struct limiter *limiter);

/* The single entry point of the classic design: true when the request may pass now. Invalid
 * arguments deny. */
bool limiter_allow_request(struct limiter *limiter, const char *client_id);

/* The production clock: CLOCK_MONOTONIC plus a fixed offset to the wall clock taken on first
 * use, in nanoseconds since the epoch. */
int64_t limiter_now_ns(void);

/* Counters for metrics; cheap, read without stopping other threads. */
void limiter_get_stats(const struct limiter *limiter, struct limiter_stats *out);

/* The parameters the limiter runs with, defaults filled in (`algorithm` points at a static
 * name, and algorithm_id is set). Valid while the limiter lives. */
const struct limiter_params *limiter_get_params(const struct limiter *limiter);

/* The algorithm `name` names (exactly: "token_bucket", not "Token_Bucket"), or
 * LIMITER_ALGORITHM_UNKNOWN, also for NULL. limiter_create() accepts exactly the names this
 * resolves. */
enum limiter_algorithm limiter_algorithm_from_name(const char *name);

/* The algorithm's name, as configs and logs spell it: a static string; NULL for
 * LIMITER_ALGORITHM_UNKNOWN or a value outside the enum. */
const char *limiter_algorithm_name(enum limiter_algorithm algorithm);

/* True for the buckets, token_bucket and gcra: they take a burst (0 meaning `requests`), and
 * the most a client may spend at once is that burst rather than `requests`. False for the
 * windows and for LIMITER_ALGORITHM_UNKNOWN. */
bool limiter_algorithm_takes_burst(enum limiter_algorithm algorithm);

#endif
