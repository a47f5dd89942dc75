/*
 * exchange: the forward module's per-request context and the steps its files share: an
 * attempt (attempts.c), the plain exchange (forward.c), the upgrade (upgrade.c). Included by
 * gateway/modules/forward/ only.
 */
#ifndef SLUICE_GATEWAY_MODULES_FORWARD_EXCHANGE_H
#define SLUICE_GATEWAY_MODULES_FORWARD_EXCHANGE_H

#include "gateway/modules/forward/forward.h"
#include "gateway/upstream/body.h"
#include "gateway/upstream/proxy.h"
#include "gateway/upstream/upgrade.h"

#define TOO_LARGE "the request body is larger than this gateway accepts"

struct exchange {
    struct gw_body body; /* on its way upstream (body.h) */
    bool body_dropped;   /* the rest of the body is read and let go (answered already) */
    enum gw_upstream_error upstream_error; /* an attempt failed mid-body: the final answer */
    struct gw_upstream *upstream;          /* from the pool while forwarding, or NULL */
    /* The attempts (backends.h): the server of the current one, open while `backend` is set;
     * the servers tried (bit per server); the last attempt's fault. */
    size_t server;
    struct gw_backend *backend;
    bool reported; /* the open attempt's outcome has been reported */
    bool probe;    /* the open attempt is its server's probe */
    uint64_t tried;
    unsigned attempts;
    enum gw_fault fault;
    unsigned dropped_headers;   /* fields not forwarded for a '_' in their name */
    struct curl_slist *headers; /* one array of nodes (upstream_headers.h) */
    char *header_text;
    char *url;
    int64_t head_ns; /* when the response head came; 0 if it did not */
    long status;     /* the upstream's */
    /* An upgrade: the protocol the client asks for (one the route lists), its Upgrade field,
     * the upstream's side once made; `upgrade_failed` when that failed (its fault in `up`). */
    const char *upgrade;
    char *upgrade_field;
    struct gw_upgrade up;
    bool upgrade_asked, upgrade_failed;
    struct gw_forward upgrade_fw; /* what gw_upgrade_connect() sends, maybe from another thread */
};

/* attempts.c */
int gw_exchange_begin(struct gw_req *rq, struct exchange *x, struct gw_forward *fw);
enum gw_upstream_error gw_exchange_send(struct gw_req *rq, struct exchange *x);
bool gw_exchange_end(struct gw_req *rq, struct exchange *x, enum gw_upstream_error error,
                     long status);
void gw_exchange_close(struct exchange *x);
void gw_exchange_drop(struct exchange *x);
enum gw_step gw_exchange_failed(struct gw_req *rq, struct exchange *x,
                                enum gw_upstream_error error);
enum gw_step gw_exchange_answer_failure(struct gw_req *rq, struct exchange *x,
                                        enum gw_upstream_error error);
int gw_exchange_answer_fields(struct gw_req *rq, const char *fields, size_t len);
void gw_exchange_head_in(struct gw_req *rq, struct exchange *x, long status);

/* upgrade.c */
void gw_exchange_read_upgrade(struct gw_req *rq, struct exchange *x);
enum gw_step gw_exchange_upgrade(struct gw_req *rq, struct exchange *x);

#endif
