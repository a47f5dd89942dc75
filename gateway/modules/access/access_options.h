/*
 * access options: the access module's YAML keys (config/blocks.h), server.deny and a route's
 * deny, each a list of addresses and CIDRs whose clients are refused 403 (on every route, or
 * on that one). Nothing here but config/ is needed: the config fuzzer links it alone.
 */
#ifndef SLUICE_GATEWAY_MODULES_ACCESS_OPTIONS_H
#define SLUICE_GATEWAY_MODULES_ACCESS_OPTIONS_H

#include "config/blocks.h"

struct access_options {
    struct config_cidrs deny;
};

/* Blocks of struct access_options: in server:, and in each route. */
extern struct config_block gw_access_server_options;
extern struct config_block gw_access_route_options;

#endif
