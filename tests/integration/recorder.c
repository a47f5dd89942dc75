/* The recording upstream and the raw client; design in recorder.h. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "recorder.h"

#define MAX_CONNS 64
#define HEAD_MAX  (64 * 1024)
#define SETTLE_MS 250 /* raw_session: quiet time after a whole response before it stops */

static const char answer_ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/* What one connection has sent that is not yet a whole request. */
struct recorder_conn {
    int fd;
    char *pending;
    size_t len, cap;
};

static int append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t grown_cap = *cap ? *cap : 4096;
        char *grown;

        while (grown_cap < *len + n + 1)
            grown_cap *= 2;
        grown = realloc(*buf, grown_cap);
        if (grown == NULL)
            return -1;
        *buf = grown;
        *cap = grown_cap;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

/* The body length the head announces: 0 without Content-Length, -1 when the head is not one
 * the gateway would send (Transfer-Encoding, a length that is not digits). */
static long long body_length(const char *head, size_t head_len)
{
    const char *end = head + head_len, *line = memchr(head, '\n', head_len);
    long long length = 0;

    while (line != NULL && ++line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        size_t line_len = eol ? (size_t)(eol - line) : (size_t)(end - line);

        if (line_len >= 18 && strncasecmp(line, "Transfer-Encoding:", 18) == 0)
            return -1;
        if (line_len >= 15 && strncasecmp(line, "Content-Length:", 15) == 0) {
            const char *v = line + 15;
            char *stop;

            while (*v == ' ')
                v++;
            if (*v < '0' || *v > '9')
                return -1;
            errno = 0;
            length = strtoll(v, &stop, 10);
            if (errno != 0 || (*stop != '\r' && *stop != '\n'))
                return -1;
        }
        line = eol;
    }
    return length;
}

/* Answers every whole request in c->pending. -1 when the connection is to be closed. */
static int serve_pending(struct recorder *r, struct recorder_conn *c)
{
    for (;;) {
        char *end = memmem(c->pending, c->len, "\r\n\r\n", 4);
        size_t head_len, whole;
        long long body;

        if (end == NULL)
            return c->len > HEAD_MAX ? -1 : 0;
        head_len = (size_t)(end - c->pending) + 4;
        body = body_length(c->pending, head_len);
        if (body < 0)
            return -1;
        whole = head_len + (size_t)body;
        if (c->len < whole)
            return 0;
        pthread_mutex_lock(&r->lock);
        r->requests++;
        pthread_mutex_unlock(&r->lock);
        if (send(c->fd, answer_ok, sizeof answer_ok - 1, MSG_NOSIGNAL) !=
            (ssize_t)(sizeof answer_ok - 1))
            return -1;
        memmove(c->pending, c->pending + whole, c->len - whole);
        c->len -= whole;
    }
}

static void drop_conn(struct recorder *r, size_t i)
{
    close(r->conns[i].fd);
    free(r->conns[i].pending);
    r->conns[i] = r->conns[--r->n_conns];
}

static void accept_conn(struct recorder *r)
{
    int fd = accept(r->listen_fd, NULL, NULL);

    if (fd < 0)
        return;
    if (r->n_conns == MAX_CONNS) {
        close(fd);
        return;
    }
    r->conns[r->n_conns++] = (struct recorder_conn){.fd = fd};
    pthread_mutex_lock(&r->lock);
    r->connections++;
    pthread_mutex_unlock(&r->lock);
}

/* Reads what connection `i` has; false when it is to be dropped. */
static bool read_conn(struct recorder *r, size_t i)
{
    struct recorder_conn *c = &r->conns[i];
    char buf[16384];
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    int failed;

    if (n <= 0)
        return n < 0 && (errno == EINTR || errno == EAGAIN);
    pthread_mutex_lock(&r->lock);
    failed = append(&r->bytes, &r->len, &r->cap, buf, (size_t)n);
    pthread_mutex_unlock(&r->lock);
    if (failed != 0 || append(&c->pending, &c->len, &c->cap, buf, (size_t)n) != 0)
        return false;
    return serve_pending(r, c) == 0;
}

static void *serve(void *arg)
{
    struct recorder *r = arg;
    struct pollfd fds[MAX_CONNS + 2];

    for (;;) {
        size_t n_conns = r->n_conns;

        fds[0] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < n_conns; i++)
            fds[i + 2] = (struct pollfd){.fd = r->conns[i].fd, .events = POLLIN};
        if (poll(fds, n_conns + 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0].revents != 0)
            break;
        /* From the last, so that dropping one (which moves the last into its place) leaves
         * the ones still to look at where they were. */
        for (size_t i = n_conns; i-- > 0;)
            if (fds[i + 2].revents != 0 && !read_conn(r, i))
                drop_conn(r, i);
        if (fds[1].revents != 0)
            accept_conn(r);
    }
    return NULL;
}

int recorder_start(struct recorder *r)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int rc = -1;

    memset(r, 0, sizeof *r);
    r->wake[0] = r->wake[1] = -1;
    r->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    r->conns = calloc(MAX_CONNS, sizeof *r->conns);
    if (r->listen_fd < 0 || r->conns == NULL || pipe(r->wake) != 0)
        goto out;
    if (bind(r->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(r->listen_fd, (struct sockaddr *)&a, &len) != 0 ||
        listen(r->listen_fd, 64) != 0)
        goto out;
    r->port = ntohs(a.sin_port);
    pthread_mutex_init(&r->lock, NULL);
    if (pthread_create(&r->thread, NULL, serve, r) != 0) {
        pthread_mutex_destroy(&r->lock);
        goto out;
    }
    rc = 0;
out:
    if (rc != 0) {
        if (r->listen_fd >= 0)
            close(r->listen_fd);
        if (r->wake[0] >= 0) {
            close(r->wake[0]);
            close(r->wake[1]);
        }
        free(r->conns);
        memset(r, 0, sizeof *r);
        fprintf(stderr, "recorder: could not start\n");
    }
    return rc;
}

void recorder_stop(struct recorder *r)
{
    if (r->conns == NULL)
        return; /* never started */
    if (write(r->wake[1], "x", 1) == 1)
        pthread_join(r->thread, NULL);
    while (r->n_conns > 0)
        drop_conn(r, r->n_conns - 1);
    close(r->listen_fd);
    close(r->wake[0]);
    close(r->wake[1]);
    pthread_mutex_destroy(&r->lock);
    free(r->conns);
    free(r->bytes);
    memset(r, 0, sizeof *r);
}

void recorder_reset(struct recorder *r)
{
    pthread_mutex_lock(&r->lock);
    r->len = 0;
    if (r->bytes != NULL)
        r->bytes[0] = '\0';
    r->requests = r->connections = 0;
    pthread_mutex_unlock(&r->lock);
}

char *recorder_bytes(struct recorder *r, size_t *len)
{
    char *copy;

    pthread_mutex_lock(&r->lock);
    copy = malloc(r->len + 1);
    if (copy != NULL) {
        if (r->len > 0)
            memcpy(copy, r->bytes, r->len);
        copy[r->len] = '\0';
        *len = r->len;
    }
    pthread_mutex_unlock(&r->lock);
    return copy;
}

unsigned long recorder_requests(struct recorder *r)
{
    unsigned long n;

    pthread_mutex_lock(&r->lock);
    n = r->requests;
    pthread_mutex_unlock(&r->lock);
    return n;
}

unsigned long recorder_connections(struct recorder *r)
{
    unsigned long n;

    pthread_mutex_lock(&r->lock);
    n = r->connections;
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* --- the raw client -------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether `answer` holds a whole first response: its head, and as much body as its
 * Content-Length says (none for an answer to HEAD, or a 1xx, 204 or 304). Without a length
 * the end is the close, so it is never whole here. */
static bool first_response_whole(const char *answer, size_t len, bool head_request)
{
    const char *end = memmem(answer, len, "\r\n\r\n", 4), *field;
    size_t head_len;
    int status = 0;

    if (end == NULL)
        return false;
    head_len = (size_t)(end - answer) + 4;
    if (sscanf(answer, "HTTP/1.%*d %d", &status) == 1 &&
        (head_request || status < 200 || status == 204 || status == 304))
        return true;
    field = strcasestr(answer, "\r\nContent-Length:");
    if (field == NULL || field > end)
        return false;
    return len >= head_len + strtoull(field + 17, NULL, 10);
}

int raw_session(unsigned port, const char *bytes, size_t len, char *answer, size_t cap,
                int timeout_ms, bool *closed)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), status = 0;
    int64_t deadline = now_ms() + timeout_ms;
    bool head_request = len >= 5 && memcmp(bytes, "HEAD ", 5) == 0;
    size_t got = 0;

    *closed = false;
    answer[0] = '\0';
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        goto out;
    if (send(fd, bytes, len, MSG_NOSIGNAL) != (ssize_t)len) {
        *closed = true; /* it closed while we were still writing */
        goto out;
    }
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - now_ms();
        ssize_t n;

        if (first_response_whole(answer, got, head_request) && left > SETTLE_MS)
            left = SETTLE_MS;
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break; /* timed out (or settled) with the connection still open */
        if (got + 1 >= cap) {
            char sink[4096]; /* keep reading, to see the close, but keep nothing more */

            n = recv(fd, sink, sizeof sink, 0);
        } else {
            n = recv(fd, answer + got, cap - got - 1, 0);
        }
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            *closed = true;
            break;
        }
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && got + 1 < cap) {
            got += (size_t)n;
            answer[got] = '\0';
        }
    }
    if (sscanf(answer, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
out:
    if (fd >= 0)
        close(fd);
    return status;
}

int count_responses(const char *answer)
{
    int n = 0;

    for (const char *line = answer; line != NULL; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        n += strncmp(line, "HTTP/1.1 ", 9) == 0;
    }
    return n;
}
