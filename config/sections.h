/*
 * sections: what the files that parse the config's sections offer one another and the top
 * level (load.c). Internal to config/: nothing outside it includes this header.
 *
 * One file per section or group of sections, each holding its tables of keys (loader.h), the
 * custom parsers they name, and the checks that guard its invariants:
 *
 *   server.c     server:, with its access_log: and tls:
 *   admin.c      server:'s keys of the admin listener's credential (admin_token...)
 *   log.c        log: and tracing:
 *   routes.c     routes: and a route's match:, names, store:, headers:; the checks across
 *                routes (a name twice, a route an earlier one shadows)
 *   upstream.c   an upstream's block (servers, balancing, passive and active health), a
 *                route's upstream: and retries:
 *   upstreams.c  upstreams:, the named upstreams that routes share
 *   urls.c       the URLs of upstream: and proxy:, read with libcurl's parser (the one file
 *                here that names libcurl)
 *   forward.c    what a route changes in the requests it forwards: host:, set_headers:,
 *                remove_headers:, upgrades:
 *   limits.c     limiter:, and a route's key:, limit: (or a list of them) and on_limit:
 *   count.c      a limit's count: (which answers its charge stands for)
 *   plans.c      plans:, the top level's and a route's own, resolved for each route
 *   consumers.c  consumers:, and consumers_file: read as a stream
 *
 * A section is entered through a custom parser that the table above it names (the top level's
 * routes: calls config_parse_routes(), a route's upstream: config_parse_upstream()), and lists
 * its tables in a `config_*_keys` array for config_known_keys(). What can be judged only once
 * the whole file is read runs from config_parse(), in this order: config_resolve_upstreams(),
 * config_read_consumers_file(), config_check_consumers(), config_resolve_plans() (these three
 * only while there is no problem yet), config_check_underscore_keys(),
 * config_check_log_memory().
 */
#ifndef SLUICE_CONFIG_SECTIONS_H
#define SLUICE_CONFIG_SECTIONS_H

#include <stddef.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"

/* server.c */
extern const struct key_table config_server_keys[];
void config_parse_server(struct loader *ld, yaml_node_t *node, void *object);

/* admin.c: server.admin_token and admin_token_file (server_fields' custom parsers), and the
 * check across them, admin_quota and admin_listen, once server: is read. */
void config_parse_admin_token(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_admin_token_file(struct loader *ld, yaml_node_t *node, void *object);
void config_check_admin(struct loader *ld, yaml_node_t *server, struct config *config);

/* log.c */
extern const struct key_table config_log_keys[];
void config_parse_log(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_tracing(struct loader *ld, yaml_node_t *node, void *object);

/* routes.c */
extern const struct key_table config_route_keys[];
void config_parse_routes(struct loader *ld, yaml_node_t *node, void *object);

/* upstream.c: an upstream's block, a route's upstream: and retries:. */
extern const struct key_table config_upstream_keys[];
void config_upstream_defaults(struct config_upstream *up);
void config_parse_upstream_block(struct loader *ld, yaml_node_t *node, const char *key,
                                 struct config_upstream *up);
void config_parse_upstream(struct loader *ld, yaml_node_t *node, void *object);
void config_free_upstream(struct config_upstream *up);
void config_parse_retries(struct loader *ld, yaml_node_t *node, void *object);

/* upstreams.c: the top level's upstreams:, and the routes that name one of them. */
void config_parse_upstreams(struct loader *ld, yaml_node_t *node, void *object);
void config_resolve_upstreams(struct loader *ld, yaml_node_t *root, struct config *config);

/* urls.c: one server's URL, http(s)://host[:port][/base-path], into `server` (`key`, upstream,
 * servers or url, names it in errors); and proxy:, scheme://host:port. */
void config_parse_server_url(struct loader *ld, yaml_node_t *node, const char *key,
                             struct config_server *server);
void config_parse_proxy(struct loader *ld, yaml_node_t *node, void *object);

/* forward.c: a route's host:, set_headers:, remove_headers: and upgrades:. */
void config_parse_route_host(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_set_headers(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_remove_headers(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_upgrades(struct loader *ld, yaml_node_t *node, void *object);

/* limits.c: limiter:, and a route's key:, limit: and on_limit:. */
extern const struct key_table config_limit_keys[];
void config_parse_limiter(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_route_key(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_limit(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_on_limit(struct loader *ld, yaml_node_t *node, void *object);

/* delay.c: a limit's delay:, and the check that every limit of a set with one can keep a
 * waiting request's place (the buckets), reported at `node` (the limit: mapping or list). */
extern const struct field config_delay_fields[];
void config_parse_delay(struct loader *ld, yaml_node_t *node, void *object);
void config_check_delays(struct loader *ld, yaml_node_t *node, const struct config_limit *limits,
                         size_t n);
/* And, once each limit of `route`'s set knows its key, that they all count under one key: a
 * request waiting for its turn holds its place in every limit of its set, which must hold up
 * no other client's requests. */
void config_check_delay_keys(struct loader *ld, yaml_node_t *node, const struct config_route *route,
                             const struct config_limit *limits, size_t n);

/* count.c: a limit's count:. */
extern const struct field config_count_fields[];
void config_parse_count(struct loader *ld, yaml_node_t *node, void *object);

/* One limit mapping, or a list of named ones, into `*limits` (allocated); a single unnamed
 * limit is named `name`. For a route's limit: and for each plan. */
void config_parse_limit_list(struct loader *ld, yaml_node_t *node, const char *name,
                             struct config_limit **limits, size_t *n_limits);

/* Gives each of `limits` that names no key of its own the route's key, and marks each that
 * counts under the route's key (config_limit.route_key). Once the route's key is known. */
void config_inherit_route_key(struct loader *ld, yaml_node_t *node,
                              const struct config_route *route, struct config_limit *limits,
                              size_t n_limits);

/* A deep copy of `n` limits into `*out` (allocated, freed with config_free_limits()); 0, or
 * -1 when memory is short. */
int config_copy_limits(const struct config_limit *from, size_t n, struct config_limit **out);
void config_free_limits(struct config_limit *limits, size_t n);

/* Once the whole file is read: key: header names with '_' against
 * server.underscores_in_headers, and sliding_window_log limits against limiter.max_memory. */
void config_check_underscore_keys(struct loader *ld, const struct config *config);
void config_check_log_memory(struct loader *ld, const struct config *config);

/* plans.c: the top level's plans: and a route's own. */
void config_parse_plans(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_route_plans(struct loader *ld, yaml_node_t *node, void *object);

/* The index of the plan `name` in `plans`, or -1. */
int config_plan_index(const struct config_plan *plans, size_t n_plans, const char *name);
void config_free_plans(struct config_plan *plans, size_t n);

/* Once the whole file is read: each route's plan:, plans: and unknown_key: resolved against
 * the top-level plans and the consumers. `root` is the document's top level. */
void config_resolve_plans(struct loader *ld, yaml_node_t *root, struct config *config);

/* consumers.c */
extern const struct key_table config_consumer_keys[];
void config_parse_consumers(struct loader *ld, yaml_node_t *node, void *object);
void config_parse_consumers_file(struct loader *ld, yaml_node_t *node, void *object);

/* Once the whole file is read: the consumers of config->consumers_file, after the config's
 * own; then no two consumers share a name or a key, and each one's plan exists. */
void config_read_consumers_file(struct loader *ld, struct config *config);
void config_check_consumers(struct loader *ld, struct config *config);

#endif
