/* Who the client is to a route's limits; design in identify.h. */
#include <stdlib.h>
#include <string.h>

#include "gateway/common/headers.h"
#include "gateway/common/target.h"
#include "gateway/modules/limit/identify.h"

static int header_value(struct gw_req *rq, const char *name, const char **value)
{
    unsigned n = gw_fields_count(&rq->fields, name, value);
    bool dropped = rq->connection != NULL && gw_header_is_hop_by_hop(name, rq->connection) &&
                   !gw_header_is_hop_by_hop(name, NULL);

    if (n <= 1 && !dropped)
        return 0;
    gw_req_refuse(rq, 400,
                  dropped ? "the Connection field names the key header, which would not reach "
                            "the upstream"
                          : "the key header is given more than once");
    return -1;
}

static int query_value(struct gw_req *rq, const char *name, const char **value, char **decoded)
{
    const char *reason = NULL;
    int found;

    *decoded = malloc(strlen(rq->target) + 1);
    if (*decoded == NULL) {
        gw_req_refuse(rq, 503, "out of memory");
        return -1;
    }
    found = gw_target_query_value(rq->target, name, *decoded, &reason);
    if (found < 0) {
        free(*decoded);
        *decoded = NULL;
        gw_req_refuse(rq, 400, reason);
        return -1;
    }
    *value = found > 0 ? *decoded : NULL; /* absent: nothing was written there */
    return 0;
}

int gw_identify_value(struct gw_req *rq, enum config_key_kind kind, const char *name,
                      const char **value, char **decoded)
{
    *value = NULL;
    *decoded = NULL;
    if (kind == CONFIG_KEY_HEADER)
        return header_value(rq, name, value);
    if (kind == CONFIG_KEY_QUERY)
        return query_value(rq, name, value, decoded);
    return 0;
}

int gw_identify_key(struct gw_req *rq, enum config_key_kind kind, const char *name,
                    char out[GW_KEY_LEN])
{
    const char *value;
    char *decoded;

    if (gw_identify_value(rq, kind, name, &value, &decoded) != 0)
        return -1;
    if (value != NULL && value[0] != '\0')
        gw_value_key(kind == CONFIG_KEY_HEADER ? "header" : "query", value, out);
    else
        gw_ip_key(&rq->client, gw_req_route(rq)->ipv6_prefix_len, out);
    free(decoded);
    return 0;
}

int gw_identify_consumer(struct gw_req *rq, const struct gw_consumer **out)
{
    const struct config_route *route = gw_req_route(rq);
    const struct gw_consumer *consumer = NULL;
    const char *value;
    char *decoded;

    if (gw_identify_value(rq, route->key_kind, route->key_name, &value, &decoded) != 0)
        return -1;
    if (value != NULL && value[0] != '\0')
        consumer = gw_consumers_find(rq->runtime->consumers, value, strlen(value));
    free(decoded);
    if (consumer != NULL) {
        rq->consumer = consumer->name;
        rq->plan = rq->config->plans[consumer->plan].name;
    }
    *out = consumer;
    return 0;
}
