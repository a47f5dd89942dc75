/*
 * Client identity: the string a route's limiter counts a request under.
 *
 *   ip            the client's address. The peer's own, unless the peer is a trusted proxy:
 *                 then X-Forwarded-For is walked from the right, skipping trusted addresses,
 *                 and the first untrusted one is the client. A client cannot pick its key by
 *                 sending the header itself, since only a trusted peer's header is read.
 *                 IPv6 clients are grouped by their /64 (ipv6_prefix), since one host holds
 *                 a whole /64. Key "ip:203.0.113.7" or "ip:2001:db8:1:2::/64".
 *                 An X-Forwarded-For entry is an IPv4 address, an IPv6 address, or one in
 *                 brackets, with spaces around it; after an IPv4 address or a bracketed one
 *                 a ":port" (1-5 digits, up to 65535) is allowed and ignored, as some load
 *                 balancers write it ("203.0.113.7:4711", "[2001:db8::1]:443"). An entry that
 *                 is none of these ("1.2.3.4:", "1.2.3.4:99999", "unknown") stops the walk:
 *                 no proxy of ours wrote it, so the last trusted hop is the client.
 *                 An IPv4-mapped IPv6 address (::ffff:203.0.113.7), from the socket or the
 *                 header, is the IPv4 address: same key, and IPv4 blocks in exempt and
 *                 trusted_proxies match it (the config turns ::ffff:10.0.0.0/104 into
 *                 10.0.0.0/8 likewise), so writing an address the other way buys no fresh
 *                 quota and no way past an exemption or trust decision.
 *   header:NAME   "header:" and the header's value (given once; the limit module refuses more);
 *   query:NAME    "query:" and the query parameter decoded (%XX and '+'; target.h says
 *                 which spellings are refused), so re-encoding a value gives no fresh quota.
 *                 Either falls back to the ip key when the request lacks it, so anonymous
 *                 clients are still limited. A value over 256 bytes is replaced by its
 *                 BLAKE2b digest ("header#<hex>").
 *
 * The limiter itself keeps only a 128-bit SipHash of the key, never the key.
 */
#ifndef SLUICE_GATEWAY_KEYS_H
#define SLUICE_GATEWAY_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "config/config.h"

#define GW_KEY_LEN       320 /* fits "query#" + a 64-char digest, or a 256-byte value */
#define GW_KEY_MAX_VALUE 256
#define GW_KEY_SOURCE_LEN 48 /* fits "header:" and a 40-byte name; longer names are cut */

struct gw_addr {
    int family; /* AF_INET (4 bytes used, the rest 0) or AF_INET6 (never IPv4-mapped) */
    unsigned char bytes[16];
};

/* From a socket address; an IPv4-mapped IPv6 address becomes IPv4. 0, or -1 if neither. */
int gw_addr_from_sockaddr(const struct sockaddr *sa, struct gw_addr *out);

/* One X-Forwarded-For entry of `len` bytes at `text` (no NUL needed): an address, optionally
 * bracketed, with an optional port as described above, spaces around it ignored. An
 * IPv4-mapped address comes out as AF_INET. 0, or -1 with `*out` meaningless. */
int gw_addr_parse(const char *text, size_t len, struct gw_addr *out);

bool gw_cidrs_contain(const struct config_cidrs *cidrs, const struct gw_addr *addr);

/* The client behind `peer`, given every X-Forwarded-For value joined by "," (or NULL). */
struct gw_addr gw_client_addr(const struct gw_addr *peer, const char *forwarded_for,
                              const struct config_cidrs *trusted);

/* The ip key of `addr`, IPv6 cut to `ipv6_prefix_len` bits. */
void gw_ip_key(const struct gw_addr *addr, unsigned ipv6_prefix_len, char out[GW_KEY_LEN]);

/* The key for `value` of a header or query parameter (`kind` "header" or "query"). */
void gw_value_key(const char *kind, const char *value, char out[GW_KEY_LEN]);

/* Where a key of `kind` and `name` comes from, as the access log names it: "ip",
 * "header:NAME" (NAME lower case: header names have no case), "query:NAME", or "consumer" when
 * `consumer` (a route that names consumers counts them as "consumer:NAME"). */
void gw_key_source(enum config_key_kind kind, const char *name, bool consumer,
                   char out[GW_KEY_SOURCE_LEN]);

#endif
