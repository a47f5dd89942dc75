/* The access log line of each request; design in log.h. */
#include <arpa/inet.h>

#include "gateway/common/text.h"
#include "gateway/modules/log/log.h"

struct log_ctx {
    char client[INET6_ADDRSTRLEN]; /* the client's address as text, while the line is made */
};

static void on_log(const struct gw_req *rq, void *ctx, struct gw_access_entry *entry)
{
    struct log_ctx *c = ctx;
    enum config_access_client client = rq->config->server.access_log_client;

    if (!rq->begun || rq->runtime->access_log_fd < 0)
        return;
    if (rq->has_peer && client == CONFIG_ACCESS_CLIENT_ADDRESS) {
        struct gw_text t = gw_text_on(c->client, sizeof c->client - 1);

        gw_text_address(&t, rq->client.family, rq->client.bytes);
        gw_text_finish(&t);
        entry->client = c->client;
    }
    gw_access_log_write(rq->runtime->access_log_fd, client, entry);
}

struct gw_module gw_log_module = {
    .name = "log",
    .ctx_size = sizeof(struct log_ctx),
    .on_log = on_log,
};
