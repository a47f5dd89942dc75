/* Logging to stderr: one line per event, "TIME LEVEL message", written with a single write so
 * lines from different threads never interleave. */
#ifndef SLUICE_GATEWAY_LOG_H
#define SLUICE_GATEWAY_LOG_H

void gw_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define gw_info(...)  gw_log("info", __VA_ARGS__)
#define gw_warn(...)  gw_log("warn", __VA_ARGS__)
#define gw_error(...) gw_log("error", __VA_ARGS__)

#endif
