/* One access log line read back for `sluice simulate`; design in log_line.h. */
#include <stdbool.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "gateway/common/chars.h"
#include "gateway/ops/log_line.h"

struct reader {
    const char *at, *end;
    const char *reason;
};

static int fail(struct reader *r, const char *reason)
{
    if (r->reason == NULL)
        r->reason = reason;
    return -1;
}

static int expect(struct reader *r, char c)
{
    if (r->at == r->end || *r->at != c)
        return fail(r, c == '"' ? "a string was expected" : "not the access log's JSON");
    r->at++;
    return 0;
}

/* Steps over the plain bytes of a string: neither '"', '\\' nor a control character. Most of
 * a line is plain, so with SSE2 (every x86-64) it goes sixteen bytes at a time, to the first
 * byte that is not plain (bytes <= 0x1f found as those equal to their minimum with 0x1f,
 * unsigned); then, or elsewhere, a byte at a time. */
static void skip_plain(struct reader *r)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                  control = _mm_set1_epi8(0x1f);

    while (r->end - r->at >= 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)r->at);
        __m128i special = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)),
            _mm_cmpeq_epi8(_mm_min_epu8(bytes, control), bytes));
        unsigned mask = (unsigned)_mm_movemask_epi8(special);

        if (mask != 0) {
            r->at += __builtin_ctz(mask);
            return;
        }
        r->at += 16;
    }
#endif
    while (r->at < r->end && *r->at != '"' && *r->at != '\\' && (unsigned char)*r->at >= 0x20)
        r->at++;
}

/* A string into `out` (`cap` bytes with its NUL; NULL: checked and skipped). */
static int read_string(struct reader *r, char *out, size_t cap)
{
    size_t len = 0;

    if (expect(r, '"') != 0)
        return -1;
    while (r->at < r->end && *r->at != '"') {
        const char *plain = r->at;
        unsigned char c;

        skip_plain(r);
        if (r->at > plain) {
            size_t run = (size_t)(r->at - plain);

            if (out != NULL) {
                if (len + run >= cap)
                    return fail(r, "a string longer than the access log writes");
                memcpy(out + len, plain, run);
                len += run;
            }
            continue;
        }
        c = (unsigned char)*r->at++;

        if (c < 0x20)
            return fail(r, "a raw control character in a string");
        if (c == '\\') {
            if (r->at == r->end)
                return fail(r, "a string is cut short");
            c = (unsigned char)*r->at++;
            if (c == 'u' && r->end - r->at >= 4 && memcmp(r->at, "fffd", 4) == 0) {
                /* U+FFFD, which stands for a byte that was not UTF-8: its three bytes. */
                if (out != NULL) {
                    if (len + 3 >= cap)
                        return fail(r, "a string longer than the access log writes");
                    memcpy(out + len, "\xef\xbf\xbd", 3);
                    len += 3;
                }
                r->at += 4;
                continue;
            }
            if (c == 'u') {
                int hi, lo;

                if (r->end - r->at < 4 || r->at[0] != '0' || r->at[1] != '0' ||
                    (hi = gw_hex_value((unsigned char)r->at[2])) < 0 ||
                    (lo = gw_hex_value((unsigned char)r->at[3])) < 0)
                    return fail(r, "an escape the access log does not write");
                c = (unsigned char)(hi * 16 + lo);
                r->at += 4;
            } else if (c != '"' && c != '\\' && c != '/') {
                return fail(r, "an escape the access log does not write");
            }
        }
        if (out != NULL) {
            if (len + 1 >= cap)
                return fail(r, "a string longer than the access log writes");
            out[len++] = (char)c;
        }
    }
    if (expect(r, '"') != 0)
        return fail(r, "a string is cut short");
    if (out != NULL)
        out[len] = '\0';
    return 0;
}

/* A field name, at most GW_KEY_SOURCE_LEN - 1 bytes: `*name` points into the line where it is
 * plain (as every name the gateway writes is), else to its unescaped copy in `copy`. */
static int read_name(struct reader *r, char copy[GW_KEY_SOURCE_LEN], const char **name, size_t *len)
{
    const char *start = r->at;

    if (expect(r, '"') != 0)
        return -1;
    skip_plain(r);
    if (r->at < r->end && *r->at == '"') {
        *name = start + 1;
        *len = (size_t)(r->at - *name);
        r->at++;
    } else {
        r->at = start;
        if (read_string(r, copy, GW_KEY_SOURCE_LEN) != 0)
            return -1;
        *name = copy;
        *len = strlen(copy);
    }
    if (*len >= GW_KEY_SOURCE_LEN)
        return fail(r, "a field name longer than the access log writes");
    return 0;
}

/* A number: digits into `*value` when given (then a whole number that fits), else skipped. */
static int read_number(struct reader *r, int64_t *value)
{
    const char *start = r->at;
    int64_t n = 0;

    if (value != NULL) {
        while (r->at < r->end && *r->at >= '0' && *r->at <= '9') {
            if (n > (INT64_MAX - 9) / 10)
                return fail(r, "a number out of range");
            n = n * 10 + (*r->at++ - '0');
        }
        *value = n;
    } else {
        while (r->at < r->end && ((*r->at >= '0' && *r->at <= '9') || *r->at == '.' ||
                                  *r->at == '-' || *r->at == '+' || *r->at == 'e' || *r->at == 'E'))
            r->at++;
    }
    if (r->at == start)
        return fail(r, "a value that is neither a string nor a number");
    return 0;
}

static void skip_space(struct reader *r)
{
    while (r->at < r->end && (*r->at == ' ' || *r->at == '\t' || *r->at == '\r'))
        r->at++;
}

/* Calls `field` for each name of an object (the reader then at its value). */
static int read_object(struct reader *r,
                       int (*field)(struct reader *, const char *, size_t, void *), void *ctx)
{
    char copy[GW_KEY_SOURCE_LEN];
    const char *name;
    size_t len;

    skip_space(r);
    if (expect(r, '{') != 0)
        return -1;
    skip_space(r);
    if (r->at < r->end && *r->at == '}') {
        r->at++;
        return 0;
    }
    for (;;) {
        skip_space(r);
        if (read_name(r, copy, &name, &len) != 0)
            return -1;
        skip_space(r);
        if (expect(r, ':') != 0)
            return -1;
        skip_space(r);
        if (field(r, name, len, ctx) != 0)
            return -1;
        skip_space(r);
        if (r->at < r->end && *r->at == ',') {
            r->at++;
            continue;
        }
        return expect(r, '}');
    }
}

static int key_field(struct reader *r, const char *name, size_t len, void *ctx)
{
    struct gw_log_line *line = ctx;
    char *hash;

    if (line->n_keys == GW_ACCESS_KEYS_MAX)
        return fail(r, "more keys than the access log writes");
    hash = line->keys[line->n_keys].hash;
    memcpy(line->keys[line->n_keys].source, name, len);
    line->keys[line->n_keys].source[len] = '\0';
    if (gw_log_line_key(line, line->keys[line->n_keys].source) != NULL)
        return fail(r, "a key source given twice");
    if (read_string(r, hash, sizeof line->keys[0].hash) != 0 || strlen(hash) != 16 ||
        strspn(hash, "0123456789abcdef") != 16)
        return fail(r, "a key that is not a 16-digit hash");
    line->n_keys++;
    return 0;
}

/* The fields read, by name: a string or a number into its member of struct gw_log_line, or
 * keys. Any other field is checked for shape and skipped. */
enum field_kind { FIELD_STRING, FIELD_NUMBER, FIELD_KEYS };

#define NAME(text)     text, sizeof text - 1
#define MEMBER(member) offsetof(struct gw_log_line, member), sizeof((struct gw_log_line *)0)->member

static const struct field {
    const char *name;
    size_t name_len;
    enum field_kind kind;
    bool needed;
    size_t offset, size; /* a string's member */
} fields[] = {
    {NAME("method"), FIELD_STRING, true, MEMBER(method)},
    {NAME("path"), FIELD_STRING, true, MEMBER(path)},
    {NAME("host"), FIELD_STRING, false, MEMBER(host)},
    {NAME("consumer"), FIELD_STRING, false, MEMBER(consumer)},
    {NAME("decision"), FIELD_STRING, false, MEMBER(decision)},
    {NAME("decided_ns"), FIELD_NUMBER, true, MEMBER(decided_ns)},
    {NAME("status"), FIELD_NUMBER, false, MEMBER(status)},
    {NAME("keys"), FIELD_KEYS, true, 0, 0},
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

struct line_ctx {
    struct gw_log_line *line;
    unsigned seen; /* a bit per entry of `fields`: catches a field given twice */
};

static int line_field(struct reader *r, const char *name, size_t len, void *ctx_)
{
    struct line_ctx *ctx = ctx_;
    size_t f = 0;

    while (f < N_FIELDS && (fields[f].name_len != len || fields[f].name[0] != name[0] ||
                            memcmp(fields[f].name, name, len) != 0))
        f++;
    if (f == N_FIELDS) {
        if (r->at < r->end && *r->at == '"')
            return read_string(r, NULL, 0);
        return read_number(r, NULL);
    }
    if (ctx->seen & (1u << f))
        return fail(r, "a field given twice");
    ctx->seen |= 1u << f;
    if (fields[f].kind == FIELD_NUMBER)
        return read_number(r, (int64_t *)((char *)ctx->line + fields[f].offset));
    if (fields[f].kind == FIELD_KEYS)
        return read_object(r, key_field, ctx->line);
    return read_string(r, (char *)ctx->line + fields[f].offset, fields[f].size);
}

int gw_log_line_parse(const char *text, size_t len, struct gw_log_line *out, const char **reason)
{
    struct reader r = {text, text + len, NULL};
    struct line_ctx ctx = {out, 0};
    int rc = -1;

    for (size_t f = 0; f < N_FIELDS; f++)
        if (fields[f].kind == FIELD_STRING)
            ((char *)out)[fields[f].offset] = '\0';
    out->decided_ns = 0;
    out->status = 0;
    out->n_keys = 0;
    if (read_object(&r, line_field, &ctx) != 0)
        goto out;
    skip_space(&r);
    if (r.at != r.end) {
        fail(&r, "text after the object");
        goto out;
    }
    for (size_t f = 0; f < N_FIELDS; f++)
        if (fields[f].needed && !(ctx.seen & (1u << f))) {
            fail(&r, "method, path, decided_ns or keys is missing (a log older than simulate?)");
            goto out;
        }
    rc = 0;
out:
    *reason = r.reason;
    return rc;
}

const char *gw_log_line_key(const struct gw_log_line *line, const char *source)
{
    for (size_t i = 0; i < line->n_keys; i++)
        if (strcmp(line->keys[i].source, source) == 0)
            return line->keys[i].hash;
    return NULL;
}
