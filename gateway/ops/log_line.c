/* One access log line read back for `sluice simulate`; design in log_line.h. */
#include <string.h>

#include "log_line.h"

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

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
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

        /* Most of a line is plain text: taken a run at a time. */
        while (r->at < r->end && *r->at != '"' && *r->at != '\\' && (unsigned char)*r->at >= 0x20)
            r->at++;
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
            if (c == 'u') {
                int hi, lo;

                if (r->end - r->at < 4 || r->at[0] != '0' || r->at[1] != '0' ||
                    (hi = hex_digit(r->at[2])) < 0 || (lo = hex_digit(r->at[3])) < 0)
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
static int read_object(struct reader *r, int (*field)(struct reader *, const char *, void *),
                       void *ctx)
{
    char name[GW_KEY_SOURCE_LEN];

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
        if (read_string(r, name, sizeof name) != 0)
            return fail(r, "a field name longer than the access log writes");
        skip_space(r);
        if (expect(r, ':') != 0)
            return -1;
        skip_space(r);
        if (field(r, name, ctx) != 0)
            return -1;
        skip_space(r);
        if (r->at < r->end && *r->at == ',') {
            r->at++;
            continue;
        }
        return expect(r, '}');
    }
}

static int key_field(struct reader *r, const char *name, void *ctx)
{
    struct gw_log_line *line = ctx;

    if (line->n_keys == GW_ACCESS_KEYS_MAX)
        return fail(r, "more keys than the access log writes");
    if (gw_log_line_key(line, name) != NULL)
        return fail(r, "a key source given twice");
    if (read_string(r, line->keys[line->n_keys].hash, sizeof line->keys[0].hash) != 0 ||
        strlen(line->keys[line->n_keys].hash) != 16 ||
        strspn(line->keys[line->n_keys].hash, "0123456789abcdef") != 16)
        return fail(r, "a key that is not a 16-digit hash");
    memcpy(line->keys[line->n_keys].source, name, strlen(name) + 1);
    line->n_keys++;
    return 0;
}

/* The fields read, by name; `seen` bits catch one given twice. */
struct line_ctx {
    struct gw_log_line *line;
    unsigned seen;
};

enum { F_METHOD, F_PATH, F_HOST, F_ROUTE, F_DECISION, F_LIMIT, F_DECIDED, F_KEYS, F_OTHER };
#define NEEDED ((1u << F_METHOD) | (1u << F_PATH) | (1u << F_DECIDED) | (1u << F_KEYS))

static int line_field(struct reader *r, const char *name, void *ctx_)
{
    static const char *const names[F_OTHER] = {"method",   "path",  "host",       "route",
                                               "decision", "limit", "decided_ns", "keys"};
    struct line_ctx *ctx = ctx_;
    struct gw_log_line *line = ctx->line;
    unsigned f = 0;

    while (f < F_OTHER && (names[f][0] != name[0] || strcmp(names[f], name) != 0))
        f++;
    if (f < F_OTHER && (ctx->seen & (1u << f)))
        return fail(r, "a field given twice");
    if (f < F_OTHER)
        ctx->seen |= 1u << f;
    switch (f) {
    case F_METHOD:
        return read_string(r, line->method, sizeof line->method);
    case F_PATH:
        return read_string(r, line->path, sizeof line->path);
    case F_HOST:
        return read_string(r, line->host, sizeof line->host);
    case F_ROUTE:
        return read_string(r, line->route, sizeof line->route);
    case F_DECISION:
        return read_string(r, line->decision, sizeof line->decision);
    case F_LIMIT:
        return read_string(r, line->limit, sizeof line->limit);
    case F_DECIDED:
        return read_number(r, &line->decided_ns);
    case F_KEYS:
        return read_object(r, key_field, line);
    default:
        if (r->at < r->end && *r->at == '"')
            return read_string(r, NULL, 0);
        return read_number(r, NULL);
    }
}

int gw_log_line_parse(const char *text, size_t len, struct gw_log_line *out, const char **reason)
{
    struct reader r = {text, text + len, NULL};
    struct line_ctx ctx = {out, 0};
    int rc = -1;

    memset(out, 0, offsetof(struct gw_log_line, keys));
    out->n_keys = 0;
    if (read_object(&r, line_field, &ctx) != 0)
        goto out;
    skip_space(&r);
    if (r.at != r.end) {
        fail(&r, "text after the object");
        goto out;
    }
    if ((ctx.seen & NEEDED) != NEEDED) {
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
