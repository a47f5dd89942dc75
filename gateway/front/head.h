/*
 * head: sluice's own strict reading of the bytes a client sends, made before libmicrohttpd
 * sees them, so that the gateway, libmicrohttpd and the upstream read every request the same
 * way.
 *
 * libmicrohttpd 0.9.75 is lenient where a gateway must not be: it glues an obs-fold
 * continuation line onto the previous field's *name*, accepts whitespace before a field's
 * colon (`Content-Length : 41` becomes a field no one looks up, so the body is read as the
 * next request), ends lines at a bare LF, keeps trailing whitespace in values, and reads
 * `Transfer-Encoding: chunked ` as some coding other than chunked. None of it can be switched
 * off. So each client connection's bytes pass through a `struct gw_head` first (wire.h feeds
 * it from the socket), and libmicrohttpd only ever receives heads that this reading found
 * sound, whole:
 *
 *   request-line  METHOD SP TARGET SP HTTP/1.x CRLF, one space each, the method a token, the
 *                 target visible ASCII; empty lines before it are skipped, as RFC 9112 allows
 *   field lines   NAME ":" OWS VALUE OWS CRLF: the name a token with the colon right after
 *                 it, the value visible characters, spaces and tabs; no NUL, no bare CR or LF,
 *                 no line that starts with a space or tab (obs-fold); the trailing OWS of each
 *                 value is removed here, so every later reader sees `alice` for `alice \t`
 *   framing       at most one Content-Length (digits only), at most one Transfer-Encoding and
 *                 then exactly `chunked` (501 otherwise), never both, none in HTTP/1.0; at
 *                 most one Host, and one is required in HTTP/1.1
 *   bodies        Content-Length bytes are passed on untouched; a chunked body is followed
 *                 chunk by chunk (hex sizes without spaces, extensions, CRLF after each chunk,
 *                 trailer fields as field lines) so the next head is found where the upstream
 *                 would find it
 *
 * A head is held back until it is whole (at most `max_head` bytes, server.max_header_size,
 * else 431); lines already read whole are not read again when more of it comes. A head counts
 * what libmicrohttpd keeps of it in the same per-connection memory: its bytes, and
 * GW_HEAD_FIELD_COST for each record (one per field, one per query argument, split at '&',
 * and one per cookie of a Cookie field, split at ';' and ','), so that neither 700 tiny
 * fields, nor a 5 KB Cookie of 1,000 cookies, nor 1,000 query arguments can leave it without
 * room for the answer (front.c sizes that memory for its copy of the Cookie field too). A
 * chunked body's trailer fields, kept beside the head, count toward the same limit (431
 * too).
 *
 * What a client pipelines behind a request waits in the same memory while that request is
 * answered, so it must leave room for the answer's head. libmicrohttpd does not read the
 * connection again before it has answered the request (seen with strace in both serving
 * modes, with and without bodies, the request waiting on its upstream), so what one of its
 * reads passes behind the end of a message is all that waits behind it. (One exception, read
 * in its source: in event mode a request whose body waits for the upstream, suspended with
 * part of it not yet taken, is read again when it resumes, and each read counts afresh. With
 * 300 requests pipelined behind a 200 KB POST to an upstream that reads slowly and answers with
 * a 15 KiB head, every request was still answered.) The bound behind a message is `hold`
 * (gw_head_init()) less the message's head, records and Cookie copy. The first message that
 * would pass that is refused with 503: whole, if its head and the part of its Content-Length
 * body in the read would; else where its body passes it (a Content-Length body is then
 * refused halfway, as a chunked one may be). The connection ends after the answers before
 * it. Over plain HTTP no read takes that much (gw_head_take()); over TLS, where GnuTLS holds a
 * record's plaintext whole, the memory holds two records more instead (front.c), so that a
 * read of libmicrohttpd's whole buffer (half that memory, until it grows it) fits behind any
 * message unless max_response_header_size is over 28 KiB. One read of libmicrohttpd's may be
 * fed in several pieces (over TLS, a record at a time): gw_head_read() starts each read.
 *
 * The first fault ends the reading for good: `fault` holds the status to answer with and
 * `fault_at` the message it concerns (0 for the first on the connection); nothing from the
 * faulty message on is passed on. Each message is counted twice, when its head is found sound
 * (`heads`) and when its body has ended (`messages`), so the request handler can check that
 * libmicrohttpd saw the same messages (request.c).
 *
 * Worked example: fed "GET /a HTTP/1.1\r\nHost: h \r\n\r\nGET /b HT" in one piece, the step
 * has `ready` = 28 (the first head, its value now "h"), `keep_from` = 29 (the second head's
 * start, to be fed again with what follows), heads = messages = 1.
 *
 * Nothing here touches a socket or the clock; one connection's reader is used by one thread at
 * a time.
 */
#ifndef SLUICE_GATEWAY_HEAD_H
#define SLUICE_GATEWAY_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_HEAD_MAX        (16 * 1024) /* server.max_header_size's default */
/* libmicrohttpd's record of a field, cookie, query argument or trailer field, rounded up */
#define GW_HEAD_FIELD_COST 64

struct gw_head {
    uint8_t stage;      /* where in a message the next byte falls (head.c) */
    uint8_t digits;     /* hex digits of the chunk size read so far */
    uint16_t line_len;  /* length of the trailer line being read */
    uint32_t spent;     /* what libmicrohttpd holds of the message: head, records, trailers */
    uint32_t copy;      /* and its copy of the message's Cookie fields */
    uint32_t room;      /* what may still pass in this read of libmicrohttpd's; UINT32_MAX: any */
    uint64_t remaining; /* body or chunk bytes still to pass */
    uint32_t heads;     /* heads read whole and found sound */
    uint32_t messages;  /* messages read whole, body included */
    uint32_t fault_at;  /* the message refused, when `fault` is set */
    uint16_t fault;     /* the status a refused message is answered with; 0 while none */
    bool fault_in_body; /* the fault came after the message's head had been passed on */
    const char *reason; /* what was wrong, for the client and the log; static */
    uint32_t held;      /* wire.c's: bytes of a head not yet whole, read and kept back */

    uint32_t max_head; /* the longest head accepted */
    uint32_t hold;     /* gw_head_init()'s */

    /* The head being read, as far as its lines are whole, and what they said. */
    uint32_t checked; /* bytes from the head's start read as whole lines */
    bool request_line_read, http10, chunked;
    uint8_t content_lengths, transfer_encodings, hosts; /* counted up to 2 */
    uint32_t records; /* libmicrohttpd's records of fields, query arguments and cookies */
    uint32_t cookies; /* bytes of Cookie field values */
    uint32_t cookie_fields; /* Cookie fields: libmicrohttpd aligns its copy to 16 bytes */
    uint64_t length;  /* the Content-Length */
};

/* What one call of gw_head_feed() found. */
struct gw_head_step {
    size_t ready;     /* bytes at the front of the buffer that may be passed on, rewritten */
    size_t keep_from; /* bytes from here on start a head not yet whole: feed them again, with
                         what follows; equal to the length fed when there are none */
};

/* A reader for a new connection, taking heads of up to `max_head` bytes, whose
 * libmicrohttpd memory holds `hold` bytes of what the client sent besides the answer's head
 * (front.c): its head, records and Cookie copy, and what is pipelined behind it. */
void gw_head_init(struct gw_head *h, uint32_t max_head, uint32_t hold);

/* A read of libmicrohttpd's starts: what its feeds pass behind a message is counted afresh. */
void gw_head_read(struct gw_head *h);

/* How much of the client's bytes a read of up to `len` may take from the socket, at least 1,
 * so that what it passes behind any message stays within the bound above: the rest of a body
 * (as far as it is known), then no more than may wait behind the message being read (behind a
 * chunked one, as if its trailer fields were to take all of max_head), nor than `hold` less
 * `max_head`, what may wait behind a message that starts in the read: its head's bytes are in
 * the read, and its records, trailer fields and Cookie copy (no larger than the Cookie fields'
 * values, which are part of the head; the copy's alignment is counted as records are) take at
 * most `max_head` with them. Over plain HTTP wire.c reads no more, and what is left stays in
 * the socket until libmicrohttpd asks again, after its answer; so the bound is not passed
 * there. */
size_t gw_head_take(const struct gw_head *h, size_t len);

/* Refuses the message being read, for a reason found outside (a head too large for the
 * buffer it must fit). */
void gw_head_refuse(struct gw_head *h, uint16_t status, const char *reason);

/* Reads `len` bytes that follow everything fed before (bytes kept back included), rewriting
 * them in place. After a fault, nothing more is ready and nothing is kept. */
struct gw_head_step gw_head_feed(struct gw_head *h, char *buf, size_t len);

#endif
