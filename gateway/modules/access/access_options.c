/* The access module's keys; see access_options.h. */
#include <stddef.h>

#include "gateway/modules/access/access_options.h"

static const struct config_option deny_option[] = {
    {"deny", CONFIG_CIDRS, offsetof(struct access_options, deny), 0, 0},
    {NULL, 0, 0, 0, 0},
};

struct config_block gw_access_server_options = {
    .owner = "access",
    .place = CONFIG_IN_SERVER,
    .options = deny_option,
    .size = sizeof(struct access_options),
};

struct config_block gw_access_route_options = {
    .owner = "access",
    .place = CONFIG_IN_ROUTE,
    .options = deny_option,
    .size = sizeof(struct access_options),
};
