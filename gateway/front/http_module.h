/*
 * http_module: the HTTP adapter's place in the pipeline (pipeline.h): a module with no step,
 * whose per-request context is the adapter's state of a request (request.c: its connection,
 * how it waits). Registered first (gateway/modules.c); declared apart from request.h so that
 * the wiring does not include libmicrohttpd.
 */
#ifndef SLUICE_GATEWAY_FRONT_HTTP_MODULE_H
#define SLUICE_GATEWAY_FRONT_HTTP_MODULE_H

#include "gateway/core/module.h"

extern struct gw_module gw_http_module;

#endif
