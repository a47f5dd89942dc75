/*
 * Picking a request's route: among the routes whose methods and host accept the request, the
 * one with the longest path_prefix that the path starts with; ties go to the route listed
 * first. The path arrives already percent-decoded and normalized by the route module (gateway/modules/route), so
 * /%61pi/ cannot slip past a limit on /api/.
 *
 * What the gateway routes must be what the upstream will act on, and the Host header is
 * forwarded as the client sent it, so Host is read the way a virtual-hosting upstream reads it:
 *
 *   - gw_host_is_valid() comes first and refuses any Host that is not plainly
 *     uri-host [ ":" port ]: a name of letters, digits, '-', '.', '_', '~' and percent-encoded
 *     non-ASCII octets, with no empty label but one trailing dot (an IPv4 address is such a
 *     name); or a bracketed IPv6 literal; then at most a 1-5 digit port up to 65535.
 *     Userinfo ("a@b"), sub-delims, whitespace inside, a second colon, %XX standing for an
 *     ASCII character ("api%2Eexample.com", which one upstream decodes and another does not)
 *     are all refused rather than guessed at.
 *   - gw_route_match() then compares the Host to a route's match.host without case, without
 *     the port, without one trailing dot (the same DNS name: "API.example.com.:8443" matches
 *     "api.example.com", "api.example.com.." does not) and without surrounding SP/HTAB.
 *     "[::1]:8080" matches "::1".
 *
 * Methods are compared exactly (the config holds them upper case), except that a route
 * accepting GET also accepts HEAD: HEAD is GET without the body, and the upstream serves it
 * as such, so it must be counted and routed as GET is.
 */
#ifndef SLUICE_GATEWAY_ROUTES_H
#define SLUICE_GATEWAY_ROUTES_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"

/* The index of the matching route in config->routes, or -1. `host` is the request's Host
 * header as the client sent it, or NULL when it has none (then only routes without a host
 * match). Nothing is allocated. */
int gw_route_match(const struct config *config, const char *method, const char *path,
                   const char *host);

/* The same with path prefixes compared without case (ASCII letters): the route an upstream
 * that folds the path's case (ASP.NET, IIS) would serve the request as. The gateway refuses a
 * request for which the two differ. */
int gw_route_match_any_case(const struct config *config, const char *method, const char *path,
                            const char *host);

/* Whether `host`, a Host header as the client sent it, is one the gateway can route without
 * guessing (see above). NULL (no Host) and "" (allowed by HTTP/1.1) are valid; the caller
 * decides whether HTTP/1.1 requires one. Surrounding SP/HTAB is ignored. */
bool gw_host_is_valid(const char *host);

#endif
