/*
 * limit options: the limit module's own YAML keys in a route (config/blocks.h). exempt lists
 * the addresses and CIDRs of clients no limit counts (decision "exempt"); dry_run (default
 * false) asks the limits but forwards what they refuse (decision "dry_run_denied"). The keys
 * that `sluice simulate` reads too (key, limit, plans, consumers) config/ reads itself.
 * Nothing here but config/ is needed: the config fuzzer links it alone.
 */
#ifndef SLUICE_GATEWAY_MODULES_LIMIT_OPTIONS_H
#define SLUICE_GATEWAY_MODULES_LIMIT_OPTIONS_H

#include <stdbool.h>

#include "config/blocks.h"

struct limit_options {
    struct config_cidrs exempt;
    bool dry_run;
};

/* A block of struct limit_options in each route. */
extern struct config_block gw_limit_route_options;

#endif
