/*
 * blocks: the YAML keys a module of the gateway owns. config/ reads the keys every route and
 * server: share; a module that brings keys of its own declares them here, in a block of its own
 * layout, and config/ reads them where they are written, with the same FILE:LINE:COL problems,
 * the same unknown-key guesses, and frees them with the config. Nothing in config/ names the
 * module or its keys.
 *
 * A module declares its options (key, type, where in its block, bounds) and the block:
 *
 *   struct access_options {
 *       struct config_cidrs deny;
 *   };
 *
 *   static const struct config_option deny_option[] = {
 *       {"deny", CONFIG_CIDRS, offsetof(struct access_options, deny), 0, 0},
 *       {NULL, 0, 0, 0, 0},
 *   };
 *
 *   struct config_block gw_access_route_options = {
 *       .owner = "access", .place = CONFIG_IN_ROUTE, .options = deny_option,
 *       .size = sizeof(struct access_options),
 *   };
 *
 * registers it once, before any config is loaded (the gateway's modules do it through
 * gw_pipeline_register()), and reads a route's with
 *
 *   const struct access_options *o = config_route_block(route, &gw_access_route_options);
 *
 * so `deny: ["10.0.0.0/33"]` in a route is reported as `sluice.yaml:9:12: deny: "10.0.0.0/33"
 * is not an address or CIDR`, and `dney:` as an unknown key with deny guessed. A key may not be
 * both config/'s and a block's, nor two blocks'. Each route gets its own block, zeroed and then
 * given the block's defaults before its keys are read.
 *
 * Types: CONFIG_STRING (char *, allocated), CONFIG_DURATION (int64_t ns; bounds in ns when
 * max is not 0), CONFIG_SIZE (uint64_t bytes; likewise), CONFIG_U32 and CONFIG_U64 (bounds
 * min..max), CONFIG_BOOL, CONFIG_CIDRS (struct config_cidrs, allocated), CONFIG_ENDPOINT
 * (struct config_endpoint, host allocated). CONFIG_CUSTOM is config/'s own tables' only.
 *
 * The registry is filled at start-up, before any thread loads a config, and only read after.
 */
#ifndef SLUICE_CONFIG_BLOCKS_H
#define SLUICE_CONFIG_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

enum config_type {
    CONFIG_STRING,
    CONFIG_DURATION,
    CONFIG_SIZE,
    CONFIG_U32,
    CONFIG_U64,
    CONFIG_BOOL,
    CONFIG_CIDRS,
    CONFIG_ENDPOINT,
    CONFIG_CUSTOM
};

/* Where a block's keys are written: in server:, or in each route. */
enum config_place { CONFIG_IN_SERVER, CONFIG_IN_ROUTE };

/* One key of a block: its name, its type, where its value goes in the block, and its bounds
 * (for CONFIG_U32 and CONFIG_U64; for CONFIG_DURATION and CONFIG_SIZE when max is not 0). */
struct config_option {
    const char *key;
    enum config_type type;
    size_t offset;
    uint64_t min, max;
};

struct config_block {
    const char *owner; /* the module's name */
    enum config_place place;
    const struct config_option *options; /* ends with a NULL key */
    size_t size;                         /* of the block */
    void (*defaults)(void *block);       /* on the zeroed block, before its keys; or NULL */
    unsigned slot;                       /* 1 + its index, set by config_block_register() */
};

/* Adds `block` to what every load reads; registering it again changes nothing. 0; or -1 when
 * CONFIG_BLOCKS_MAX blocks are, or one of its keys is already known where it is written. */
int config_block_register(struct config_block *block);

/* The block `block` read for `route` (or for server:), owned by the config; NULL when the block
 * was not registered when the config was loaded. */
const void *config_route_block(const struct config_route *route, const struct config_block *block);
const void *config_server_block(const struct config *config, const struct config_block *block);

#endif
