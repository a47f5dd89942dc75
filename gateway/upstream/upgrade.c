/* The upstream side of a protocol upgrade; design in upgrade.h. */
#include <curl/curl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/common/chars.h"
#include "gateway/common/headers.h"
#include "gateway/upstream/proxy.h"
#include "gateway/upstream/upgrade.h"
#include "limiter/limiter.h"

/* What upgrade.h holds in place of libcurl's own types. */
_Static_assert(GW_UPGRADE_ERROR_LEN == CURL_ERROR_SIZE, "error_text is libcurl's error buffer");
_Static_assert(sizeof(curl_socket_t) == sizeof(int), "fd holds a curl_socket_t");

#define READ_PIECE  16384
#define MAX_INTERIM 8 /* 1xx answers before the final one; more is a broken upstream */

/* The answer as it is read: bytes in `buf`, of which [0, off) are taken. */
struct reader {
    struct gw_upgrade *up;
    char *buf;
    size_t len, off, cap;
    int64_t deadline_ns;
};

static int fail(struct gw_upgrade *up, enum gw_fault fault, const char *text)
{
    up->fault = fault;
    snprintf(up->error_text, sizeof up->error_text, "%s", text);
    return -1;
}

/* Waits until the connection is ready for `events`, or the deadline. 0, or -1. */
static int wait_for(struct gw_upgrade *up, short events, int64_t deadline_ns)
{
    struct pollfd p = {.fd = up->fd, .events = events};
    int64_t left_ms = (deadline_ns - limiter_now_ns()) / 1000000;

    if (left_ms <= 0 || gw_proxy_aborting())
        return -1;
    poll(&p, 1, left_ms > 1000 ? 1000 : (int)left_ms); /* on a signal the caller tries again */
    return 0;
}

static int send_all(struct gw_upgrade *up, const char *data, size_t len, int64_t deadline_ns)
{
    while (len > 0) {
        size_t sent = 0;
        CURLcode rc = curl_easy_send(up->easy, data, len, &sent);

        if (rc == CURLE_AGAIN) {
            if (wait_for(up, POLLOUT, deadline_ns) != 0)
                return fail(up, GW_FAULT_TIMEOUT, "the upgrade request could not be sent in time");
            continue;
        }
        if (rc != CURLE_OK)
            return fail(up, GW_FAULT_RESET, curl_easy_strerror(rc));
        data += sent;
        len -= sent;
    }
    return 0;
}

/* Reads more of the answer into the reader. 1 when bytes came, 0 at the upstream's close, -1
 * on a failure (with the fault set). */
static int read_more(struct reader *r, size_t limit)
{
    for (;;) {
        size_t got = 0;
        CURLcode rc;

        if (r->cap - r->len < READ_PIECE && r->cap < limit) {
            size_t cap = r->cap + READ_PIECE > limit ? limit : r->cap + READ_PIECE;
            char *grown = realloc(r->buf, cap);

            if (grown == NULL)
                return fail(r->up, GW_FAULT_OTHER, "out of memory");
            r->buf = grown;
            r->cap = cap;
        }
        if (r->len >= limit || r->len == r->cap)
            return fail(r->up, GW_FAULT_TOO_LARGE, "the answer to the upgrade is too large");
        rc = curl_easy_recv(r->up->easy, r->buf + r->len, r->cap - r->len, &got);
        if (rc == CURLE_AGAIN) {
            if (wait_for(r->up, POLLIN, r->deadline_ns) != 0)
                return fail(r->up, GW_FAULT_TIMEOUT,
                            "no answer to the upgrade within the route's timeout");
            continue;
        }
        if (rc != CURLE_OK)
            return fail(r->up, GW_FAULT_RESET, curl_easy_strerror(rc));
        r->len += got;
        return got > 0;
    }
}

/* The next line of the answer (without its CRLF, NUL-terminated in place), read as needed,
 * within `limit` bytes in all; NULL on a failure, a bare LF, or the upstream's close. */
static char *next_line(struct reader *r, size_t limit)
{
    for (;;) {
        char *start = r->buf + r->off;
        char *lf = r->len > r->off ? memchr(start, '\n', r->len - r->off) : NULL;

        if (lf != NULL) {
            if (lf == start || lf[-1] != '\r') {
                fail(r->up, GW_FAULT_INVALID, "a line of the answer ends without CRLF");
                return NULL;
            }
            if (memchr(start, '\0', (size_t)(lf - start)) != NULL) {
                fail(r->up, GW_FAULT_INVALID, "a line of the answer holds a NUL byte");
                return NULL;
            }
            lf[-1] = '\0';
            r->off = (size_t)(lf + 1 - r->buf);
            return start;
        }
        int got;

        got = read_more(r, limit);
        if (got <= 0) {
            if (got == 0)
                fail(r->up, GW_FAULT_RESET, "the upstream closed the connection before answering");
            return NULL;
        }
    }
}

/* Keeps one field line; -1 (invalid) for one that is not `token ":" value`. */
static int keep_field(struct gw_upgrade *up, const char *line)
{
    const char *colon = strchr(line, ':'), *value;
    size_t name_len, value_len, need;
    char *grown;

    if (colon == NULL || colon == line)
        return fail(up, GW_FAULT_INVALID, "the answer holds a line that is no field");
    for (const char *p = line; p < colon; p++)
        if (!gw_is_tchar((unsigned char)*p))
            return fail(up, GW_FAULT_INVALID, "the answer holds a field name that is no token");
    for (value = colon + 1; *value == ' ' || *value == '\t'; value++)
        ;
    value_len = strlen(value);
    while (value_len > 0 && (value[value_len - 1] == ' ' || value[value_len - 1] == '\t'))
        value_len--;
    for (size_t i = 0; i < value_len; i++)
        if (gw_is_control((unsigned char)value[i]) && value[i] != '\t')
            return fail(up, GW_FAULT_INVALID, "a field of the answer holds a control character");
    name_len = (size_t)(colon - line);
    need = up->head_len + name_len + value_len + 2;
    grown = realloc(up->head, need);
    if (grown == NULL)
        return fail(up, GW_FAULT_OTHER, "out of memory");
    up->head = grown;
    memcpy(up->head + up->head_len, line, name_len);
    up->head[up->head_len + name_len] = '\0';
    memcpy(up->head + up->head_len + name_len + 1, value, value_len);
    up->head[need - 1] = '\0';
    up->head_len = need;
    return 0;
}

/* Reads an answer's head: its status and fields into `up`. 0, or -1. */
static int read_head(struct reader *r, size_t max_head)
{
    size_t limit = r->off + max_head;
    char *line = next_line(r, limit);
    char *end;

    if (line == NULL)
        return -1;
    if (strncmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') || line[8] != ' ' ||
        !gw_is_digit((unsigned char)line[9]) || !gw_is_digit((unsigned char)line[10]) ||
        !gw_is_digit((unsigned char)line[11]) || (line[12] != ' ' && line[12] != '\0'))
        return fail(r->up, GW_FAULT_INVALID,
                    "the answer does not start with an HTTP/1.1 status line");
    r->up->status = strtol(line + 9, &end, 10);
    if (r->up->status < 100)
        return fail(r->up, GW_FAULT_INVALID, "the answer's status is out of range");
    if (r->up->status == 101 && line[7] != '1')
        return fail(r->up, GW_FAULT_INVALID, "an HTTP/1.0 answer cannot switch protocols");
    for (const char *p = line + 12; *p != '\0'; p++)
        if (gw_is_control((unsigned char)*p) && *p != '\t')
            return fail(r->up, GW_FAULT_INVALID,
                        "the answer's reason phrase holds a control character");
    r->up->head_len = 0;
    while ((line = next_line(r, limit)) != NULL && line[0] != '\0')
        if (line[0] == ' ' || line[0] == '\t')
            return fail(r->up, GW_FAULT_INVALID, "the answer folds a field over lines");
        else if (keep_field(r->up, line) != 0)
            return -1;
    return line == NULL ? -1 : 0;
}

/* The answer's field `name`, or NULL; -1 in *count when it appears more than once. */
static const char *field(const struct gw_upgrade *up, const char *name, int *count)
{
    const char *found = NULL, *n, *v;
    size_t cursor = 0;

    *count = 0;
    while (gw_field_next(up->head, up->head_len, &cursor, &n, &v))
        if (strcasecmp(n, name) == 0) {
            found = v;
            ++*count;
        }
    return found;
}

/* `n` more bytes of body, from what is read or reading on. 0, or -1. */
static int take_bytes(struct reader *r, uint64_t n, size_t limit)
{
    while (r->len - r->off < n) {
        int got = read_more(r, limit);

        if (got <= 0)
            return got == 0 ? fail(r->up, GW_FAULT_CUT, "the upstream closed before the body's end")
                            : -1;
    }
    return 0;
}

/* Reads the body of an answer other than 101 into up->early. 0, or -1. */
static int read_body(struct reader *r)
{
    struct gw_upgrade *up = r->up;
    /* Chunk sizes and trailers take some room beside the body itself. */
    size_t start = r->off, limit = r->off + GW_UPGRADE_MAX_BODY + 4096, out = r->off;
    int te_count, cl_count;
    const char *te = field(up, "Transfer-Encoding", &te_count);
    const char *cl = field(up, "Content-Length", &cl_count);

    if (up->status == 204 || up->status == 304) {
        r->len = r->off; /* nothing more belongs to this answer */
    } else if (te != NULL) {
        if (te_count > 1 || strcasecmp(te, "chunked") != 0 || cl != NULL)
            return fail(up, GW_FAULT_INVALID, "the answer's body is framed in a way not passed on");
        for (;;) {
            char *line = next_line(r, limit);
            uint64_t size = 0;
            size_t digits = 0;

            if (line == NULL)
                return -1;
            /* Hex digits only (no "0x", no sign, no space), then the end or an extension. */
            while (digits < 16 && gw_hex_value((unsigned char)line[digits]) >= 0)
                size = size * 16 + (uint64_t)gw_hex_value((unsigned char)line[digits++]);
            if (digits == 0 || (line[digits] != '\0' && line[digits] != ';'))
                return fail(up, GW_FAULT_INVALID, "a chunk of the answer has no size");
            if (size > GW_UPGRADE_MAX_BODY || out - start + size > GW_UPGRADE_MAX_BODY)
                return fail(up, GW_FAULT_TOO_LARGE, "the answer to the upgrade is too large");
            if (size == 0)
                break;
            if (take_bytes(r, size + 2, limit) != 0)
                return -1;
            if (memcmp(r->buf + r->off + size, "\r\n", 2) != 0)
                return fail(up, GW_FAULT_INVALID, "a chunk of the answer is longer than it says");
            memmove(r->buf + out, r->buf + r->off, size); /* the chunks, back to back */
            out += size;
            r->off += size + 2;
        }
        while ((te = next_line(r, limit)) != NULL && te[0] != '\0')
            ; /* trailer fields are not passed on */
        if (te == NULL)
            return -1;
        r->off = out;
        r->len = out;
    } else if (cl != NULL) {
        char *end;
        unsigned long long length = strtoull(cl, &end, 10);

        if (cl_count > 1 || !gw_is_digit((unsigned char)cl[0]) || *end != '\0')
            return fail(up, GW_FAULT_INVALID, "the answer's Content-Length is not one number");
        if (length > GW_UPGRADE_MAX_BODY)
            return fail(up, GW_FAULT_TOO_LARGE, "the answer to the upgrade is too large");
        if (take_bytes(r, length, limit) != 0)
            return -1;
        r->len = r->off + length;
    } else {
        int got;

        while ((got = read_more(r, limit)) > 0) /* the body ends with the connection */
            ;
        if (got < 0)
            return -1;
    }
    up->early_len = r->len - start;
    up->early = malloc(up->early_len + 1);
    if (up->early == NULL)
        return fail(up, GW_FAULT_OTHER, "out of memory");
    memcpy(up->early, r->buf + start, up->early_len);
    return 0;
}

/* The request as it goes on the wire: the request line, then each of the list's fields
 * (libcurl's spellings: "Name;" is an empty value, "Name:" removes a field libcurl would add,
 * which none does here). NULL when memory is short. */
static char *request_text(const struct gw_forward *fw, size_t *len)
{
    const char *target = strstr(fw->url, "://");
    size_t cap = strlen(fw->method) + strlen(fw->url) + 16;
    char *text;

    target = target != NULL ? strpbrk(target + 3, "/?") : NULL;
    for (const struct curl_slist *h = fw->headers; h != NULL; h = h->next)
        cap += strlen(h->data) + 4;
    text = malloc(cap);
    if (text == NULL)
        return NULL;
    *len = (size_t)snprintf(text, cap, "%s %s%s HTTP/1.1\r\n", fw->method,
                            target == NULL || target[0] == '?' ? "/" : "",
                            target != NULL ? target : "");
    for (const struct curl_slist *h = fw->headers; h != NULL; h = h->next) {
        size_t n = strlen(h->data);

        if (n > 0 && h->data[n - 1] == ':' && strchr(h->data, ':') == h->data + n - 1)
            continue;
        if (n > 0 && h->data[n - 1] == ';' && strchr(h->data, ':') == NULL)
            *len += (size_t)snprintf(text + *len, cap - *len, "%.*s:\r\n", (int)(n - 1), h->data);
        else
            *len += (size_t)snprintf(text + *len, cap - *len, "%s\r\n", h->data);
    }
    *len += (size_t)snprintf(text + *len, cap - *len, "\r\n");
    return text;
}

/* Makes the connection with libcurl: TCP, TLS, the forward proxy. 0, or -1. */
static int connect_upstream(const struct gw_forward *fw, struct gw_upgrade *up)
{
    CURLcode rc;

    up->easy = curl_easy_init();
    if (up->easy == NULL)
        return fail(up, GW_FAULT_OTHER, "out of memory");
    curl_easy_setopt(up->easy, CURLOPT_URL, fw->url);
    curl_easy_setopt(up->easy, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(up->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(up->easy, CURLOPT_TCP_NODELAY, 1L);
    /* The request is HTTP/1.1, written here: TLS must not agree on h2 (ALPN) under it. */
    curl_easy_setopt(up->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(up->easy, CURLOPT_ERRORBUFFER, up->error_text);
    curl_easy_setopt(up->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)(fw->connect_timeout_ns / 1000000));
    curl_easy_setopt(up->easy, CURLOPT_SSL_VERIFYPEER, fw->tls_verify ? 1L : 0L);
    curl_easy_setopt(up->easy, CURLOPT_SSL_VERIFYHOST, fw->tls_verify ? 2L : 0L);
    gw_upstream_set_proxy(up->easy, fw->proxy);
    if (fw->proxy != NULL)
        curl_easy_setopt(up->easy, CURLOPT_HTTPPROXYTUNNEL, 1L);
    up->error_text[0] = '\0';
    rc = curl_easy_perform(up->easy);
    if (rc != CURLE_OK) {
        up->fault = gw_fault_of(rc);
        if (up->error_text[0] == '\0')
            snprintf(up->error_text, sizeof up->error_text, "%s", curl_easy_strerror(rc));
        return -1;
    }
    if (curl_easy_getinfo(up->easy, CURLINFO_ACTIVESOCKET, &up->fd) != CURLE_OK ||
        up->fd == CURL_SOCKET_BAD)
        return fail(up, GW_FAULT_OTHER, "the connection has no socket");
    return 0;
}

int gw_upgrade_connect(const struct gw_forward *fw, struct gw_upgrade *up)
{
    struct reader r = {.up = up};
    size_t len = 0;
    char *text;
    int rc = -1;

    memset(up, 0, sizeof *up);
    up->fd = CURL_SOCKET_BAD;
    if (connect_upstream(fw, up) != 0)
        return -1;
    r.deadline_ns = limiter_now_ns() + fw->timeout_ns;
    text = request_text(fw, &len);
    if (text == NULL)
        return fail(up, GW_FAULT_OTHER, "out of memory");
    if (send_all(up, text, len, r.deadline_ns) != 0)
        goto out;
    for (int interim = 0;; interim++) { /* 1xx answers other than 101 come first */
        if (interim > MAX_INTERIM) {
            fail(up, GW_FAULT_INVALID, "the upstream sent too many 1xx answers");
            goto out;
        }
        if (read_head(&r, fw->max_head) != 0)
            goto out;
        if (up->status >= 200 || up->status == 101)
            break;
    }
    if (up->status != 101) {
        rc = read_body(&r);
        goto out;
    }
    up->early_len = r.len - r.off;
    up->early = malloc(up->early_len + 1);
    if (up->early == NULL) {
        fail(up, GW_FAULT_OTHER, "out of memory");
        goto out;
    }
    memcpy(up->early, r.buf + r.off, up->early_len);
    rc = 0;
out:
    free(text);
    free(r.buf);
    return rc;
}

void gw_upgrade_free(struct gw_upgrade *up)
{
    if (up->easy != NULL)
        curl_easy_cleanup(up->easy);
    free(up->head);
    free(up->early);
    memset(up, 0, sizeof *up);
    up->fd = CURL_SOCKET_BAD;
}
