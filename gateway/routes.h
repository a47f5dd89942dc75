/*
 * Picking a request's route: among the routes whose methods and host accept the request, the
 * one with the longest path_prefix that the path starts with; ties go to the route listed
 * first. The path is the one libmicrohttpd has already percent-decoded, so /%61pi/ cannot slip
 * past a limit on /api/.
 */
#ifndef SLUICE_GATEWAY_ROUTES_H
#define SLUICE_GATEWAY_ROUTES_H

#include "config.h"

/* The index of the matching route in config->routes, or -1. `host` is the request's Host
 * header (a port is ignored), or NULL. */
int gw_route_match(const struct config *config, const char *method, const char *path,
                   const char *host);

#endif
