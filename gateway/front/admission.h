/*
 * admission: max_connections and max_connections_per_ip across event mode's loops.
 *
 * Each loop's libmicrohttpd daemon counts only the connections it accepted itself, and
 * SO_REUSEPORT spreads one client's connections over all of them, so the caps are kept here,
 * once for the process: a connection is admitted when both counts stay within their caps, and
 * leaves when it closes. Counts per address live in a hash table of chained entries (an entry
 * is freed when its count falls to 0), under one mutex taken once when a connection opens and
 * once when it closes, never per request. (thread_per_connection has one daemon, whose own
 * caps are exact.)
 */
#ifndef SLUICE_GATEWAY_ADMISSION_H
#define SLUICE_GATEWAY_ADMISSION_H

#include <stdint.h>

#include "gateway/identity/keys.h"

struct gw_admission;

/* Caps of `max_total` connections and `max_per_ip` from one address (0: none). NULL when
 * memory is short; freed with gw_admission_free(). */
struct gw_admission *gw_admission_new(uint32_t max_total, uint32_t max_per_ip);
void gw_admission_free(struct gw_admission *admission);

/* Counts a connection from `peer` (NULL: not an IP peer) in, if the caps allow: 0, or -1
 * (then nothing is counted). */
int gw_admission_enter(struct gw_admission *admission, const struct gw_addr *peer);

/* Counts an admitted connection out. */
void gw_admission_leave(struct gw_admission *admission, const struct gw_addr *peer);

#endif
