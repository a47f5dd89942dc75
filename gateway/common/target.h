/*
 * target: reading the request target the way the upstream will, or refusing it.
 *
 * sluice forwards the target byte for byte, but routes and keys on what it means, so that
 * meaning must be the one every reasonable upstream agrees on. Where upstreams differ, the
 * request is refused (the reason is returned for the 400's body):
 *
 *   path    percent-decoded once, with runs of '/' merged into one, for routing:
 *           /%61pi//x is routed as /api/x. Refused: a '.' or '..' segment (decoded or not,
 *           and with path parameters: `..;x` is `..` to servlet containers),
 *           an encoded slash (%2F: one segment to some upstreams, two to others), a
 *           backslash, raw or encoded (a separator on some servers), a decoded NUL or other
 *           control character (the path would end there for C code), a '%' not followed by
 *           two hex digits, and a fragment ('#': libcurl would not send it).
 *   query   a key parameter is matched by its exact name, case-sensitively. Refused: the
 *           parameter given more than once, or under another spelling that decodes to it
 *           (`KEY`, `k%65y`, and for `api_key` also `api.key`: some frameworks fold case,
 *           decode names, or turn '.', ' ' and '[' into '_' as PHP does), or next to a ';'
 *           (some split on it), or a value that decodes to a control character or holds a
 *           '%' without two hex digits.
 *
 *   /%61pi//x?k%65y=a&key=b   path /api/x; the key `key` refused (spelled two ways)
 *
 * Path parameters (`/api;v=1/x`, which Java servlet containers serve as /api/x) and letter
 * case (`/API/x`, which ASP.NET serves as /api/x) are two more readings of a path: the route module
 * refuses a request when they would pick another route.
 */
#ifndef SLUICE_GATEWAY_TARGET_H
#define SLUICE_GATEWAY_TARGET_H

#include <stddef.h>

/* The routing path of `target` (which starts with '/') into `out` (at least as long as
 * target, plus one). 0, or -1 with `*reason` set (static text). */
int gw_target_path(const char *target, char *out, const char **reason);

/* Where, in `target`, the routing path's first `len` bytes end: a %XX counts as the one byte
 * it decodes to, a run of '/' as one '/' (the run taken whole). For strip_prefix: the rest of
 * the target, byte for byte, after the part that matched a route's path_prefix. */
const char *gw_target_after(const char *target, size_t len);

/* `path` (a routing path) without its path parameters (";v=1" up to the next '/'), into `out`
 * (as long as path, plus one): what Java servlet containers route by. */
void gw_target_strip_params(const char *path, char *out);

/* The decoded value of the query parameter `name` ('+' is a space) into `out` (at least as
 * long as target, plus one): 1 when found, 0 when absent, -1 refused with `*reason` set. */
int gw_target_query_value(const char *target, const char *name, char *out, const char **reason);

#endif
