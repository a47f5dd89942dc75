/*
 * log module: the access log line of each request (access_log.h), once, as it ends for its
 * client: its own fields (request.h) and every module's (their on_log, which run before this
 * one: it is registered last). The client's address is written where server.access_log_client
 * says so.
 *
 * Its YAML keys: server.access_log, server.access_log_client (config/log.c). Its per-runtime
 * state: the log's file descriptor (runtime.h).
 */
#ifndef SLUICE_GATEWAY_MODULES_LOG_H
#define SLUICE_GATEWAY_MODULES_LOG_H

#include "gateway/core/module.h"

extern struct gw_module gw_log_module;

#endif
