/*
 * request: one request as every phase sees it, in no library's terms. The HTTP adapter
 * (gateway/front) makes it from what its library parsed: the method, the target as sent, the
 * header fields (a view, fields.h), the peer, TLS, and what the head says of a body. The
 * phases (module.h, pipeline.h) then read it and write their outcome into it: the route, the
 * client as its keys see it, the consumer, a refusal, the answer.
 *
 * Only what several phases need is here. What one module needs of a request is that module's
 * context, which the request carries after its own fields (gw_req_ctx()), so the request
 * never grows for a module.
 *
 * Waiting is the adapter's: a step that starts something another thread finishes (the shared
 * store's answer, an upgrade's connection, the upstream's next step on a loop) returns WAIT
 * and arranges for gw_req_resume() to be called when it is done; the adapter suspends the
 * connection (event mode) or blocks the connection's thread (thread_per_connection) until
 * then, and runs the same step again. A module never asks which mode it runs in.
 *
 * A request holds its runtime (runtime.h) from start to end, so it runs on one config whole.
 */
#ifndef SLUICE_GATEWAY_CORE_REQUEST_H
#define SLUICE_GATEWAY_CORE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/common/fields.h"
#include "gateway/common/respond.h"
#include "gateway/common/trace.h"
#include "gateway/core/answer.h"
#include "gateway/core/runtime.h"
#include "gateway/identity/keys.h"
#include "gateway/ops/access_log.h"

struct gw_req;
struct gw_upstream_loop;
struct gw_tunnels;

/* What the adapter does for a request that waits. */
/* Why a request that waited for an instant goes on (gw_req_sleep()). */
enum gw_woken {
    GW_WOKEN_ON_TIME,     /* its instant came */
    GW_WOKEN_CLIENT_LEFT, /* its client closed the connection first */
    GW_WOKEN_REFUSED,     /* it could not wait: the server is stopping, or memory is short */
};

struct gw_req_io {
    /* The step that calls it is about to hand the request to another thread, and will
     * return WAIT: the adapter sets the connection aside first. */
    void (*suspend)(struct gw_req *rq);
    /* The request may go on (its step runs again): from the request's own thread, or from
     * another (`other_thread`, which must wake the request's loop). */
    void (*resume)(struct gw_req *rq, bool other_thread);
    /* Runs `job(rq)` where it may block: right here when the connection's thread may
     * (thread_per_connection), else on another thread with the connection set aside; the
     * request resumes when `job` returns. The step returns WAIT meanwhile. */
    void (*aside)(struct gw_req *rq, void (*job)(struct gw_req *rq));
    /* Whether the client has sent nothing after this request yet (an upgrade's condition). */
    bool (*quiet)(const struct gw_req *rq);
    /* Sets the request aside until `until_ns`, or until its client leaves first: then its
     * step runs again, `*why` saying which (or at once, GW_WOKEN_REFUSED, when it cannot
     * wait). 0; or -1 when this adapter cannot wait at all (nothing set aside). */
    int (*sleep)(struct gw_req *rq, int64_t until_ns, enum gw_woken *why);
};

/* What the adapter gives a request when it makes it. */
struct gw_req_spec {
    struct gw_runtime *runtime; /* the request takes over the caller's reference */
    const struct gw_req_io *io;
    struct gw_upstream_loop *upstream_loop; /* the loop's upstream driver, or NULL */
    struct gw_tunnels *tunnels;             /* where an upgrade's tunnel goes */
    struct gw_access_memo *memo;            /* the connection's digest of its address key */
    const char *method;                     /* the adapter's, until the request ends */
    const char *target;                     /* copied */
    bool http11, tls;
    bool has_peer;
    struct gw_addr peer;
};

enum gw_phase {
    GW_PHASE_READ,    /* what the request is: its target, method, Host (route module) */
    GW_PHASE_ROUTE,   /* which route serves it */
    GW_PHASE_ACCESS,  /* whether its client may use the route at all */
    GW_PHASE_LIMIT,   /* who the client is, and what the route's limits say */
    GW_PHASE_SEND,    /* allowed: a body of known length starts upstream before it arrives */
    GW_PHASE_BODY,    /* the body, piece by piece (module.h's on_body) */
    GW_PHASE_CONTENT, /* the answer: the upstream's, or an upgrade */
    GW_PHASE_LOG,     /* over: counted and logged, once */
    GW_PHASE_COUNT,
};

enum gw_step {
    GW_NEXT,     /* this step is done: the next one runs */
    GW_WAIT,     /* run this step again after gw_req_resume() */
    GW_ANSWERED, /* the request is answered (rq->answer) or refused (rq->refusal) */
};

/* Something a module holds for as long as the request's connection serves it (a concurrency
 * slot): released once its answer is whole (gw_req_answer_whole()) or the request ends, or,
 * for a request that switched protocols, when its tunnel closes (gw_req_take_holds()). `release`
 * runs once, on whichever thread ends it, and owns `arg` then. */
struct gw_hold {
    void (*release)(void *arg);
    void *arg;
    struct gw_hold *next;
};

struct gw_req {
    struct gw_runtime *runtime;
    const struct config *config; /* the runtime's */
    const struct gw_req_io *io;  /* the adapter's hooks; its own state is its module's */
    struct gw_upstream_loop *upstream_loop;
    struct gw_tunnels *tunnels;
    struct gw_access_memo *memo;

    /* As the client sent it. */
    const char *method;
    char *target;            /* forwarded byte for byte */
    struct gw_fields fields; /* the adapter's, filled before gw_req_begin() */
    bool http11, tls;
    bool has_peer, trusted_peer; /* an IP peer; one in server.trusted_proxies */
    struct gw_addr peer;
    bool has_body, empty_body; /* a body announced; Content-Length: 0 and nothing else */
    int64_t content_length;    /* -1 without one */
    uint64_t body_read;        /* body bytes read from the client, forwarded or not */
    bool stand_in;             /* a head the adapter's reader refused: its line says nothing */

    /* Read once by gw_req_begin(): what several phases read. */
    const char *host, *user_agent; /* the fields, or NULL */
    char *connection;              /* every Connection field joined, or NULL */
    char *forwarded_for;           /* every X-Forwarded-For field joined, or NULL */
    char request_id[GW_REQUEST_ID_LEN];
    struct gw_trace trace;

    /* What the phases found. */
    char *path;                  /* what it is routed by (target.h), or NULL */
    int route;                   /* index into the config's routes, or -1 */
    struct gw_addr client;       /* as its keys see it (has_peer only) */
    const char *consumer, *plan; /* the consumer its key belongs to and its plan, or NULL */
    enum gw_decision decision;   /* a module's (denied, exempt, ...); the outcome once it ends */
    unsigned refusal; /* a status sluice answers itself instead of forwarding; 0 if none */
    const char *refusal_detail;
    struct gw_answer answer;
    struct gw_hold *holds; /* released when it ends (gw_req_hold()) */
    unsigned status;       /* the status sent, once sent */
    uint64_t bytes;        /* body bytes sent */
    int64_t start_ns;

    /* Where it is: the phase, and the module whose step runs (or waits) in it. */
    enum gw_phase phase;
    unsigned step;
    bool begun;  /* gw_req_begin() ran */
    bool logged; /* gw_pipeline_finish() ran */
    bool out_of_flight;
    _Alignas(max_align_t) unsigned char contexts[]; /* the modules' (pipeline.h) */
};

/* A request as `spec` says, or NULL when memory is short (the runtime released). */
struct gw_req *gw_req_new(const struct gw_req_spec *spec);

/* Once its fields are in: reads what several phases need (above), and names it (its id and
 * trace: a client's X-Request-Id is believed only from a trusted peer, sent once and sane). */
void gw_req_begin(struct gw_req *rq);

/* Frees it: its modules' contexts first (pipeline.h), then it is counted and logged unless it
 * was (gw_pipeline_finish()), and its runtime released. */
void gw_req_free(struct gw_req *rq);

/* Adds a hold to `rq` (above). 0, or -1 when memory is short (nothing was added, and the
 * caller still owns `arg`). */
int gw_req_hold(struct gw_req *rq, void (*release)(void *arg), void *arg);

/* Takes `rq`'s holds away from it, for the tunnel its connection became: the caller releases
 * them (gw_holds_release()) when the tunnel closes. NULL when it has none. */
struct gw_hold *gw_req_take_holds(struct gw_req *rq);

/* Runs and frees each of `holds`. */
void gw_holds_release(struct gw_hold *holds);

/* The adapter has been handed the answer's last byte (a whole buffer queued, or a stream's
 * end read): what the request held for its answer is released now, not when the server
 * library later says the request is over, so that a client's next request, sent as soon as it
 * has read this answer, finds the slot free. */
void gw_req_answer_whole(struct gw_req *rq);

/* Its route's config, or NULL before one is found. */
const struct config_route *gw_req_route(const struct gw_req *rq);

/* Its route's runtime state; the route must be found. */
struct gw_route_runtime *gw_req_route_runtime(const struct gw_req *rq);

/* Refuses it with `status` (the first refusal stands) and `detail` for the problem body. */
void gw_req_refuse(struct gw_req *rq, unsigned status, const char *detail);

/* A refusal other than 401, 403, 404 or 429 ends the connection: a request sluice will not
 * read one way is not followed, since what comes after it could be anything. */
bool gw_req_refusal_closes(const struct gw_req *rq);

/* What happened to it, one word: a limit's denial stands; else a refusal of the gateway's
 * names its kind by status (401 unauthenticated, 403 forbidden, another 4xx refused, a 5xx
 * failed); else what the modules decided (failed, when the forward module answered for an
 * upstream that did not; dry_run_denied; exempt; allowed). */
enum gw_decision gw_req_outcome(const struct gw_req *rq);

/* The access log entry's fields that are the request's own (the modules add theirs). */
void gw_req_entry(const struct gw_req *rq, struct gw_access_entry *entry);

/* No longer in flight (sluice_requests_in_flight); metric readers wait for none in flight. */
void gw_req_out_of_flight(struct gw_req *rq);

/* The calling step will hand the request to another thread and return WAIT. */
void gw_req_will_wait(struct gw_req *rq);

/* The request may go on: from its own thread (gw_req_resume()), or from another
 * (gw_req_hand_back(); nothing of the request is read after it). */
void gw_req_resume(struct gw_req *rq);
void gw_req_hand_back(struct gw_req *rq);

/* Waits for `until_ns` (gw_req_io.sleep): 0, and the step returns WAIT; it runs again then,
 * or sooner when the client leaves, `*why` saying which. -1 when it cannot wait. */
int gw_req_sleep(struct gw_req *rq, int64_t until_ns, enum gw_woken *why);

/* Runs `job` where it may block (gw_req_io.aside); the step returns WAIT meanwhile. */
void gw_req_aside(struct gw_req *rq, void (*job)(struct gw_req *rq));

#endif
