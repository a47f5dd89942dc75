/* The limit module's own keys; see limit_options.h. */
#include <stddef.h>

#include "gateway/modules/limit/limit_options.h"

static const struct config_option route_options[] = {
    {"exempt", CONFIG_CIDRS, offsetof(struct limit_options, exempt), 0, 0},
    {"dry_run", CONFIG_BOOL, offsetof(struct limit_options, dry_run), 0, 0},
    {NULL, 0, 0, 0, 0},
};

struct config_block gw_limit_route_options = {
    .owner = "limit",
    .place = CONFIG_IN_ROUTE,
    .options = route_options,
    .size = sizeof(struct limit_options),
};
