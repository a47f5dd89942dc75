/* libFuzzer: the strict reading of client bytes (head.c) and of request targets (target.c).
 * The first byte picks a piece size and how much libmicrohttpd's memory holds (as front.c
 * sizes it, or 2 KiB, so that what is pipelined behind a request soon meets its bound); the
 * stream is read whole and in pieces the way wire.c feeds one read of libmicrohttpd's, and
 * both readings must agree byte for byte. The same bytes as a target must
 * route to a path no longer than themselves, free of control characters and dot segments. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/target.h"
#include "gateway/front/head.h"

struct reading {
    char *out;
    size_t out_len;
    struct gw_head head;
};

static void read_stream(const uint8_t *stream, size_t len, size_t piece, uint32_t hold,
                        struct reading *r)
{
    char *buf = malloc(len + 1);
    size_t kept = 0, pos = 0;

    r->out = malloc(len + 1);
    r->out_len = 0;
    gw_head_init(&r->head, GW_HEAD_MAX, hold);
    while (pos < len && r->head.fault == 0) {
        size_t n = len - pos < piece ? len - pos : piece;
        struct gw_head_step step;

        memcpy(buf + kept, stream + pos, n);
        pos += n;
        step = gw_head_feed(&r->head, buf, kept + n);
        if (step.ready > step.keep_from || step.keep_from > kept + n)
            abort();
        memcpy(r->out + r->out_len, buf, step.ready);
        r->out_len += step.ready;
        kept = kept + n - step.keep_from;
        memmove(buf, buf + step.keep_from, kept);
    }
    free(buf);
}

static void check_target(const uint8_t *data, size_t size)
{
    char *target = malloc(size + 2), *out = malloc(size + 2);
    const char *reason = NULL;

    target[0] = '/';
    memcpy(target + 1, data, size);
    target[size + 1] = '\0';
    if (gw_target_path(target, out, &reason) == 0) {
        if (strlen(out) > strlen(target) || out[0] != '/' || strstr(out, "/../") != NULL ||
            strstr(out, "/./") != NULL || strstr(out, "//") != NULL)
            abort();
        for (const char *p = out; *p != '\0'; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
                abort();
    } else if (reason == NULL) {
        abort();
    }
    if (gw_target_query_value(target, "key", out, &reason) > 0 && strlen(out) > size)
        abort();
    free(target);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct reading whole, pieces;
    uint32_t hold;

    if (size == 0)
        return 0;
    hold = data[0] & 0x40 ? 2048 : 2 * GW_HEAD_MAX;
    check_target(data + 1, size - 1);
    read_stream(data + 1, size - 1, size, hold, &whole);
    read_stream(data + 1, size - 1, 1 + data[0] % 64, hold, &pieces);
    /* A head fault found at the last byte of a piece can be found earlier whole: compare
     * what both passed on up to the shorter reading, and the counts when neither faulted. */
    if (memcmp(whole.out, pieces.out,
               whole.out_len < pieces.out_len ? whole.out_len : pieces.out_len) != 0)
        abort();
    if (whole.head.fault == 0 && pieces.head.fault == 0 &&
        (whole.out_len != pieces.out_len || whole.head.messages != pieces.head.messages ||
         whole.head.heads != pieces.head.heads))
        abort();
    if ((whole.head.fault == 0) != (pieces.head.fault == 0) && whole.head.fault != 431 &&
        pieces.head.fault != 431)
        abort();
    free(whole.out);
    free(pieces.out);
    return 0;
}
