/*
 * test_upstream: a small HTTP/1.1 server for sluice's tests and `make run`, written on plain
 * sockets so that every byte it answers is under the test's control.
 *
 *   test_upstream [HOST:PORT]     default 127.0.0.1:0; prints "listening on HOST:PORT"
 *
 *   /status/NNN        answers status NNN
 *   /slow?ms=N         waits N ms, then answers 200
 *   /peak              "peak P\n": the most /slow requests that were in flight at once since
 *                      the last /peak (which starts counting afresh from those in flight now)
 *   /bytes?n=N         N bytes of body, with Content-Length
 *   /chunked?n=N       N bytes of body, chunked
 *   /cut?n=N           promises 2N bytes, sends N, closes the connection
 *   /garbage           answers bytes that are not HTTP, then closes
 *   /hop               answers with hop-by-hop fields that a proxy must drop
 *   /sink?ms=N         reads a body of any size as it comes (a Content-Length or chunked),
 *                      keeping only its SHA-256, and answers "bytes B\nsha256 HEX\n", then
 *                      closes; with ms, waits N ms before each read (a slow upstream)
 *   /early             answers 401 at once, before any of the request's body, with
 *                      Connection: close, then reads and drops the body until the peer
 *                      closes (as a server that refuses an upload early does)
 *   /stats             "requests R\nconnections C\nsinks_done D\nsinks_aborted A\n" since
 *                      start (not counting /stats and /peak); an aborted sink is a connection that
 *                      ended before its body did
 *   anything else      echoes the request: method, target, every header, then the body
 *
 * SIGTERM and SIGINT end it at once, with exit status 0, also as PID 1 (the demo container's).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX (64 * 1024)
#define BODY_MAX (16 * 1024 * 1024)

static atomic_ulong requests, connections, sinks_done, sinks_aborted;
static atomic_ulong slow_in_flight, slow_peak; /* /slow requests waiting now, and the most */

static int send_all(FILE *out, const char *data, size_t len)
{
    return fwrite(data, 1, len, out) == len ? 0 : -1;
}

static int send_text(FILE *out, const char *text)
{
    return send_all(out, text, strlen(text));
}

/* The value of `name` in the query of `target`, as a number; `fallback` if absent. */
static unsigned long query_number(const char *target, const char *name, unsigned long fallback)
{
    const char *q = strchr(target, '?');
    size_t len = strlen(name);

    while (q != NULL) {
        q++;
        if (strncmp(q, name, len) == 0 && q[len] == '=')
            return strtoul(q + len + 1, NULL, 10);
        q = strchr(q, '&');
    }
    return fallback;
}

static int answer(FILE *fd, int status, const char *extra_headers, const char *body, size_t len)
{
    char head[512];

    snprintf(head, sizeof head, "HTTP/1.1 %d Test\r\nContent-Length: %zu\r\n%s\r\n", status, len,
             extra_headers);
    if (send_text(fd, head) != 0)
        return -1;
    return send_all(fd, body, len);
}

static int send_filler(FILE *fd, unsigned long n, bool chunked)
{
    static char block[16384];
    char size_line[32];

    memset(block, 'x', sizeof block);
    while (n > 0) {
        size_t k = n < sizeof block ? n : sizeof block;

        if (chunked) {
            snprintf(size_line, sizeof size_line, "%zx\r\n", k);
            if (send_text(fd, size_line) != 0)
                return -1;
        }
        if (send_all(fd, block, k) != 0 || (chunked && send_text(fd, "\r\n") != 0))
            return -1;
        n -= k;
    }
    return chunked ? send_text(fd, "0\r\n\r\n") : 0;
}

/* Answers one parsed request; -1 when the connection must close. */
static int serve_request(FILE *fd, const char *method, const char *target, const char *head,
                         const char *body, size_t body_len)
{
    char text[256];
    unsigned long n;

    if (strncmp(target, "/status/", 8) == 0) {
        int status = (int)strtol(target + 8, NULL, 10);

        snprintf(text, sizeof text, "status %d\n", status);
        if (status == 204 || status == 304) /* answers that carry no body */
            return send_text(fd, status == 204 ? "HTTP/1.1 204 Test\r\nX-Upstream: test\r\n\r\n"
                                               : "HTTP/1.1 304 Test\r\nX-Upstream: test\r\n\r\n");
        return answer(fd, status, "X-Upstream: test\r\n", text, strlen(text));
    }
    if (strncmp(target, "/slow", 5) == 0) {
        struct timespec wait;

        unsigned long now = atomic_fetch_add(&slow_in_flight, 1) + 1,
                      peak = atomic_load(&slow_peak);

        while (now > peak && !atomic_compare_exchange_weak(&slow_peak, &peak, now))
            ;
        n = query_number(target, "ms", 1000);
        wait.tv_sec = (time_t)(n / 1000);
        wait.tv_nsec = (long)(n % 1000) * 1000000;
        nanosleep(&wait, NULL);
        atomic_fetch_sub(&slow_in_flight, 1);
        return answer(fd, 200, "", "slow\n", 5);
    }
    if (strcmp(target, "/peak") == 0) {
        snprintf(text, sizeof text, "peak %lu\n",
                 atomic_exchange(&slow_peak, atomic_load(&slow_in_flight)));
        return answer(fd, 200, "", text, strlen(text));
    }
    if (strncmp(target, "/bytes", 6) == 0 || strncmp(target, "/chunked", 8) == 0) {
        bool chunked = target[1] == 'c';

        n = query_number(target, "n", 0);
        if (chunked)
            snprintf(text, sizeof text, "HTTP/1.1 200 Test\r\nTransfer-Encoding: chunked\r\n\r\n");
        else
            snprintf(text, sizeof text, "HTTP/1.1 200 Test\r\nContent-Length: %lu\r\n\r\n", n);
        if (send_text(fd, text) != 0)
            return -1;
        return send_filler(fd, n, chunked);
    }
    if (strncmp(target, "/cut", 4) == 0) {
        n = query_number(target, "n", 1000);
        snprintf(text, sizeof text, "HTTP/1.1 200 Test\r\nContent-Length: %lu\r\n\r\n", 2 * n);
        send_text(fd, text);
        send_filler(fd, n, false);
        return -1;
    }
    if (strcmp(target, "/garbage") == 0) {
        send_text(fd, "\x16\x03\x01 this is not HTTP at all\r\n\r\n");
        return -1;
    }
    if (strcmp(target, "/hop") == 0)
        return answer(fd, 200,
                      "Connection: X-Secret\r\nX-Secret: hidden\r\nKeep-Alive: timeout=5\r\n"
                      "Proxy-Authenticate: Basic\r\nUpgrade: h2c\r\nX-Kept: yes\r\n",
                      "hop\n", 4);
    if (strcmp(target, "/stats") == 0) {
        snprintf(text, sizeof text,
                 "requests %lu\nconnections %lu\nsinks_done %lu\nsinks_aborted %lu\n",
                 atomic_load(&requests), atomic_load(&connections), atomic_load(&sinks_done),
                 atomic_load(&sinks_aborted));
        return answer(fd, 200, "", text, strlen(text));
    }

    /* Echo: the request line, the head as received, the body length, the body. */
    {
        size_t len = strlen(method) + strlen(target) + strlen(head) + body_len + 64;
        char *echo = malloc(len);
        int rc;

        if (echo == NULL)
            return -1;
        snprintf(echo, len, "method %s\ntarget %s\n%sbody %zu\n", method, target, head, body_len);
        len = strlen(echo);
        memcpy(echo + len, body, body_len);
        rc = answer(fd, 200, "Content-Type: text/plain\r\n", echo, len + body_len);
        free(echo);
        return rc;
    }
}

/* Answers straight to the socket; for HEAD into a buffer first, and only the head goes out,
 * as HTTP wants. */
static int respond(int fd, const char *method, const char *target, const char *head,
                   const char *body, size_t body_len)
{
    bool head_only = strcmp(method, "HEAD") == 0;
    char *text = NULL, *end;
    size_t len = 0;
    int copy = head_only ? -1 : dup(fd);
    FILE *out = head_only ? open_memstream(&text, &len) : fdopen(copy, "w");
    int rc;

    if (out == NULL) {
        if (copy >= 0)
            close(copy);
        return -1;
    }
    rc = serve_request(out, method, target, head, body, body_len);
    if (fclose(out) != 0)
        rc = -1;
    if (head_only) {
        end = strstr(text, "\r\n\r\n");
        len = end ? (size_t)(end - text) + 4 : len;
        if (rc == 0 && send(fd, text, len, MSG_NOSIGNAL) != (ssize_t)len)
            rc = -1;
        free(text);
    }
    return rc;
}

/* Reads until `*len` holds at least `want` bytes; -1 on close or error. */
static int fill(int fd, char *buf, size_t *len, size_t want, size_t cap)
{
    while (*len < want) {
        ssize_t n = recv(fd, buf + *len, cap - *len, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        *len += (size_t)n;
    }
    return 0;
}

/* A body read as it arrives, for /sink. */
struct stream {
    int fd;
    char *buf;
    size_t off, len, cap;
    unsigned long delay_ms;
};

/* At least one byte buffered; -1 when the connection ended. */
static int stream_fill(struct stream *s)
{
    ssize_t n;

    if (s->off < s->len)
        return 0;
    if (s->delay_ms > 0) {
        struct timespec wait = {(time_t)(s->delay_ms / 1000), (long)(s->delay_ms % 1000) * 1000000};

        nanosleep(&wait, NULL);
    }
    do
        n = recv(s->fd, s->buf, s->cap, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    s->off = 0;
    s->len = (size_t)n;
    return 0;
}

/* Hashes the next `n` bytes into `hash`. */
static int stream_hash(struct stream *s, crypto_hash_sha256_state *hash, uint64_t n,
                       uint64_t *total)
{
    while (n > 0) {
        size_t k;

        if (stream_fill(s) != 0)
            return -1;
        k = s->len - s->off < n ? s->len - s->off : (size_t)n;
        crypto_hash_sha256_update(hash, (const unsigned char *)s->buf + s->off, k);
        s->off += k;
        n -= k;
        *total += k;
    }
    return 0;
}

/* The next line, without its CRLF, into `line`. */
static int stream_line(struct stream *s, char *line, size_t cap)
{
    size_t len = 0;

    for (;;) {
        char c;

        if (stream_fill(s) != 0)
            return -1;
        c = s->buf[s->off++];
        if (c == '\n')
            break;
        if (len + 1 < cap)
            line[len++] = c;
    }
    if (len > 0 && line[len - 1] == '\r')
        len--;
    line[len] = '\0';
    return 0;
}

/* /sink: the body after `head`, of which `have` bytes are in `early`; see the top. */
static void sink(int fd, const char *target, const char *head, const char *early, size_t have)
{
    struct stream s = {.fd = fd, .cap = HEAD_MAX, .delay_ms = query_number(target, "ms", 0)};
    crypto_hash_sha256_state hash;
    unsigned char digest[crypto_hash_sha256_BYTES];
    char hex[2 * crypto_hash_sha256_BYTES + 1], text[512], line[256];
    uint64_t total = 0, length = 0;
    bool chunked = false;
    int rc = 0;

    for (const char *l = head; *l != '\0'; l = strstr(l, "\r\n") + 2) {
        if (strncasecmp(l, "Content-Length:", 15) == 0)
            length = strtoull(l + 15, NULL, 10);
        if (strncasecmp(l, "Transfer-Encoding:", 18) == 0)
            chunked = strstr(l, "chunked") != NULL;
    }
    s.buf = malloc(s.cap);
    if (s.buf == NULL)
        return;
    memcpy(s.buf, early, have);
    s.len = have;
    crypto_hash_sha256_init(&hash);
    if (!chunked) {
        rc = stream_hash(&s, &hash, length, &total);
    } else {
        for (;;) {
            uint64_t size;

            rc = stream_line(&s, line, sizeof line);
            if (rc != 0)
                break;
            size = strtoull(line, NULL, 16);
            if (size == 0) {
                do /* trailer fields, up to the empty line */
                    rc = stream_line(&s, line, sizeof line);
                while (rc == 0 && line[0] != '\0');
                break;
            }
            rc = stream_hash(&s, &hash, size, &total);
            if (rc == 0)
                rc = stream_line(&s, line, sizeof line);
            if (rc != 0)
                break;
        }
    }
    free(s.buf);
    if (rc != 0) {
        atomic_fetch_add(&sinks_aborted, 1);
        return;
    }
    atomic_fetch_add(&sinks_done, 1);
    crypto_hash_sha256_final(&hash, digest);
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    snprintf(line, sizeof line, "bytes %llu\nsha256 %s\n", (unsigned long long)total, hex);
    snprintf(text, sizeof text,
             "HTTP/1.1 200 Test\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             strlen(line), line);
    send(fd, text, strlen(text), MSG_NOSIGNAL);
}

static void *serve_connection(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char *buf = malloc(HEAD_MAX + BODY_MAX);
    size_t len = 0;

    atomic_fetch_add(&connections, 1);
    while (buf != NULL) {
        char *end, method[32], target[8192], version[16], *head, *line;
        size_t head_len, body_len = 0;
        bool close_after;

        /* Read a whole head. */
        while ((end = memmem(buf, len, "\r\n\r\n", 4)) == NULL)
            if (len >= HEAD_MAX || fill(fd, buf, &len, len + 1, HEAD_MAX) != 0)
                goto out;
        head_len = (size_t)(end - buf) + 4;
        buf[head_len - 2] = '\0';
        if (sscanf(buf, "%31s %8191s %15s", method, target, version) != 3)
            goto out;
        head = strstr(buf, "\r\n") + 2;
        close_after = strcmp(version, "HTTP/1.1") != 0;
        for (line = head; *line != '\0'; line = strstr(line, "\r\n") + 2) {
            if (strncasecmp(line, "Content-Length:", 15) == 0)
                body_len = strtoul(line + 15, NULL, 10);
            if (strncasecmp(line, "Connection:", 11) == 0 && strstr(line, "close") != NULL)
                close_after = true;
        }
        if (strcmp(target, "/early") == 0) {
            static const char early[] = "HTTP/1.1 401 Test\r\nContent-Length: 6\r\n"
                                        "Connection: close\r\n\r\nearly\n";

            atomic_fetch_add(&requests, 1);
            send(fd, early, strlen(early), MSG_NOSIGNAL);
            shutdown(fd, SHUT_WR);
            while (recv(fd, buf, HEAD_MAX, 0) > 0)
                ;
            goto out;
        }
        if (strncmp(target, "/sink", 5) == 0) {
            atomic_fetch_add(&requests, 1);
            sink(fd, target, head, buf + head_len, len - head_len);
            goto out;
        }
        if (body_len > BODY_MAX || fill(fd, buf, &len, head_len + body_len, HEAD_MAX + BODY_MAX))
            goto out;
        if (strcmp(target, "/stats") != 0 && strcmp(target, "/peak") != 0)
            atomic_fetch_add(&requests, 1);

        /* The echo shows header lines as "header Name: value". */
        {
            size_t cap = 2 * head_len + 16, used = 0;
            char *shown = malloc(cap);

            for (line = head; shown != NULL && *line != '\0';) {
                char *eol = strstr(line, "\r\n");

                used += (size_t)snprintf(shown + used, cap - used, "header %.*s\n",
                                         (int)(eol - line), line);
                line = eol + 2;
            }
            int rc =
                shown == NULL ? -1 : respond(fd, method, target, shown, buf + head_len, body_len);

            free(shown);
            if (rc != 0)
                goto out;
        }
        if (close_after)
            goto out;
        memmove(buf, buf + head_len + body_len, len - head_len - body_len);
        len -= head_len + body_len;
    }
out:
    free(buf);
    close(fd);
    return NULL;
}

/* The kernel spares PID 1 every signal left at its default action, so without a handler
 * `docker stop` would wait out its timeout and kill. Nothing needs closing. */
static void stop(int sig)
{
    (void)sig;
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *where = argc > 1 ? argv[1] : "127.0.0.1:0";
    char host[256];
    const char *colon = strrchr(where, ':');
    struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM}, *ai;
    struct sockaddr_storage bound;
    socklen_t bound_len = sizeof bound;
    int listener, one = 1;
    char port[8];

    if (colon == NULL || (size_t)(colon - where) >= sizeof host) {
        fprintf(stderr, "usage: test_upstream [HOST:PORT]\n");
        return 2;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - where), where);
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
        fprintf(stderr, "test_upstream: cannot resolve %s\n", where);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    if (sodium_init() < 0) {
        fprintf(stderr, "test_upstream: libsodium did not start\n");
        return 1;
    }
    listener = socket(ai->ai_family, SOCK_STREAM, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (listener < 0 || bind(listener, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(listener, 1024) != 0) {
        fprintf(stderr, "test_upstream: cannot listen on %s: %s\n", where, strerror(errno));
        return 1;
    }
    freeaddrinfo(ai);
    getsockname(listener, (struct sockaddr *)&bound, &bound_len);
    snprintf(port, sizeof port, "%u",
             ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                               : ((struct sockaddr_in *)&bound)->sin_port));
    printf("listening on %s:%s\n", host, port);
    fflush(stdout);

    for (;;) {
        int fd = accept(listener, NULL, NULL);
        pthread_t thread;

        if (fd < 0)
            continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (pthread_create(&thread, NULL, serve_connection, (void *)(intptr_t)fd) != 0)
            close(fd);
        else
            pthread_detach(thread);
    }
}
