/*
 * store_resolve: limiter.redis.address's host name turned into an address by a call's
 * deadline.
 *
 * hiredis resolves a name with getaddrinfo(), which nothing bounds: a resolver that does not
 * answer holds the caller for its own timeouts and attempts (5 s, twice, by resolv.conf's
 * defaults), and a store thread held there would leave the requests whose calls it carries
 * waiting long past limiter.redis.timeout, in either serving mode. So a store thread resolves
 * the name itself, with glibc's asynchronous getaddrinfo_a(), waits for it in gai_suspend() no
 * longer than the call's time left, and hands hiredis the numeric address. A lookup still
 * under way when one call's time runs out is not begun again by the next call: that one waits
 * on the same lookup, so a slow resolver is asked once, not once a call. An address written
 * as numbers (127.0.0.1, ::1) needs no lookup. Of a name's addresses an IPv4 one comes first,
 * as hiredis takes them.
 *
 * Each store thread has its own lookup, used by it alone.
 */
#ifndef SLUICE_GATEWAY_STORE_RESOLVE_H
#define SLUICE_GATEWAY_STORE_RESOLVE_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gw_store_lookup;

/* `host` as a numeric address in `ip` by `deadline_ns` (limiter_now_ns()'s clock), through
 * `*lookup` (NULL at first: made here, freed with gw_store_lookup_end()). 0; or -1 with a
 * sentence in `why`, `*timed_out` set when the deadline passed first. */
int gw_store_resolve(struct gw_store_lookup **lookup, const char *host, int64_t deadline_ns,
                     char ip[INET6_ADDRSTRLEN], bool *timed_out, char *why, size_t why_len);

/* Lets go of `lookup` (NULL: nothing). One still under way is cancelled; one glibc can no
 * longer cancel is left to it, with its copy of the name, and finishes unread. */
void gw_store_lookup_end(struct gw_store_lookup *lookup);

#endif
