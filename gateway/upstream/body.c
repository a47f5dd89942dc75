/* A request body's window between client and upstream; design in body.h. */
#include <stdlib.h>
#include <string.h>

#include "gateway/upstream/body.h"

#define FIRST_CAP (16 * 1024)

/* Makes the window big enough for `want` more bytes where it can: grows it, up to the window
 * size (or the body's length), then lets sent bytes go. */
static void make_room(struct gw_body *b, size_t want)
{
    size_t limit = GW_BODY_WINDOW;

    if (b->length >= 0 && (uint64_t)b->length < limit)
        limit = b->length > 0 ? (size_t)b->length : 1;
    if (b->end + want > b->cap && b->cap < limit) {
        size_t cap = b->cap ? b->cap : FIRST_CAP;
        char *grown;

        while (cap < b->end + want && cap < limit)
            cap *= 2;
        if (cap > limit)
            cap = limit;
        grown = realloc(b->data, cap);
        if (grown == NULL)
            return;
        b->data = grown;
        b->cap = cap;
    }
    if (b->end + want > b->cap && b->sent > 0) {
        memmove(b->data, b->data + b->sent, b->end - b->sent);
        b->dropped += b->sent;
        b->end -= b->sent;
        b->sent = 0;
    }
}

size_t gw_body_room(const struct gw_body *b)
{
    size_t limit = GW_BODY_WINDOW;

    if (b->length >= 0 && (uint64_t)b->length < limit)
        limit = b->length > 0 ? (size_t)b->length : 1;
    if (b->cap < limit)
        return limit - (b->end - b->sent);
    return b->cap - (b->end - b->sent);
}

size_t gw_body_put(struct gw_body *b, const char *data, size_t len)
{
    size_t n;

    make_room(b, len);
    n = b->cap - b->end;
    if (n > len)
        n = len;
    if (n > 0) {
        memcpy(b->data + b->end, data, n);
        b->end += n;
        b->received += n;
    }
    return n;
}

size_t gw_body_take(struct gw_body *b, char *buf, size_t max)
{
    size_t n = b->end - b->sent;

    /* The last byte of a known length waits for the end (see body.h). */
    if (!b->ended && b->length >= 0 && n > 0 && b->dropped + b->end >= (uint64_t)b->length)
        n--;
    if (n > max)
        n = max;
    if (n == 0)
        return 0;
    memcpy(buf, b->data + b->sent, n);
    b->sent += n;
    return n;
}

bool gw_body_done(const struct gw_body *b)
{
    return b->ended && b->sent == b->end;
}

bool gw_body_replayable(const struct gw_body *b)
{
    return b->dropped == 0;
}

bool gw_body_rewind(struct gw_body *b)
{
    if (!gw_body_replayable(b))
        return false;
    b->sent = 0;
    return true;
}

void gw_body_free(struct gw_body *b)
{
    free(b->data);
    b->data = NULL;
    b->cap = b->sent = b->end = 0;
}
