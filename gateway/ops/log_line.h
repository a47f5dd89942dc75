/*
 * Reading back one line of sluice's own access log (access_log.h) for `sluice simulate`: the
 * fields a replay needs, parsed strictly. The line is the gateway's format, not any JSON: one
 * flat object of strings and numbers plus the object "keys" of strings; strings hold the
 * escapes gw_json_escape() writes (\" \\ \u00XX and \ufffd) and \/; anything else (another nesting,
 * an array, true/false/null, a raw control character, a field given twice, text after the
 * object) makes the line malformed, with the reason, rather than guessed at. Fields it does
 * not need are checked for shape and skipped, so a line with fields added later still reads.
 *
 *   {"time":"...","route":"api","method":"GET","path":"/api/x","host":"api.example.com",
 *    "decision":"denied","decided_ns":1795946400121456789,"keys":{"ip":"9f2c4e1a7b3d5f60"}}
 *
 * Needed: method, path, decided_ns and keys (a line from before they were logged is
 * malformed: it cannot be replayed). host, consumer and decision are read when present (""
 * otherwise), and status (0 otherwise).
 * Each key is a source of at most GW_KEY_SOURCE_LEN - 1 bytes and a hash of 16 lower-case hex
 * digits.
 *
 * Speed (a replay reads a million lines a second): the fields read are one table of {name,
 * member}, a name is matched by its length, first byte and memcmp where it lies in the line
 * (copied only when it holds an escape), and the plain runs of a string, most of a line, are
 * stepped over eight bytes at a time.
 */
#ifndef SLUICE_GATEWAY_LOG_LINE_H
#define SLUICE_GATEWAY_LOG_LINE_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/identity/keys.h"
#include "gateway/ops/access_log.h"

#define GW_LOG_PATH_MAX 1024 /* the access log's bound on path */

struct gw_log_line {
    char method[49];
    char path[GW_LOG_PATH_MAX + 1];
    char host[GW_ACCESS_HOST_MAX + 1];
    char consumer[65]; /* the consumer's name (config.h: 64 at most), "" for none */
    char decision[32]; /* the outcome the gateway logged ("denied", ...), "" when absent */
    int64_t decided_ns;
    int64_t status; /* the status the client was answered; 0 when absent */
    struct {
        char source[GW_KEY_SOURCE_LEN];
        char hash[17];
    } keys[GW_ACCESS_KEYS_MAX];
    size_t n_keys;
};

/* Parses the `len` bytes at `text` (one line, its newline removed) into `out`. 0, or -1 with
 * `*reason` set (static text). Nothing is allocated. */
int gw_log_line_parse(const char *text, size_t len, struct gw_log_line *out, const char **reason);

/* The hash of the key of `source` in `line`, or NULL when the line has none. */
const char *gw_log_line_key(const struct gw_log_line *line, const char *source);

#endif
