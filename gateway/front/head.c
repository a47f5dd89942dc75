/* A strict reading of a client's bytes, ahead of libmicrohttpd; design in head.h. */
#include <string.h>
#include <strings.h>

#include "gateway/common/chars.h"
#include "gateway/front/head.h"

#define CHUNK_LINE_MAX 4096 /* a chunk extension or trailer line longer than this is refused */
#define TRAILERS_TOO_LARGE                                                                         \
    "the request's head and trailer fields are larger than this gateway accepts"
#define PIPELINED_TOO_MUCH                                                                         \
    "more was pipelined behind an unanswered request than this connection holds; send it "         \
    "again"
#define TOO_LARGE                                                                                  \
    "the request head is larger than this gateway accepts (its bytes, and 64 for each field, "     \
    "query argument and cookie)"

enum stage {
    AT_HEAD,          /* the next byte starts a head, or an empty line before one */
    IN_LENGTH_BODY,   /* `remaining` bytes of a Content-Length body to pass */
    AT_CHUNK_SIZE,    /* hex digits of a chunk size */
    IN_CHUNK_EXT,     /* after the ';' of a chunk extension, up to CR */
    AT_CHUNK_SIZE_LF, /* the LF ending a chunk size line */
    IN_CHUNK_DATA,    /* `remaining` bytes of chunk data to pass */
    AT_CHUNK_DATA_CR, /* the CRLF after a chunk's data */
    AT_CHUNK_DATA_LF,
    AT_TRAILER,       /* the start of a trailer field line, or of the final empty line */
    IN_TRAILER_NAME,  /* a trailer field's name, up to its colon */
    IN_TRAILER_VALUE, /* a trailer field's value, up to CR */
    AT_TRAILER_LF,    /* the LF ending a trailer field line */
    AT_END_LF,        /* the LF of the final empty line: the message ends there */
    FAULTED,          /* refused: nothing more is read */
};

void gw_head_init(struct gw_head *h, uint32_t max_head, uint32_t hold)
{
    memset(h, 0, sizeof *h);
    h->max_head = max_head;
    h->hold = hold;
    h->stage = AT_HEAD;
    h->room = UINT32_MAX;
}

void gw_head_read(struct gw_head *h)
{
    h->room = UINT32_MAX;
}

static int fault(struct gw_head *h, uint16_t status, const char *reason)
{
    h->fault_in_body = h->stage != AT_HEAD;
    h->fault = status;
    h->reason = reason;
    h->fault_at = h->messages;
    h->stage = FAULTED;
    return -1;
}

void gw_head_refuse(struct gw_head *h, uint16_t status, const char *reason)
{
    if (h->stage != FAULTED)
        fault(h, status, reason);
}

/* A character a field value may hold: visible ASCII, obs-text, space and tab. */
static bool is_value_char(unsigned char c)
{
    return c == '\t' || !gw_is_control(c);
}

static bool is_named(const char *line, size_t name_len, const char *name)
{
    return strlen(name) == name_len && strncasecmp(line, name, name_len) == 0;
}

/* How many of `len` bytes at `p` are `c`. */
static uint32_t count_char(const char *p, size_t len, char c)
{
    uint32_t n = 0;

    for (size_t i = 0; i < len; i++)
        n += p[i] == c;
    return n;
}

/* What libmicrohttpd keeps of the head read so far, beyond its bytes. */
static size_t stored(const struct gw_head *h)
{
    /* libmicrohttpd aligns its copy of a Cookie field to 16 bytes: counted here, with the
     * records, so that `copy` is never more than the values' own bytes (gw_head_take()). */
    return (size_t)h->records * GW_HEAD_FIELD_COST + (size_t)h->cookie_fields * 16;
}

/* METHOD SP TARGET SP HTTP/1.x, `len` bytes without the CRLF. */
static int read_request_line(struct gw_head *h, const char *line, size_t len)
{
    size_t i = 0, target;
    const char *version, *query;

    while (i < len && gw_is_tchar((unsigned char)line[i]))
        i++;
    if (i == 0 || i == len || line[i] != ' ')
        return fault(h, 400, "the request line is not METHOD SP TARGET SP HTTP-VERSION");
    target = ++i;
    while (i < len && line[i] > 0x20 && line[i] < 0x7f)
        i++;
    if (i == target || i == len || line[i] != ' ')
        return fault(h, 400, "the request line is not METHOD SP TARGET SP HTTP-VERSION");
    version = line + i + 1;
    if (len - i - 1 != 8 || memcmp(version, "HTTP/", 5) != 0 || !gw_is_digit(version[5]) ||
        version[6] != '.' || !gw_is_digit(version[7]))
        return fault(h, 400, "the request line is not METHOD SP TARGET SP HTTP-VERSION");
    if (version[5] != '1' || version[7] > '1')
        return fault(h, 505, "only HTTP/1.0 and HTTP/1.1 are spoken here");
    h->http10 = version[7] == '0';
    /* libmicrohttpd keeps a record of each query argument (at most one per '&', plus one). */
    query = memchr(line + target, '?', i - target);
    if (query != NULL)
        h->records += 1 + count_char(query, (size_t)(line + i - query), '&');
    return 0;
}

/* NAME ":" OWS VALUE OWS, `len` bytes without the CRLF. */
static void count(uint8_t *n)
{
    if (*n < 2)
        (*n)++;
}

static int read_field(struct gw_head *h, const char *line, size_t len)
{
    size_t name_len = 0, value, end = len;

    if (line[0] == ' ' || line[0] == '\t')
        return fault(h, 400, "a header field is folded onto a second line (obs-fold)");
    while (name_len < len && gw_is_tchar((unsigned char)line[name_len]))
        name_len++;
    if (name_len == 0 || name_len == len || line[name_len] != ':')
        return fault(h, 400, "a header field's name is not a token followed by a colon");
    for (size_t i = name_len + 1; i < len; i++)
        if (!is_value_char((unsigned char)line[i]))
            return fault(h, 400, "a header field's value holds a control character");
    value = name_len + 1;
    while (value < end && (line[value] == ' ' || line[value] == '\t'))
        value++;
    while (end > value && (line[end - 1] == ' ' || line[end - 1] == '\t'))
        end--;

    if (is_named(line, name_len, "Content-Length")) {
        count(&h->content_lengths);
        h->length = 0;
        if (end == value || end - value > 18)
            return fault(h, 400, "Content-Length is not a number of bytes");
        for (size_t i = value; i < end; i++) {
            if (!gw_is_digit(line[i]))
                return fault(h, 400, "Content-Length is not a number of bytes");
            h->length = h->length * 10 + (uint64_t)(line[i] - '0');
        }
    } else if (is_named(line, name_len, "Transfer-Encoding")) {
        count(&h->transfer_encodings);
        h->chunked = end - value == 7 && strncasecmp(line + value, "chunked", 7) == 0;
    } else if (is_named(line, name_len, "Host")) {
        count(&h->hosts);
    } else if (is_named(line, name_len, "Cookie")) {
        /* libmicrohttpd parses a copy of the field into a record per cookie. */
        h->records += 1 + count_char(line + value, end - value, ';') +
                      count_char(line + value, end - value, ',');
        h->cookies += (uint32_t)(end - value);
        h->cookie_fields++;
    }
    h->records++;
    return 0;
}

static int check_framing(struct gw_head *h)
{
    if (h->content_lengths > 1 || h->transfer_encodings > 1 ||
        (h->content_lengths > 0 && h->transfer_encodings > 0))
        return fault(h, 400,
                     "the body's length is given twice or two ways; it is refused rather than "
                     "guessed");
    if (h->transfer_encodings > 0 && h->http10)
        return fault(h, 400, "HTTP/1.0 has no Transfer-Encoding");
    if (h->transfer_encodings > 0 && !h->chunked)
        return fault(h, 501, "only the chunked transfer coding is accepted");
    if (h->hosts > 1)
        return fault(h, 400, "the Host field is given twice");
    if (h->hosts == 0 && !h->http10)
        return fault(h, 400, "an HTTP/1.1 request needs a Host field");
    return 0;
}

/* Reads the head at `p` (`n` bytes available): 1 when whole and sound (`*head_len` set), 0
 * when more bytes are needed, -1 on a fault. Lines are checked as they complete, so a fault
 * is found before the head ends, and `checked` remembers how far, so a head arriving a byte at
 * a time is not read again from its start each time. */
static int read_head(struct gw_head *h, const char *p, size_t n, size_t *head_len)
{
    size_t pos = h->checked;

    for (;;) {
        const char *lf = memchr(p + pos, '\n', n - pos);
        size_t len;

        if (lf == NULL) {
            h->checked = (uint32_t)pos;
            return n + stored(h) >= h->max_head ? fault(h, 431, TOO_LARGE) : 0;
        }
        len = (size_t)(lf - (p + pos));
        if (len == 0 || p[pos + len - 1] != '\r')
            return fault(h, 400, "a line ends in a bare LF");
        len--;
        if (!h->request_line_read && len == 0) {
            pos += 2; /* an empty line before the request line */
            continue;
        }
        if (!h->request_line_read) {
            if (read_request_line(h, p + pos, len) != 0)
                return -1;
            h->request_line_read = true;
        } else if (len == 0) {
            *head_len = pos + 2;
            if (*head_len + stored(h) > h->max_head)
                return fault(h, 431, TOO_LARGE);
            return check_framing(h) == 0 ? 1 : -1;
        } else if (read_field(h, p + pos, len) != 0) {
            return -1;
        }
        pos += len + 2;
    }
}

/* Copies a whole, sound head from `in` to `out` (out <= in), each line's trailing spaces and
 * tabs removed (only field values can have any); the length written. */
static size_t rewrite_head(char *out, const char *in, size_t head_len)
{
    size_t pos = 0, written = 0;

    while (pos < head_len) {
        const char *lf = memchr(in + pos, '\n', head_len - pos);
        size_t len = (size_t)(lf - (in + pos)) - 1, keep = len;

        while (keep > 0 && (in[pos + keep - 1] == ' ' || in[pos + keep - 1] == '\t'))
            keep--;
        memmove(out + written, in + pos, keep);
        written += keep;
        out[written++] = '\r';
        out[written++] = '\n';
        pos += len + 2;
    }
    return written;
}

static void end_message(struct gw_head *h)
{
    h->messages++;
    h->stage = AT_HEAD;
}

/* After a whole, sound head of `head_len` bytes: its body, if any, and a clean slate for the
 * next head. */
static void start_body(struct gw_head *h, size_t head_len)
{
    h->heads++;
    h->spent = (uint32_t)(head_len + stored(h));
    h->copy = h->cookies;
    h->remaining = 0;
    h->digits = 0;
    if (h->chunked)
        h->stage = AT_CHUNK_SIZE;
    else if (h->length > 0) {
        h->stage = IN_LENGTH_BODY;
        h->remaining = h->length;
    } else
        end_message(h);
    h->checked = 0;
    h->request_line_read = h->http10 = h->chunked = false;
    h->content_lengths = h->transfer_encodings = h->hosts = 0;
    h->records = 0;
    h->cookies = h->cookie_fields = 0;
    h->length = 0;
}

/* One byte of a chunked body's framing (not of chunk data). 0, or -1 on a fault. */
static int read_chunk_byte(struct gw_head *h, unsigned char c)
{
    int digit = gw_hex_value(c);

    switch (h->stage) {
    case AT_CHUNK_SIZE:
        if (digit >= 0 && h->digits < 16) {
            h->remaining = h->remaining * 16 + (uint64_t)digit;
            h->digits++;
            return 0;
        }
        if (digit >= 0 || h->digits == 0 || (c != ';' && c != '\r'))
            return fault(h, 400, "a chunk size is not a hexadecimal number");
        h->stage = c == ';' ? IN_CHUNK_EXT : AT_CHUNK_SIZE_LF;
        h->line_len = 0;
        return 0;
    case IN_CHUNK_EXT:
        if (c == '\r') {
            h->stage = AT_CHUNK_SIZE_LF;
            return 0;
        }
        if (!is_value_char(c) || ++h->line_len > CHUNK_LINE_MAX)
            return fault(h, 400, "a chunk extension is malformed");
        return 0;
    case AT_CHUNK_SIZE_LF:
        if (c != '\n')
            return fault(h, 400, "a chunk size line does not end in CRLF");
        h->digits = 0;
        h->stage = h->remaining > 0 ? IN_CHUNK_DATA : AT_TRAILER;
        return 0;
    case AT_CHUNK_DATA_CR:
    case AT_CHUNK_DATA_LF:
        if (c != (h->stage == AT_CHUNK_DATA_CR ? '\r' : '\n'))
            return fault(h, 400, "a chunk is not followed by CRLF where its size says");
        h->stage = h->stage == AT_CHUNK_DATA_CR ? AT_CHUNK_DATA_LF : AT_CHUNK_SIZE;
        return 0;
    case AT_TRAILER:
        h->line_len = 1;
        if (c == '\r')
            h->stage = AT_END_LF;
        else if (gw_is_tchar(c))
            h->stage = IN_TRAILER_NAME;
        else
            return fault(h, 400, "a trailer field is malformed or folded");
        return 0;
    case IN_TRAILER_NAME:
    case IN_TRAILER_VALUE:
        if (++h->line_len > CHUNK_LINE_MAX)
            return fault(h, 400, "a trailer field is too long");
        if (h->stage == IN_TRAILER_NAME && c == ':')
            h->stage = IN_TRAILER_VALUE;
        else if (h->stage == IN_TRAILER_VALUE && c == '\r')
            h->stage = AT_TRAILER_LF;
        else if (!(h->stage == IN_TRAILER_NAME ? gw_is_tchar(c) : is_value_char(c)))
            return fault(h, 400, "a trailer field is malformed");
        return 0;
    default: /* AT_TRAILER_LF or AT_END_LF */
        if (c != '\n')
            return fault(h, 400, "a trailer line does not end in CRLF");
        /* libmicrohttpd keeps each line, and a record of each field, beside the head. */
        h->spent += h->line_len + 1 + (h->stage == AT_END_LF ? 0 : GW_HEAD_FIELD_COST);
        if (h->spent > h->max_head)
            return fault(h, 431, TRAILERS_TOO_LARGE);
        if (h->stage == AT_END_LF)
            end_message(h);
        else
            h->stage = AT_TRAILER;
        return 0;
    }
}

/* How much may wait behind the message just ended (head.h). */
static size_t room_behind(const struct gw_head *h)
{
    size_t held = (size_t)h->spent + h->copy;

    return held < h->hold ? h->hold - held : 0;
}

size_t gw_head_take(const struct gw_head *h, size_t len)
{
    /* What a message that starts in the read may hold, or more: the one being read. */
    size_t held = h->max_head, body = 0, behind, take;

    if (h->stage == FAULTED)
        return len;
    if (h->stage != AT_HEAD) {
        /* a chunked message's trailer fields may yet take the rest of max_head */
        size_t own = (h->stage == IN_LENGTH_BODY ? h->spent : h->max_head) + (size_t)h->copy;

        if (own > held)
            held = own;
        if (h->stage == IN_LENGTH_BODY || h->stage == IN_CHUNK_DATA)
            body = h->remaining < len ? (size_t)h->remaining : len;
    }
    behind = held < h->hold ? h->hold - held : 0;
    take = body + behind < len ? body + behind : len;
    return take > 0 ? take : 1;
}

struct gw_head_step gw_head_feed(struct gw_head *h, char *buf, size_t len)
{
    /* The output may not pass `limit` (head.h). */
    size_t r = 0, w = 0, limit = h->room == UINT32_MAX ? SIZE_MAX : h->room;
    struct gw_head_step step = {0, len};

    while (r < len && h->stage != FAULTED) {
        uint32_t ended = h->messages;

        if (h->stage == AT_HEAD) {
            size_t head_len = 0, body;
            int got = read_head(h, buf + r, len - r, &head_len);

            if (got == 0) {
                step.keep_from = r; /* a head not yet whole */
                break;
            }
            if (got < 0)
                break;
            /* the head, and as much of a Content-Length body as this feed holds */
            body = h->chunked ? 0 : len - r - head_len;
            if (w + head_len + (body < h->length ? body : h->length) > limit) {
                fault(h, 503, PIPELINED_TOO_MUCH);
                break;
            }
            w += rewrite_head(buf + w, buf + r, head_len);
            r += head_len;
            start_body(h, head_len);
        } else if (w >= limit) {
            fault(h, 503, PIPELINED_TOO_MUCH); /* in a chunked body */
            break;
        } else if (h->stage == IN_LENGTH_BODY || h->stage == IN_CHUNK_DATA) {
            size_t n = len - r < h->remaining ? len - r : (size_t)h->remaining;

            if (n > limit - w)
                n = limit - w;

            memmove(buf + w, buf + r, n);
            w += n;
            r += n;
            h->remaining -= n;
            if (h->remaining == 0 && h->stage == IN_LENGTH_BODY)
                end_message(h);
            else if (h->remaining == 0)
                h->stage = AT_CHUNK_DATA_CR;
        } else if (read_chunk_byte(h, (unsigned char)buf[r]) == 0) {
            buf[w++] = buf[r++];
        }
        if (h->messages != ended && w + room_behind(h) < limit)
            limit = w + room_behind(h);
    }
    if (limit != SIZE_MAX)
        h->room = (uint32_t)(limit - w);
    step.ready = w;
    return step;
}
