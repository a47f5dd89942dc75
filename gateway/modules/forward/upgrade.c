/* An allowed upgrade (upgrade.h): the upstream's side made, its answer passed on, and on a
 * 101 the two connections joined (tunnel.h); the forward module's (forward.h). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/common/headers.h"
#include "gateway/common/log.h"
#include "gateway/core/pipeline.h"
#include "gateway/modules/forward/exchange.h"
#include "gateway/upstream/tunnel.h"

/* Whether the request asks to switch its connection to one of the route's upgrades: an
 * HTTP/1.1 request, an Upgrade field naming one protocol the route lists, and Connection naming
 * upgrade. Any other Upgrade (h2c, a protocol not listed, an HTTP/1.0 request's) is dropped as
 * the hop-by-hop field it is, and the request goes as a plain one. */
void gw_exchange_read_upgrade(struct gw_req *rq, struct exchange *x)
{
    const struct config_route *route = gw_req_route(rq);
    char *field;

    if (!rq->http11 || rq->connection == NULL || !gw_header_list_has(rq->connection, "upgrade"))
        return;
    field = gw_fields_join(&rq->fields, "Upgrade");
    for (size_t i = 0; field != NULL && i < route->forwarding.n_upgrades && x->upgrade == NULL; i++)
        if (strcasecmp(field, route->forwarding.upgrades[i]) == 0)
            x->upgrade = route->forwarding.upgrades[i];
    if (x->upgrade == NULL)
        free(field);
    else
        x->upgrade_field = field;
}

/* Whether the client sent nothing after its upgrade request: it may speak after the switch
 * only once it has the 101, and bytes already behind the request would reach the upstream
 * unread by sluice. */
static bool client_quiet(const struct gw_req *rq)
{
    return rq->io->quiet(rq);
}

/* What the tunnel's close runs: what the request held for its connection (gw_req_hold(): a
 * concurrency slot lasts as long as the tunnel), then the adapter's close. */
struct close_chain {
    void (*close)(void *cls);
    void *cls;
    struct gw_hold *holds;
};

static void chain_closed(void *arg)
{
    struct close_chain *chain = arg;

    gw_holds_release(chain->holds);
    chain->close(chain->cls);
    free(chain);
}

/* The two connections joined, or -1 with `*why`. */
static int join(struct gw_req *rq, struct exchange *x, const struct gw_switched *connection,
                const char **why)
{
    const struct config_route *route = gw_req_route(rq);
    struct close_chain *chain = malloc(sizeof *chain);
    struct gw_tunnel_spec spec = {
        .client_fd = connection->sock,
        .upstream = &x->up,
        .upstream_tls = strncmp(route->upstream.servers[x->server].url, "https:", 6) == 0,
        .client_tls = connection->tls,
        .client_early = connection->early,
        .client_early_len = connection->early_len,
        .idle_timeout_ns = route->forwarding.tunnel_idle_timeout_ns,
        .gauge = &gw_req_route_runtime(rq)->metrics->tunnels_open,
        .closed = chain_closed,
        .closed_cls = chain,
    };

    *why = "the client sent bytes before the 101";
    if (!client_quiet(rq)) {
        free(chain);
        return -1;
    }
    *why = "out of memory";
    if (chain == NULL)
        return -1;
    *chain = (struct close_chain){connection->close, connection->close_cls, gw_req_take_holds(rq)};
    if (gw_tunnel_open(rq->tunnels, &spec) != 0) {
        gw_holds_release(chain->holds); /* the connection closes now */
        free(chain);
        return -1;
    }
    return 0;
}

/* The adapter has sent the 101 and hands over the client's connection (NULL when it could
 * not, for want of memory: it closed it): the two are joined. The request is over for its
 * client then (a tunnel is no request in flight). */
static void switched(struct gw_req *rq, const struct gw_switched *connection)
{
    struct exchange *x = gw_req_ctx(rq, &gw_forward_module);
    const char *why = "out of memory";

    if (connection == NULL || join(rq, x, connection, &why) != 0) {
        gw_warn("route %s: an upgraded connection was closed at once: %s", gw_req_route(rq)->name,
                why);
        gw_upgrade_free(&x->up);
        if (connection != NULL)
            connection->close(connection->close_cls);
    }
    gw_exchange_close(x);
}

/* The upstream's 101, with its fields (the hop-by-hop ones aside); the upstream must switch
 * to the protocol asked: one Upgrade naming it, and Connection naming upgrade (RFC 9110 7.8). */
static enum gw_step answer_switch(struct gw_req *rq, struct exchange *x)
{
    struct gw_answer *a = &rq->answer;
    const char *name, *value, *upgrade = NULL;
    size_t cursor = 0;
    int upgrades = 0;
    bool connection_upgrade = false;

    while (gw_field_next(x->up.head, x->up.head_len, &cursor, &name, &value))
        if (strcasecmp(name, "Upgrade") == 0 && ++upgrades == 1)
            upgrade = value;
        else if (strcasecmp(name, "Connection") == 0)
            connection_upgrade |= gw_header_list_has(value, "upgrade");
    if (upgrades != 1 || !connection_upgrade || strcasecmp(upgrade, x->upgrade) != 0) {
        x->fault = GW_FAULT_INVALID;
        gw_upgrade_free(&x->up);
        return gw_exchange_failed(rq, x, GW_UPSTREAM_OTHER);
    }
    gw_answer_reset(a);
    a->status = 101;
    a->kind = GW_ANSWER_SWITCH;
    a->switched = switched;
    if (gw_answer_field(a, "Upgrade", upgrade) != 0 ||
        gw_exchange_answer_fields(rq, x->up.head, x->up.head_len) != 0) {
        gw_answer_reset(a);
        return GW_ANSWERED; /* no answer: the adapter closes the connection */
    }
    gw_pipeline_answer(rq);
    return GW_ANSWERED;
}

/* An answer other than 101 to an upgrade: passed on as any other (read whole: upgrade.h); the
 * upstream's connection is closed when the request ends. */
static enum gw_step answer_other(struct gw_req *rq, struct exchange *x)
{
    struct gw_answer *a = &rq->answer;

    gw_answer_reset(a);
    a->status = (unsigned)x->status;
    a->kind = GW_ANSWER_COPY;
    a->body = x->up.early;
    a->body_len = x->up.early_len;
    if (gw_exchange_answer_fields(rq, x->up.head, x->up.head_len) != 0) {
        gw_answer_reset(a);
        return GW_ANSWERED;
    }
    gw_pipeline_answer(rq);
    return GW_ANSWERED;
}

/* The upstream's answer to the upgrade is in: a failure is reported and maybe tried again
 * (retries:, as for any GET), a 101 switches, anything else is passed on. */
static enum gw_step upgrade_answered(struct gw_req *rq, struct exchange *x)
{
    enum gw_upstream_error error = GW_UPSTREAM_OK;

    x->fault = x->upgrade_failed ? x->up.fault : GW_FAULT_NONE;
    if (x->upgrade_failed)
        error = gw_fault_error(x->fault);
    if (gw_exchange_end(rq, x, error, x->upgrade_failed ? 0 : x->up.status)) {
        gw_upgrade_free(&x->up);
        x->upgrade_asked = false;
        return gw_exchange_upgrade(rq, x);
    }
    if (x->upgrade_failed) {
        gw_upgrade_free(&x->up);
        return gw_exchange_failed(rq, x, error);
    }
    gw_exchange_head_in(rq, x, x->up.status);
    if (x->up.status == 101)
        return answer_switch(rq, x);
    return answer_other(rq, x);
}

/* Where the request may block: the upstream's side of the upgrade. */
static void connect_upstream(struct gw_req *rq)
{
    struct exchange *x = gw_req_ctx(rq, &gw_forward_module);

    x->upgrade_failed = gw_upgrade_connect(&x->upgrade_fw, &x->up) != 0;
}

enum gw_step gw_exchange_upgrade(struct gw_req *rq, struct exchange *x)
{
    if (x->upgrade_asked)
        return upgrade_answered(rq, x);
    x->upgrade_asked = true;
    if (!client_quiet(rq)) {
        gw_req_refuse(rq, 400,
                      "the client sent bytes after its upgrade request before the "
                      "answer");
        return GW_ANSWERED;
    }
    if (gw_exchange_begin(rq, x, &x->upgrade_fw) != 0)
        return GW_ANSWERED;
    gw_req_aside(rq, connect_upstream);
    return GW_WAIT;
}
