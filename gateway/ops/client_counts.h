/*
 * client_counts: how many of its requests each client had denied, for the reports of `sluice
 * simulate` (simulate.h), keyed by the 64-bit hash the access log names a client by, with
 * the name of the consumer it is where the log says.
 *
 * An open-addressing table of hashes and counts, doubled when half full; a count of 0 marks a
 * free slot. At most `max` clients are named: once the table holds that many, the denials of
 * clients not in it are only summed in `unnamed`, so a log of a million clients costs a
 * bounded table. One table is used by one thread.
 */
#ifndef SLUICE_GATEWAY_CLIENT_COUNTS_H
#define SLUICE_GATEWAY_CLIENT_COUNTS_H

#include <stddef.h>
#include <stdint.h>

#define GW_CLIENT_COUNTS_TOP 10 /* the clients a report names */

/* Zeroed (with `max` set) before the first call; freed with gw_client_counts_free(). */
struct gw_client_counts {
    uint64_t *hashes, *denials; /* denials 0: a free slot */
    const char **names;         /* the consumer's name, or NULL; not owned */
    size_t cap, n, max;
    uint64_t unnamed; /* denials of clients past `max` */
};

/* Adds `denials` to the client `hash`, which is the consumer `name` (NULL: none known; else a
 * string that outlives the table). 0, or -1 when memory is short to grow the table (then
 * these denials are not counted, and the table is as it was). */
int gw_client_counts_add(struct gw_client_counts *c, uint64_t hash, uint64_t denials,
                         const char *name);

/* The denials counted for `hash` (0 for a client not named). */
uint64_t gw_client_counts_get(const struct gw_client_counts *c, uint64_t hash);

/* The slots of `c` (indexes into hashes, denials and names) with the most denials, most first, up
 * to GW_CLIENT_COUNTS_TOP of them; how many. */
size_t gw_client_counts_top(const struct gw_client_counts *c, size_t top[GW_CLIENT_COUNTS_TOP]);

/* Frees what `c` holds (not `c` itself). */
void gw_client_counts_free(struct gw_client_counts *c);

#endif
