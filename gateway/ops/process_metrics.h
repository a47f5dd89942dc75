/*
 * process_metrics: what every Prometheus exporter says of its process, and what sluice is
 * built of.
 *
 *   sluice_build_info{version,libmicrohttpd,libcurl,hiredis,libyaml,gnutls,libsodium} 1
 *   process_cpu_seconds_total        user and system CPU time
 *   process_open_fds                 file descriptors open now (/proc/self/fd)
 *   process_max_fds                  RLIMIT_NOFILE's soft limit
 *   process_virtual_memory_bytes
 *   process_resident_memory_bytes
 *   process_start_time_seconds       since the Unix epoch
 *
 * The process_* series have the names, types and meanings of the Prometheus client
 * libraries' process collector, read from /proc at scrape time; one that cannot be read is
 * left out rather than given as 0. The build info is set once at start, before any scrape.
 */
#ifndef SLUICE_GATEWAY_OPS_PROCESS_METRICS_H
#define SLUICE_GATEWAY_OPS_PROCESS_METRICS_H

#include <stdio.h>

/* The labels of sluice_build_info, `name="value"` pairs joined by commas (copied; values are
 * version strings, which need no escaping). Before the first scrape. */
void gw_process_set_build_info(const char *labels);

/* The lines above, in the Prometheus text format. */
void gw_process_metrics_render(FILE *out);

#endif
