/* Whether the client may use the route; design in access.h. */
#include "gateway/modules/access/access.h"
#include "gateway/modules/access/access_options.h"

/* Whether `options` (NULL: none read) deny `client`. */
static bool denies(const struct access_options *options, const struct gw_addr *client)
{
    return options != NULL && gw_cidrs_contain(&options->deny, client);
}

static enum gw_step check_deny(struct gw_req *rq, void *ctx)
{
    (void)ctx;
    if (!rq->has_peer)
        return GW_NEXT;
    if (denies(config_server_block(rq->config, &gw_access_server_options), &rq->client) ||
        denies(config_route_block(gw_req_route(rq), &gw_access_route_options), &rq->client)) {
        gw_req_refuse(rq, 403, "the client's address is not allowed here");
        return GW_ANSWERED;
    }
    return GW_NEXT;
}

struct gw_module gw_access_module = {
    .name = "access",
    .options = {&gw_access_server_options, &gw_access_route_options},
    .on = {[GW_PHASE_ACCESS] = check_deny},
};
