/*
 * Which headers a proxy must not pass on (RFC 9110 section 7.6.1): the hop-by-hop fields, and
 * every field that the message's own Connection header names. Applied in both directions.
 */
#ifndef SLUICE_GATEWAY_HEADERS_H
#define SLUICE_GATEWAY_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

/* True when the header `name` stops at this hop. `connection` is the message's Connection
 * value (all of its Connection fields joined with ","), or NULL. */
bool gw_header_is_hop_by_hop(const char *name, const char *connection);

/* Walks a head's fields kept as "name\0value\0" pairs in `fields` (`len` bytes): start with
 * *cursor = 0; false after the last. */
bool gw_field_next(const char *fields, size_t len, size_t *cursor, const char **name,
                   const char **value);

/* True when the comma-separated `list` (a field's value) holds `token`, in any case. */
bool gw_header_list_has(const char *list, const char *token);

#endif
