/* What the request is, and its route; design in route.h. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/methods.h"
#include "gateway/common/target.h"
#include "gateway/modules/route/route.h"
#include "gateway/routing/routes.h"

static enum gw_step refused(struct gw_req *rq, unsigned status, const char *detail)
{
    gw_req_refuse(rq, status, detail);
    return GW_ANSWERED;
}

static enum gw_step read_request(struct gw_req *rq, void *ctx)
{
    const char *reason = NULL;

    (void)ctx;
    if (rq->target[0] != '/') /* absolute-form, CONNECT's authority-form, OPTIONS * */
        return refused(rq, 400, "the request target must be a path (origin-form)");
    /* Methods are case-sensitive, but some upstreams fold them, and would run what sluice
     * routed as another method. */
    if (config_method_is_miscased(rq->method))
        return refused(rq, 400, "a standard method must be written in upper case");
    rq->path = malloc(strlen(rq->target) + 1);
    if (rq->path == NULL)
        return refused(rq, 503, "out of memory");
    if (gw_target_path(rq->target, rq->path, &reason) != 0)
        return refused(rq, 400, reason);
    if (!gw_host_is_valid(rq->host))
        return refused(rq, 400, "the Host field is not a host name or address");
    return GW_NEXT;
}

/* Whether every X-Forwarded-Host entry of a trusted peer is a host that picks `route` too. */
static bool forwarded_hosts_agree(const struct gw_req *rq, int route)
{
    char *list = rq->trusted_peer ? gw_fields_join(&rq->fields, "X-Forwarded-Host") : NULL;
    bool agree = true;

    for (char *entry = list; entry != NULL && agree;) {
        char *comma = strchr(entry, ',');

        if (comma != NULL)
            *comma = '\0';
        agree = gw_host_is_valid(entry) &&
                gw_route_match(rq->config, rq->method, rq->path, entry) == route;
        entry = comma != NULL ? comma + 1 : NULL;
    }
    free(list);
    return agree;
}

/* Whether the path without its ;parameters picks `route` too. */
static bool stripped_path_agrees(const struct gw_req *rq, int route)
{
    char *stripped;
    bool agree;

    if (strchr(rq->path, ';') == NULL)
        return true;
    stripped = malloc(strlen(rq->path) + 1);
    if (stripped == NULL)
        return false;
    gw_target_strip_params(rq->path, stripped);
    agree = gw_route_match(rq->config, rq->method, stripped, rq->host) == route;
    free(stripped);
    return agree;
}

static enum gw_step pick_route(struct gw_req *rq, void *ctx)
{
    int route = gw_route_match(rq->config, rq->method, rq->path, rq->host);

    (void)ctx;
    if (gw_route_match_any_case(rq->config, rq->method, rq->path, rq->host) != route)
        return refused(rq, 400,
                       "the path names another route when its case is folded, as some "
                       "upstreams do");
    if (!stripped_path_agrees(rq, route))
        return refused(rq, 400,
                       "the path names another route without its ;parameters, as some "
                       "upstreams read it");
    if (!forwarded_hosts_agree(rq, route))
        return refused(rq, 400,
                       "X-Forwarded-Host names another route than Host; it is refused rather "
                       "than guessed");
    if (route < 0)
        return refused(rq, 404, "no route matches this request");
    rq->route = route;
    return GW_NEXT;
}

struct gw_module gw_route_module = {
    .name = "route",
    .on = {[GW_PHASE_READ] = read_request, [GW_PHASE_ROUTE] = pick_route},
};
