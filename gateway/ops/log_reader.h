/*
 * Reading a log line by line in bounded memory, for `sluice simulate` (simulate.h): whatever
 * the input, a reader holds one fixed window of GW_LOG_READ_LINE_MAX + 1 bytes and nothing
 * else.
 *
 * The input is read with read(2) into the window, and each line is handed out where it lies
 * there (its newline removed), so most lines cost no copy; what is left of a line the window
 * ends in is moved to its start before the next read. A line that fills the window without a
 * newline is longer than any the access log writes: it is handed out as too long, without
 * its text, and the bytes up to its newline are read into the same window and dropped, never
 * held. A last line without a newline is a line (or too long) like any other.
 *
 *   window: |{"time":...}\n{"time":...}\n{"ti|    two lines handed out in place, then
 *           |{"ti.......                     |    the third's start moved down, read on
 *
 * The bound: the gateway formats each access log line in a buffer of GW_ACCESS_LINE_CAP
 * (4,096) bytes and never writes one that does not fit (access_log.c), so its lines are at
 * most 4,095 bytes with the newline (its fields' own caps add up to about 3.8 KiB). A line
 * up to sixteen times that, 64 KiB, is still read: room for fields a later gateway adds (the
 * parser skips those it does not know) and for a log passed through a tool that escapes
 * again, which writes at most six bytes ("\u00XX") for each one the gateway wrote (24 KiB).
 *
 * The end of the input and a failed read are told apart: a read that fails (a directory, an
 * I/O error; EINTR is read again) is an error, never the end, so a caller never takes part
 * of its input for the whole. One reader is used by one thread.
 */
#ifndef SLUICE_GATEWAY_LOG_READER_H
#define SLUICE_GATEWAY_LOG_READER_H

#include <stddef.h>

#include "gateway/ops/access_log.h"

#define GW_LOG_READ_LINE_MAX  (16 * GW_ACCESS_LINE_CAP) /* bytes of a line, without its newline */
#define GW_LOG_READER_ERR_LEN 256

enum gw_log_read {
    GW_LOG_READ_LINE,     /* a line, at *text for *len bytes */
    GW_LOG_READ_TOO_LONG, /* a line of more than GW_LOG_READ_LINE_MAX bytes, read and dropped */
    GW_LOG_READ_END,      /* the input ended: every line before was handed out */
    GW_LOG_READ_ERROR,    /* a read failed; the reason in `err` */
};

struct gw_log_reader;

/* A reader of `file`, or of standard input for "-" (left open when the reader is closed).
 * NULL with the reason in `err` when it cannot be opened. The caller closes it with
 * gw_log_reader_close(). */
struct gw_log_reader *gw_log_reader_open(const char *file, char err[GW_LOG_READER_ERR_LEN]);

/* The next line of `r`: for GW_LOG_READ_LINE its bytes (no newline, not NUL-terminated) at
 * `*text`, owned by the reader and valid until the next call. GW_LOG_READ_END comes again on
 * every call after; after GW_LOG_READ_ERROR (the reason in `err`) the input is given up. */
enum gw_log_read gw_log_reader_next(struct gw_log_reader *r, const char **text, size_t *len,
                                    char err[GW_LOG_READER_ERR_LEN]);

/* Closes the file (not standard input) and frees `r`; NULL is ignored. */
void gw_log_reader_close(struct gw_log_reader *r);

#endif
