/* Whether the client may use the route; design in access.h. */
#include "gateway/modules/access/access.h"

static enum gw_step check_deny(struct gw_req *rq, void *ctx)
{
    (void)ctx;
    if (!rq->has_peer)
        return GW_NEXT;
    if (gw_cidrs_contain(&rq->config->server.deny, &rq->client) ||
        gw_cidrs_contain(&gw_req_route(rq)->deny, &rq->client)) {
        rq->decision = GW_BLOCKED;
        gw_req_refuse(rq, 403, "the client's address is not allowed here");
        return GW_ANSWERED;
    }
    return GW_NEXT;
}

struct gw_module gw_access_module = {
    .name = "access",
    .on = {[GW_PHASE_ACCESS] = check_deny},
};
