/*
 * proxy_header: reads the PROXY protocol header (HAProxy's, versions 1 and 2) that a load
 * balancer sends before a connection's first byte, to say whom the connection is really from.
 *
 * Version 1 is one line of text, at most 107 bytes with its CRLF:
 *
 *     PROXY TCP4 203.0.113.7 192.0.2.1 51234 443\r\n
 *     PROXY TCP6 2001:db8::7 2001:db8::1 51234 443\r\n
 *     PROXY UNKNOWN\r\n                  (anything may follow UNKNOWN up to the CRLF)
 *
 * Version 2 is binary: a 12-byte signature, a version/command byte (0x20 LOCAL, 0x21 PROXY),
 * a family/protocol byte (0x11 TCP over IPv4, 0x21 TCP over IPv6, 0x31 a UNIX stream, 0x00
 * unspecified), a 16-bit length, then the addresses and ports, then TLVs that fill the rest.
 *
 * The reading is strict, since the header decides whose address every later check sees:
 * single spaces, addresses as inet_pton() reads them (no leading zeros), ports in decimal
 * without leading zeros, a v2 length that holds the addresses its family needs and TLVs that
 * fill it exactly. UDP families are refused: this is a stream. LOCAL (a health check from the
 * balancer itself), UNKNOWN, UNSPEC and UNIX headers carry no usable address, and the
 * connection keeps its own peer's.
 *
 * The caller peeks at what has arrived and consumes nothing until the header is whole: then
 * exactly `length` bytes, so the first byte of HTTP (or of a TLS handshake) stays unread.
 */
#ifndef SLUICE_GATEWAY_PROXY_HEADER_H
#define SLUICE_GATEWAY_PROXY_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Versions the caller accepts (a mask). */
#define GW_PROXY_HEADER_V1 1u
#define GW_PROXY_HEADER_V2 2u

/* The longest header read: v1's 107 bytes, or v2's 16 and up to this much after them. */
#define GW_PROXY_HEADER_V2_MAX_BODY 1024
#define GW_PROXY_HEADER_MAX         (16 + GW_PROXY_HEADER_V2_MAX_BODY)

enum gw_proxy_header_step {
    GW_PROXY_HEADER_MORE,    /* a header so far: wait for more bytes */
    GW_PROXY_HEADER_DONE,    /* whole: see the result */
    GW_PROXY_HEADER_INVALID, /* not a header of an accepted version, or malformed */
};

struct gw_proxy_header {
    size_t length;   /* the header's bytes */
    bool has_source; /* false: LOCAL, UNKNOWN, UNSPEC or UNIX; the peer's own address stands */
    struct sockaddr_storage source;
    socklen_t source_len;
    const char *why; /* for INVALID: what was wrong, for a log line */
};

/* Reads the header at the start of the `len` bytes in `buf` (all that has arrived), for the
 * versions in `versions`. On DONE, `out` holds the result. */
enum gw_proxy_header_step gw_proxy_header_read(const unsigned char *buf, size_t len,
                                               unsigned versions, struct gw_proxy_header *out);

#endif
