/*
 * log: sluice's two logs and the queues that keep them off the request path.
 *
 * The error log is stderr, one line per event, in the format the config's log.format names:
 *
 *     2026-12-01T10:00:00.123Z warn route api: tls_verify is false: ...          (text)
 *     {"time":"2026-12-01T10:00:00.123Z","level":"warn","msg":"route api: ..."}  (json)
 *
 * Lines below log.level are not even formatted. A message never spans lines: in text its
 * control characters are written as \n, \r, \t or \xNN, in json they are JSON-escaped
 * (respond.h's gw_json_escape(), as the access log's strings). The format and level are
 * process-wide and change at once on reload (gw_log_configure()); before the config is read
 * they are text and info. The access log is wherever server.access_log says (access_log.h
 * formats its lines).
 *
 * A write() to a pipe blocks once its reader stops reading and the pipe's 64 KiB are full; a
 * request thread blocked there holds its connection forever, and at max_connections the gateway
 * stops answering. So only a log's own writer thread ever writes to it: every other thread copies
 * its line into the log's queue under the queue's mutex (never held across a write) and goes on.
 * The writer sends whole lines in batches of at most PIPE_BUF bytes, so a line never interleaves
 * with another process's writes to a shared pipe. Each log has its own queue and writer, so a
 * stalled access-log reader does not silence the error log.
 *
 * A queue holds at most 256 KiB of text (the access log's; 64 KiB the error log's). A line
 * that does not fit is dropped and counted, and so is a line whose write fails (a full disk):
 * sluice_log_dropped_total{log}.
 * Example: stdout on a pipe nobody reads, access lines of 250 bytes: the first 260 fill the
 * pipe, the next 1,000 the queue's 256 KiB, and from then on each request's line is dropped
 * and counted while the request itself is answered as usual.
 *
 * Life cycle: before gw_log_start() lines are written directly, by the caller (start-up: one
 * thread, nothing to hold up); after gw_log_stop() they are dropped.
 */
#ifndef SLUICE_GATEWAY_LOG_H
#define SLUICE_GATEWAY_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

enum gw_log_stream { GW_LOG_ERROR, GW_LOG_ACCESS, GW_N_LOG_STREAMS };

/* Longest line queued whole; a longer one is dropped (the logs' lines are at most 2 KiB). */
#define GW_LOG_LINE_MAX 4096

/* Logs one line at `level` on stderr, unless below the configured level. */
void gw_log(enum config_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define gw_debug(...) gw_log(CONFIG_LOG_DEBUG, __VA_ARGS__)
#define gw_info(...)  gw_log(CONFIG_LOG_INFO, __VA_ARGS__)
#define gw_warn(...)  gw_log(CONFIG_LOG_WARN, __VA_ARGS__)
#define gw_error(...) gw_log(CONFIG_LOG_ERROR, __VA_ARGS__)

/* Sets the error log's format and least level (log: in the config); safe from any thread,
 * each line is written whole in one format or the other. */
void gw_log_configure(enum config_log_format format, enum config_log_level level);

/* Whether a line at `level` would be written now. */
bool gw_log_enabled(enum config_log_level level);

/* Queues `len` bytes (whole lines, newline included) for `fd` on `stream`'s queue, or drops and
 * counts them; never waits on `fd`. `fd` need only stay open for the call: a file other than
 * stdin, stdout or stderr is written through a duplicate the queue keeps while it has lines
 * for it. */
void gw_log_line(enum gw_log_stream stream, int fd, const char *line, size_t len);

/* Starts the writer threads. 0, or -1 (then lines go on being written directly). */
int gw_log_start(void);

/* Lets the writers empty their queues for up to `timeout_ns` in all, then stops them (one
 * blocked in write() is cancelled there); what is still queued is dropped and counted. */
void gw_log_stop(int64_t timeout_ns);

/* Lines of `stream` that never reached it: its queue was full, or the write failed. */
uint64_t gw_log_dropped(enum gw_log_stream stream);

/* A log line that can come in floods (an accept() failing in a loop, a refused connection per
 * client retry) is logged at most once per interval:
 *
 *     static struct gw_log_limit refusals;
 *     uint64_t more;
 *     if (gw_log_limit_pass(&refusals, now_ns, 1000000000, &more))
 *         gw_warn("refused a connection (%llu more since the last line)", more);
 *
 * Zero-initialised; safe from any thread. */
struct gw_log_limit {
    _Atomic int64_t next_ns;     /* no line before this time */
    _Atomic uint64_t suppressed; /* events not logged since the last line */
};

/* True when a line may be logged at `now_ns`, with `*suppressed` set to the events held back
 * since the last one; false (the event counted as held back) otherwise. */
bool gw_log_limit_pass(struct gw_log_limit *limit, int64_t now_ns, int64_t interval_ns,
                       uint64_t *suppressed);

#endif
