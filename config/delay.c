/* A limit's delay: how long a request it would deny may wait for its turn instead, and how
 * many may wait at once. See sections.h and config.h. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

#define MAX_WAIT  (60 * SECOND)
#define MAX_QUEUE 100000

const struct field config_delay_fields[] = {
    {"max", CONFIG_DURATION, offsetof(struct config_delay, max_ns), MILLISECOND, MAX_WAIT, NULL},
    {"queue", CONFIG_U32, offsetof(struct config_delay, queue), 1, MAX_QUEUE, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

void config_parse_delay(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_delay *delay = &((struct config_limit *)object)->delay;

    if (node->type != YAML_MAPPING_NODE || config_find_value(ld, node, "max") == NULL) {
        config_error(ld, node, "delay: expected {max: 1s, queue: 100}, max at least");
        return;
    }
    delay->queue = CONFIG_DEFAULT_DELAY_QUEUE;
    config_walk_mapping(ld, node, config_delay_fields, delay, "delay");
    delay->set = true;
}

/* Only a bucket can keep a waiting request's place at the instant it will pass (limiter.h,
 * limiter_reserve_all()): a window would count it in the window it was decided in, not the
 * one it passes in, and a log or a slot has no later instant to be kept at. */
static bool keeps_places(const struct config_limit *limit)
{
    return limiter_algorithm_takes_burst(limit->params.algorithm_id);
}

void config_check_delays(struct loader *ld, yaml_node_t *node, const struct config_limit *limits,
                         size_t n)
{
    const struct config_limit *delayed = NULL;

    for (size_t i = 0; i < n && delayed == NULL; i++)
        if (limits[i].delay.set)
            delayed = &limits[i];
    if (delayed == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = node->type == YAML_SEQUENCE_NODE
                                ? config_node_at(ld, node->data.sequence.items.start[i])
                                : node;

        if (keeps_places(&limits[i]))
            continue;
        if (limits[i].delay.set)
            config_error(ld, config_value_or_self(ld, item, "delay"),
                         "delay: %s cannot keep a waiting request's place; only token_bucket and "
                         "gcra can (a window would count it in the window it waited in)",
                         limits[i].params.algorithm);
        else
            config_error(ld, config_value_or_self(ld, item, "algorithm"),
                         "limit: %s cannot count a request at the instant it passes after "
                         "waiting (limit %s has delay:); beside a delay, every limit must be "
                         "token_bucket or gcra",
                         limits[i].params.algorithm, delayed->name ? delayed->name : "");
    }
}

/* A place kept at a bucket for an instant to come holds back every request of the bucket's key
 * before it (the bucket is charged at that instant). Within one key that is right: the
 * client's later requests wait behind it anyway, at the limit with the delay. Across keys it
 * would hold up other clients: a per-key limit's wait of a minute, kept at a per-address or
 * route-wide limit beside it, would refuse everyone else at that limit for the minute. */
void config_check_delay_keys(struct loader *ld, yaml_node_t *node, const struct config_route *route,
                             const struct config_limit *limits, size_t n)
{
    const struct config_limit *delayed = NULL;

    for (size_t i = 0; i < n && delayed == NULL; i++)
        if (limits[i].delay.set)
            delayed = &limits[i];
    for (size_t i = 0; delayed != NULL && i < n; i++)
        if (!config_same_key(limits[i].key_kind, limits[i].key_name, delayed->key_kind,
                             delayed->key_name)) {
            config_error(ld, node,
                         "limit: %s counts under another key than %s, which has delay:; beside a "
                         "delay every limit of route %s counts under one key (a place kept for a "
                         "waiting request would hold up other clients at the other)",
                         limits[i].name ? limits[i].name : "", delayed->name ? delayed->name : "",
                         route->name ? route->name : "");
            return;
        }
}
