/* The PROXY protocol header, read strictly; design in proxy_header.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "gateway/front/proxy_header.h"

#define V1_MAX 107 /* "PROXY TCP6 " and two full IPv6 addresses and ports, with the CRLF */

static const unsigned char v2_signature[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                               0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

static enum gw_proxy_header_step invalid(struct gw_proxy_header *out, const char *why)
{
    out->why = why;
    return GW_PROXY_HEADER_INVALID;
}

/* A port as v1 writes it: 0 to 65535 in decimal, no sign, no leading zero. */
static bool read_port(const char *text, size_t len, in_port_t *port)
{
    unsigned value = 0;

    if (len == 0 || len > 5 || (len > 1 && text[0] == '0'))
        return false;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        value = value * 10 + (unsigned)(text[i] - '0');
    }
    if (value > 65535)
        return false;
    *port = htons((uint16_t)value);
    return true;
}

/* One address of a v1 line, `len` bytes at `text`, into `addr` (4 or 16 bytes). */
static bool read_address(int family, const char *text, size_t len, void *addr)
{
    char copy[INET6_ADDRSTRLEN];

    if (len == 0 || len >= sizeof copy)
        return false;
    memcpy(copy, text, len);
    copy[len] = '\0';
    return inet_pton(family, copy, addr) == 1;
}

/* "TCP4 SRC DST SPORT DPORT" (or TCP6), `len` bytes at `line`, each field after one space. */
static enum gw_proxy_header_step read_v1_addresses(const char *line, size_t len,
                                                   struct gw_proxy_header *out)
{
    const char *field[5];
    size_t field_len[5], n = 0, start = 0;
    int family = line[3] == '6' ? AF_INET6 : AF_INET;
    struct sockaddr_in *sin = (struct sockaddr_in *)&out->source;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->source;
    unsigned char destination[sizeof(struct in6_addr)];
    in_port_t destination_port;

    for (size_t i = 0; i <= len && n < 5; i++)
        if (i == len || line[i] == ' ') {
            field[n] = line + start;
            field_len[n++] = i - start;
            start = i + 1;
        }
    if (n != 5 || start != len + 1)
        return invalid(out, "a v1 header needs exactly a protocol, two addresses and two ports");
    memset(&out->source, 0, sizeof out->source);
    out->source.ss_family = (sa_family_t)family;
    out->source_len = family == AF_INET6 ? sizeof *sin6 : sizeof *sin;
    if (!read_address(family, field[1], field_len[1],
                      family == AF_INET6 ? (void *)&sin6->sin6_addr : (void *)&sin->sin_addr) ||
        !read_address(family, field[2], field_len[2], destination) ||
        !read_port(field[3], field_len[3],
                   family == AF_INET6 ? &sin6->sin6_port : &sin->sin_port) ||
        !read_port(field[4], field_len[4], &destination_port))
        return invalid(out, "a v1 header with a malformed address or port, or one that does "
                            "not match its protocol");
    out->has_source = true;
    return GW_PROXY_HEADER_DONE;
}

static enum gw_proxy_header_step read_v1(const unsigned char *buf, size_t len,
                                         struct gw_proxy_header *out)
{
    static const char prefix[] = "PROXY ";
    size_t seen = len < V1_MAX ? len : V1_MAX, end = 0;
    const char *line = (const char *)buf + sizeof prefix - 1;

    if (memcmp(buf, prefix, seen < sizeof prefix - 1 ? seen : sizeof prefix - 1) != 0)
        return invalid(out, "not a PROXY protocol header");
    for (size_t i = 0; i < seen && end == 0; i++) {
        if (buf[i] == '\r' && i + 1 < seen && buf[i + 1] != '\n')
            return invalid(out, "a v1 header with a CR not followed by LF");
        if (buf[i] == '\r' && i + 1 < seen)
            end = i;
        else if (buf[i] != '\r' && (buf[i] < 0x20 || buf[i] > 0x7e))
            return invalid(out, "a v1 header with a control character or non-ASCII byte");
    }
    if (end == 0)
        return len >= V1_MAX ? invalid(out, "a v1 header longer than 107 bytes")
                             : GW_PROXY_HEADER_MORE;
    out->length = end + 2;
    out->has_source = false;
    len = end - (sizeof prefix - 1); /* the line after "PROXY ", without its CRLF */
    if (len >= 7 && memcmp(line, "UNKNOWN", 7) == 0 && (len == 7 || line[7] == ' '))
        return GW_PROXY_HEADER_DONE; /* whatever follows UNKNOWN is to be ignored */
    if (len < 5 || (memcmp(line, "TCP4 ", 5) != 0 && memcmp(line, "TCP6 ", 5) != 0))
        return invalid(out, "a v1 header whose protocol is not TCP4, TCP6 or UNKNOWN");
    return read_v1_addresses(line, len, out);
}

/* The TLVs after a v2 header's addresses must fill the rest of its length exactly. */
static bool tlvs_fit(const unsigned char *tlv, size_t len)
{
    while (len > 0) {
        size_t value_len;

        if (len < 3)
            return false;
        value_len = (size_t)tlv[1] << 8 | tlv[2];
        if (3 + value_len > len)
            return false;
        tlv += 3 + value_len;
        len -= 3 + value_len;
    }
    return true;
}

static enum gw_proxy_header_step read_v2(const unsigned char *buf, size_t len,
                                         struct gw_proxy_header *out)
{
    size_t body_len, address_len;
    const unsigned char *body = buf + 16;
    unsigned command;

    if (memcmp(buf, v2_signature, len < 12 ? len : 12) != 0)
        return invalid(out, "not a PROXY protocol header");
    if (len < 16)
        return GW_PROXY_HEADER_MORE;
    if (buf[12] >> 4 != 2 || (buf[12] & 0x0f) > 1)
        return invalid(out, "a v2 header of another version, or an unknown command");
    command = buf[12] & 0x0f;
    body_len = (size_t)buf[14] << 8 | buf[15];
    if (body_len > GW_PROXY_HEADER_V2_MAX_BODY)
        return invalid(out, "a v2 header longer than this gateway reads");
    if (len < 16 + body_len)
        return GW_PROXY_HEADER_MORE;
    out->length = 16 + body_len;
    out->has_source = false;
    if (command == 0) /* LOCAL: the balancer's own connection; its addresses are ignored */
        return GW_PROXY_HEADER_DONE;
    switch (buf[13]) {
    case 0x00: /* UNSPEC */
        address_len = 0;
        break;
    case 0x11: /* TCP over IPv4 */
        address_len = 12;
        break;
    case 0x21: /* TCP over IPv6 */
        address_len = 36;
        break;
    case 0x31: /* UNIX stream */
        address_len = 216;
        break;
    default:
        return invalid(out, "a v2 header of a datagram or unknown family");
    }
    if (body_len < address_len || !tlvs_fit(body + address_len, body_len - address_len))
        return invalid(out, "a v2 header whose length does not fit its addresses and TLVs");
    memset(&out->source, 0, sizeof out->source);
    if (buf[13] == 0x11) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&out->source;

        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, body, 4);
        memcpy(&sin->sin_port, body + 8, 2);
        out->source_len = sizeof *sin;
        out->has_source = true;
    } else if (buf[13] == 0x21) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->source;

        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, body, 16);
        memcpy(&sin6->sin6_port, body + 32, 2);
        out->source_len = sizeof *sin6;
        out->has_source = true;
    }
    return GW_PROXY_HEADER_DONE;
}

enum gw_proxy_header_step gw_proxy_header_read(const unsigned char *buf, size_t len,
                                               unsigned versions, struct gw_proxy_header *out)
{
    out->why = NULL;
    if (len == 0)
        return GW_PROXY_HEADER_MORE;
    if (buf[0] == 'P')
        return (versions & GW_PROXY_HEADER_V1)
                   ? read_v1(buf, len, out)
                   : invalid(out, "a v1 header where only v2 is accepted");
    if (buf[0] == v2_signature[0])
        return (versions & GW_PROXY_HEADER_V2)
                   ? read_v2(buf, len, out)
                   : invalid(out, "a v2 header where only v1 is accepted");
    return invalid(out, "no PROXY protocol header");
}
