/*
 * body: a request body on its way upstream, held in a window of at most GW_BODY_WINDOW bytes
 * between the client side, which puts bytes in as libmicrohttpd hands them over, and libcurl,
 * which takes them as the upstream connection can send them. A full window stops the client
 * side (its connection waits, so TCP slows the client down) and an empty one stops libcurl
 * (its transfer pauses until more comes), so an upload of any size costs one window of memory
 * and reaches the upstream as it arrives.
 *
 * Replaying: until the body outgrows the window, every byte stays in it after being sent, so
 * the body can be sent again from its start (gw_body_rewind()): a retry on another server, or
 * libcurl's resend when a reused connection died. Once bytes have had to go to make room, it
 * cannot, and a failed attempt is final. Example: a 10 KiB JSON body may be retried; a 5 MiB
 * upload is retried only if its attempt failed before 64 KiB of it had been sent and dropped.
 *
 * Holding back: until the client side says the body is whole and read one way (`ended`),
 * the last byte of a body of known length is never handed out, so an upstream never holds a
 * complete request that sluice might still refuse (the end of a chunked body is likewise
 * only sent at the end: libcurl writes the last chunk when gw_body_take() says 0).
 *
 * One thread at a time: the request's, or its event loop's (libcurl's callbacks run there).
 */
#ifndef SLUICE_GATEWAY_BODY_H
#define SLUICE_GATEWAY_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_BODY_WINDOW (64 * 1024)

struct gw_body {
    int64_t length;    /* the Content-Length, or -1 (chunked): set before the first put */
    uint64_t received; /* bytes put in, in all */
    bool ended;        /* every byte is in, and sluice's reading of it agreed */

    /* private */
    char *data;       /* the window, allocated at the first byte */
    size_t cap;       /* its size: the length when that is smaller than the window */
    size_t sent, end; /* data[0..end) is held; data[sent..end) is not sent yet */
    uint64_t dropped; /* bytes sent and let go to make room: nonzero, no replay */
};

/* Copies as much of `len` bytes as the window has room for; returns how many (0 when it is
 * full, or memory is short for it: gw_body_room() then says 0 too). */
size_t gw_body_put(struct gw_body *b, const char *data, size_t len);

/* Bytes gw_body_put() would take now. */
size_t gw_body_room(const struct gw_body *b);

/* Up to `max` bytes not sent yet, into `buf`: the count, which is 0 when nothing may go now
 * (see gw_body_done() for whether that is the end). */
size_t gw_body_take(struct gw_body *b, char *buf, size_t max);

/* Whether every byte of an ended body has been taken. */
bool gw_body_done(const struct gw_body *b);

/* Starts sending again from the first byte. False (nothing changed) when bytes were let go. */
bool gw_body_rewind(struct gw_body *b);

/* Whether gw_body_rewind() would succeed. */
bool gw_body_replayable(const struct gw_body *b);

/* Frees the window; the struct may be set up again after. */
void gw_body_free(struct gw_body *b);

#endif
