/* What libcurl is told for a transfer, and what it calls back with: the handle's options and
 * each request's, the response head and body landing in the handle's buffers, and the request
 * body taken from its window (body.h). The steps that drive a transfer are in exchange.c. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/methods.h"
#include "gateway/upstream/handle.h"
#include "gateway/upstream/proxy.h"

void gw_upstream_set_proxy(void *easy, const char *proxy)
{
    /* "" ignores http_proxy, HTTPS_PROXY and ALL_PROXY: upstream requests carry credentials,
     * and only a route's own `proxy:` may send them elsewhere. NOPROXY "" exempts no host
     * from it, whatever no_proxy or NO_PROXY say (and libcurl does not read them per
     * transfer). */
    curl_easy_setopt(easy, CURLOPT_PROXY, proxy != NULL ? proxy : "");
    curl_easy_setopt(easy, CURLOPT_NOPROXY, "");
}

struct curl_slist *gw_upstream_header_list(const char *text, size_t n_lines)
{
    /* One allocation rather than curl_slist_append()'s two per line: a request's list is
     * built, sent once and freed. */
    struct curl_slist *nodes = malloc(n_lines * sizeof *nodes);
    const char *at = text;

    if (nodes == NULL)
        return NULL;
    for (size_t i = 0; i < n_lines; i++) {
        nodes[i].data = (char *)at;
        nodes[i].next = i + 1 < n_lines ? &nodes[i + 1] : NULL;
        at += strlen(at) + 1;
    }
    return nodes;
}

/* Keeps one header line of the response head; a new status line starts the head afresh, so
 * only the final response's fields remain after any 100 Continue. */
static size_t on_header(char *line, size_t size, size_t n, void *cls)
{
    struct gw_upstream *u = cls;
    size_t len = size * n, name_len;
    const char *colon;

    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        u->head_len = 0;
        u->head_wire = len;
        curl_easy_getinfo(u->easy, CURLINFO_RESPONSE_CODE, &u->status);
        return len;
    }
    if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        u->head_done = u->status >= 200;
        u->progress += u->head_done;
        return len;
    }
    colon = memchr(line, ':', len);
    if (colon == NULL || colon == line || line[0] == ' ' || line[0] == '\t')
        return len; /* not a field (or obsolete folding): dropped */
    name_len = (size_t)(colon - line);
    while (len > name_len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
        len--;
    u->head_wire += len + 2; /* as the client will get it: "Name: value\r\n" */
    if (u->head_wire > u->max_head) {
        u->head_too_large = true;
        return 0; /* fails the transfer: a head this large is not an answer we pass on */
    }
    if (u->head_len + len + 2 > u->head_cap) {
        size_t cap = u->head_cap ? 2 * u->head_cap : 4096;
        char *head;

        while (cap < u->head_len + len + 2)
            cap *= 2;
        head = realloc(u->head, cap);
        if (head == NULL)
            return 0;
        u->head = head;
        u->head_cap = cap;
    }
    memcpy(u->head + u->head_len, line, name_len);
    u->head[u->head_len + name_len] = '\0';
    u->head_len += name_len + 1;
    colon++;
    while (colon < line + len && (*colon == ' ' || *colon == '\t'))
        colon++;
    memcpy(u->head + u->head_len, colon, (size_t)(line + len - colon));
    u->head_len += (size_t)(line + len - colon);
    u->head[u->head_len++] = '\0';
    return size * n;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    struct gw_upstream *u = cls;
    size_t len = size * n;

    if (u->body == NULL && (u->body = malloc(BODY_BUFFER)) == NULL)
        return 0; /* fails the transfer */
    if (u->body_off == u->body_len)
        u->body_off = u->body_len = 0;
    if (len > BODY_BUFFER - u->body_len) {
        u->paused = true; /* curl hands the same bytes again once unpaused */
        return CURL_WRITEFUNC_PAUSE;
    }
    memcpy(u->body + u->body_len, data, len);
    u->body_len += len;
    u->progress++;
    return len;
}

/* Called by libcurl right before each time it sends the request: the first time, and again
 * when it retries on a fresh connection after a reused one died. */
static int before_send(void *cls, char *ip, char *local_ip, int port, int local_port)
{
    struct gw_upstream *u = cls;

    (void)ip, (void)local_ip, (void)port, (void)local_port;
    return ++u->sends <= u->max_sends ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT;
}

/* libcurl asks for more of the request body: what the window has, or a pause until
 * gw_upstream_feed() says more came, or 0 at its end (a chunked body's last chunk goes). */
static size_t on_read(char *buf, size_t size, size_t n, void *cls)
{
    struct gw_upstream *u = cls;
    size_t got;

    if (u->request_body == NULL)
        return 0;
    got = gw_body_take(u->request_body, buf, size * n);
    if (got > 0) {
        u->progress++; /* room in the window: a client side waiting for it goes on */
        return got;
    }
    if (gw_body_done(u->request_body))
        return 0;
    u->send_paused = true;
    return CURL_READFUNC_PAUSE;
}

/* libcurl sends the request again (a reused connection died before answering): from the
 * body's start, if the window still holds it. */
static int on_seek(void *cls, curl_off_t offset, int origin)
{
    struct gw_upstream *u = cls;

    if (u->request_body == NULL || offset != 0 || origin != SEEK_SET ||
        !gw_body_rewind(u->request_body))
        return CURL_SEEKFUNC_CANTSEEK;
    return CURL_SEEKFUNC_OK;
}

/* The sockets' callbacks are handle.c's, set where the handle is made. */
void gw_upstream_set_handle_options(struct gw_upstream *u)
{
    CURL *e = u->easy;

    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, before_send);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, u);
    /* A proxy's answer to CONNECT is no part of the upstream's head. */
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* the path goes out byte for byte */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, u);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, u);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, u);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, u);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, u->error_text);
    /* A transfer dropped while its name is resolved leaves the resolver thread behind rather
     * than waiting for it (which would hold up a loop, or a client's thread). */
    curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
}

/* Every such option is set each time, so nothing of the last request's carries over
 * (curl_easy_reset() would redo the handle's options as well). */
void gw_upstream_set_request_options(struct gw_upstream *u, const struct gw_forward *fw)
{
    CURL *e = u->easy;

    /* libcurl resends a request whose reused connection died before any answer; the upstream
     * may have acted on it. Idempotent requests may go twice, others once (502 otherwise). */
    u->sends = 0;
    u->max_sends = config_method_is_idempotent(fw->method) ? 2 : 1;
    gw_upstream_set_proxy(e, fw->proxy);
    /* gw_proxy_prune() closes idle connections; this stops their reuse meanwhile. */
    curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, (long)(gw_upstream_idle_timeout_ns() / 1000000000));
    curl_easy_setopt(e, CURLOPT_URL, fw->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, fw->headers);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(fw->connect_timeout_ns / 1000000));
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, fw->tls_verify ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, fw->tls_verify ? 2L : 0L);
    /* The method: back to a plain GET first, then what this request needs. */
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_NOBODY, strcmp(fw->method, "HEAD") == 0 ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST,
                     strcmp(fw->method, "HEAD") != 0 &&
                             (strcmp(fw->method, "GET") != 0 || fw->body != NULL)
                         ? fw->method
                         : NULL);
    if (fw->body != NULL) {
        /* Read through on_read(); with no length libcurl sends the body chunked. */
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)fw->body->length);
    }
}
