/* The recording upstream and the raw client; design in recorder.h. */
#include <errno.h>
#include <fcntl.h>
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

#include "tests/integration/recorder.h"

#define MAX_CONNS    64
#define HEAD_MAX     (64 * 1024)
#define SETTLE_MS    250  /* raw_session: quiet time after a whole response before it stops */
#define STRAY_MS     50   /* RECORDER_STRAY: how long a connection is idle before the stray goes */
#define SEND_WAIT_MS 5000 /* longest wait for a peer to take more of an answer */
#define FILL_LINE    64   /* RECORDER_HUGE_HEAD: bytes of each X-Fill line, CRLF included */

/* What one connection has sent that is not yet a whole request, and what is due on it. */
struct recorder_conn {
    int fd;
    char *pending;
    size_t len, cap;
    unsigned served; /* requests read whole on this connection */
    char *answer;    /* held back until answer_at (recorder_set_delay()) */
    size_t answer_len;
    int64_t answer_at; /* 0: no answer held */
    int64_t stray_at;  /* 0: no stray due */
};

/* The modes as one request found them, copied under the lock. */
struct behaviour {
    unsigned modes, close_at;
    size_t head_size;
    int delay_ms;
    int status, path_status;
    char status_path[64];
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

/* The value of field `name` in the head (trimmed of SP and HTAB), or NULL. */
static const char *field_value(const char *head, size_t head_len, const char *name,
                               size_t *value_len)
{
    const char *end = head + head_len, *line = memchr(head, '\n', head_len);
    size_t name_len = strlen(name);

    while (line != NULL && ++line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        size_t line_len = eol ? (size_t)(eol - line) : (size_t)(end - line);

        if (line_len > name_len && line[name_len] == ':' &&
            strncasecmp(line, name, name_len) == 0) {
            const char *v = line + name_len + 1, *v_end = line + line_len;

            while (v < v_end && (*v == ' ' || *v == '\t'))
                v++;
            while (v_end > v && (v_end[-1] == '\r' || v_end[-1] == ' ' || v_end[-1] == '\t'))
                v_end--;
            *value_len = (size_t)(v_end - v);
            return v;
        }
        line = eol;
    }
    return NULL;
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

/* RECORDER_HUGE_HEAD: X-Fill lines bringing a head of `so_far` bytes (without its final CRLF)
 * to `size` bytes with it. */
static void fill_head(FILE *out, size_t so_far, size_t size)
{
    size_t left = size > so_far + 2 ? size - so_far - 2 : 0;

    for (unsigned i = 1; left > 0; i++) {
        char name[32];
        int name_len = snprintf(name, sizeof name, "X-Fill-%u: ", i);
        size_t line = left >= 2 * FILL_LINE ? FILL_LINE : left;

        if (line < (size_t)name_len + 3)
            break; /* no room for one more field: a few bytes short */
        fputs(name, out);
        for (size_t v = 0; v < line - (size_t)name_len - 2; v++)
            fputc('a' + (int)((i + v) % 26), out);
        fputs("\r\n", out);
        left -= line;
    }
}

/* The reason phrase for `status` (any text will do; these read naturally in a log). */
static const char *reason_phrase(int status)
{
    static const struct {
        int status;
        const char *text;
    } phrases[] = {
        {200, "OK"},          {404, "Not Found"},           {500, "Internal Server Error"},
        {502, "Bad Gateway"}, {503, "Service Unavailable"}, {504, "Gateway Timeout"}};

    for (size_t i = 0; i < sizeof phrases / sizeof phrases[0]; i++)
        if (phrases[i].status == status)
            return phrases[i].text;
    return "Recorded";
}

/* The status to answer the request whose head is `head` with: the path's own, if `b` names
 * the request's path, else the recorder's. */
static int answer_status(const struct behaviour *b, const char *head, size_t head_len)
{
    const char *target = memchr(head, ' ', head_len), *end;
    size_t path_len = strlen(b->status_path);

    if (path_len == 0 || target == NULL)
        return b->status;
    target++;
    end = target;
    while (end < head + head_len && *end != ' ' && *end != '?' && *end != '\r')
        end++;
    return (size_t)(end - target) == path_len && memcmp(target, b->status_path, path_len) == 0
               ? b->path_status
               : b->status;
}

/* The answer to the request whose head is `head`, shaped by `b`; NULL when memory is short.
 * The caller frees it. */
static char *make_answer(const struct behaviour *b, const char *head, size_t head_len, size_t *len)
{
    const char *body = "ok";
    size_t body_len = 2;
    char *answer = NULL;
    FILE *out = open_memstream(&answer, len);

    if (out == NULL)
        return NULL;
    if (b->modes & RECORDER_ECHO_AUTH) {
        body = field_value(head, head_len, "Authorization", &body_len);
        if (body == NULL) {
            body = "";
            body_len = 0;
        }
    }
    {
        int status = answer_status(b, head, head_len);

        fprintf(out, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n", status, reason_phrase(status),
                body_len);
    }
    if (b->modes & RECORDER_TWO_CONNECTION_FIELDS)
        fputs("Connection: keep-alive\r\nConnection: X-Secret\r\nX-Secret: leaked\r\n", out);
    if (b->modes & RECORDER_HUGE_HEAD) {
        fflush(out);
        fill_head(out, *len, b->head_size);
    }
    fputs("\r\n", out);
    fwrite(body, 1, body_len, out);
    if (fclose(out) != 0) {
        free(answer);
        return NULL;
    }
    return answer;
}

/* Sends all `len` bytes, waiting up to SEND_WAIT_MS each time the peer's window is full. 0, or
 * -1 when the peer is gone or has stopped reading (a gateway that neither reads nor closes
 * must not stall every other connection, nor recorder_stop()). */
static int send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};

            if (poll(&p, 1, SEND_WAIT_MS) <= 0)
                return -1;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sends the answer held on `c`, remembered as the last one. 0, or -1. */
static int send_answer(struct recorder *r, struct recorder_conn *c, unsigned modes)
{
    int rc;

    /* Counted before it goes: once sent, the gateway can answer its client, and the test
     * read the count, before this thread is scheduled again. */
    pthread_mutex_lock(&r->lock);
    r->requests++;
    pthread_mutex_unlock(&r->lock);
    rc = send_all(c->fd, c->answer, c->answer_len);
    pthread_mutex_lock(&r->lock);
    if (rc != 0)
        r->requests--;
    free(r->last_answer);
    r->last_answer = c->answer;
    r->last_answer_len = c->answer_len;
    pthread_mutex_unlock(&r->lock);
    c->answer = NULL;
    c->answer_at = 0;
    if (rc == 0 && (modes & RECORDER_STRAY))
        c->stray_at = now_ms() + STRAY_MS;
    return rc;
}

/* Answers every whole request in c->pending, or holds the first answer back when answers are
 * delayed. -1 when the connection is to be closed. */
static int serve_pending(struct recorder *r, struct recorder_conn *c)
{
    while (c->answer_at == 0) {
        char *end = memmem(c->pending, c->len, "\r\n\r\n", 4);
        struct behaviour b;
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
        r->received++;
        b = (struct behaviour){r->modes,       r->close_at, r->head_size, r->delay_ms, r->status,
                               r->path_status, ""};
        memcpy(b.status_path, r->status_path, sizeof b.status_path);
        pthread_mutex_unlock(&r->lock);
        c->served++;
        if ((b.modes & RECORDER_CLOSE_AFTER_READ) && c->served == b.close_at)
            return -1; /* read whole, recorded, and never answered */
        c->answer = make_answer(&b, c->pending, head_len, &c->answer_len);
        if (c->answer == NULL)
            return -1;
        memmove(c->pending, c->pending + whole, c->len - whole);
        c->len -= whole;
        if (b.delay_ms > 0) {
            c->answer_at = now_ms() + b.delay_ms;
            return 0;
        }
        if (send_answer(r, c, b.modes) != 0)
            return -1;
    }
    return 0;
}

static void drop_conn(struct recorder *r, size_t i)
{
    close(r->conns[i].fd);
    free(r->conns[i].pending);
    free(r->conns[i].answer);
    r->conns[i] = r->conns[--r->n_conns];
    pthread_mutex_lock(&r->lock);
    r->open--;
    pthread_mutex_unlock(&r->lock);
}

static void accept_conn(struct recorder *r)
{
    int fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0)
        return;
    if (r->n_conns == MAX_CONNS) {
        close(fd);
        return;
    }
    r->conns[r->n_conns++] = (struct recorder_conn){.fd = fd};
    pthread_mutex_lock(&r->lock);
    r->connections++;
    r->open++;
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
    c->stray_at = 0; /* no longer idle: a stray now could pass for the next answer */
    pthread_mutex_lock(&r->lock);
    failed = append(&r->bytes, &r->len, &r->cap, buf, (size_t)n);
    pthread_mutex_unlock(&r->lock);
    if (failed != 0 || append(&c->pending, &c->len, &c->cap, buf, (size_t)n) != 0)
        return false;
    return serve_pending(r, c) == 0;
}

/* Sends what is due on connection `i` at `now`: a held answer (then what queued behind it),
 * or a stray. False when it is to be dropped. */
static bool run_timers(struct recorder *r, size_t i, int64_t now)
{
    struct recorder_conn *c = &r->conns[i];
    unsigned modes;

    pthread_mutex_lock(&r->lock);
    modes = r->modes;
    pthread_mutex_unlock(&r->lock);
    if (c->answer_at != 0 && c->answer_at <= now)
        return send_answer(r, c, modes) == 0 && serve_pending(r, c) == 0;
    if (c->stray_at != 0 && c->stray_at <= now) {
        c->stray_at = 0;
        return send_all(c->fd, RECORDER_STRAY_RESPONSE, sizeof RECORDER_STRAY_RESPONSE - 1) == 0;
    }
    return true;
}

/* Milliseconds until the next timer of any connection, or -1 when none is set. */
static int next_timer(const struct recorder *r, int64_t now)
{
    int64_t next = -1;

    for (size_t i = 0; i < r->n_conns; i++) {
        const struct recorder_conn *c = &r->conns[i];
        int64_t at = c->answer_at != 0 ? c->answer_at : c->stray_at;

        if (at != 0 && (next < 0 || at < next))
            next = at;
    }
    return next < 0 ? -1 : next <= now ? 0 : (int)(next - now);
}

static void *serve(void *arg)
{
    struct recorder *r = arg;
    struct pollfd fds[MAX_CONNS + 2];

    for (;;) {
        size_t n_conns = r->n_conns;
        int64_t now;

        fds[0] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < n_conns; i++)
            fds[i + 2] = (struct pollfd){.fd = r->conns[i].fd, .events = POLLIN};
        if (poll(fds, n_conns + 2, next_timer(r, now_ms())) < 0) {
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
        now = now_ms();
        for (size_t i = r->n_conns; i-- > 0;)
            if (!run_timers(r, i, now))
                drop_conn(r, i);
        if (fds[1].revents != 0)
            accept_conn(r);
    }
    return NULL;
}

int recorder_start(struct recorder *r)
{
    return recorder_start_on(r, 0);
}

int recorder_start_on(struct recorder *r, unsigned port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int rc = -1, on = 1;

    memset(r, 0, sizeof *r);
    r->wake[0] = r->wake[1] = -1;
    r->close_at = 2;
    r->head_size = 20 * 1024;
    r->status = 200;
    /* Close-on-exec: a gateway forked after this must not hold the listening socket, which
     * would keep the port taking connections (into a backlog nobody accepts) once stopped. */
    r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    r->conns = calloc(MAX_CONNS, sizeof *r->conns);
    if (r->listen_fd < 0 || r->conns == NULL || pipe2(r->wake, O_CLOEXEC) != 0)
        goto out;
    if (setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        bind(r->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
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
    free(r->last_answer);
    memset(r, 0, sizeof *r);
}

void recorder_reset(struct recorder *r)
{
    pthread_mutex_lock(&r->lock);
    r->len = 0;
    if (r->bytes != NULL)
        r->bytes[0] = '\0';
    r->requests = r->received = r->connections = 0;
    pthread_mutex_unlock(&r->lock);
}

void recorder_set_mode(struct recorder *r, unsigned modes)
{
    pthread_mutex_lock(&r->lock);
    r->modes = modes;
    pthread_mutex_unlock(&r->lock);
}

void recorder_set_close_at(struct recorder *r, unsigned nth)
{
    pthread_mutex_lock(&r->lock);
    r->close_at = nth;
    pthread_mutex_unlock(&r->lock);
}

void recorder_set_head_size(struct recorder *r, size_t bytes)
{
    pthread_mutex_lock(&r->lock);
    r->head_size = bytes;
    pthread_mutex_unlock(&r->lock);
}

void recorder_set_delay(struct recorder *r, int ms)
{
    pthread_mutex_lock(&r->lock);
    r->delay_ms = ms;
    pthread_mutex_unlock(&r->lock);
}

void recorder_set_status(struct recorder *r, int status)
{
    pthread_mutex_lock(&r->lock);
    r->status = status;
    pthread_mutex_unlock(&r->lock);
}

void recorder_set_path_status(struct recorder *r, const char *path, int status)
{
    pthread_mutex_lock(&r->lock);
    r->status_path[0] = '\0';
    if (path != NULL && strlen(path) < sizeof r->status_path)
        snprintf(r->status_path, sizeof r->status_path, "%s", path);
    r->path_status = status;
    pthread_mutex_unlock(&r->lock);
}

/* A NUL-terminated copy of `len` bytes of `data`; the caller frees it. */
static char *copy_bytes(const char *data, size_t len)
{
    char *copy = malloc(len + 1);

    if (copy != NULL) {
        if (len > 0)
            memcpy(copy, data, len);
        copy[len] = '\0';
    }
    return copy;
}

char *recorder_bytes(struct recorder *r, size_t *len)
{
    char *copy;

    pthread_mutex_lock(&r->lock);
    copy = copy_bytes(r->bytes, r->len);
    if (copy != NULL)
        *len = r->len;
    pthread_mutex_unlock(&r->lock);
    return copy;
}

static void *serve_canned(void *arg)
{
    struct canned *c = arg;
    size_t len = 0;
    int fd = accept(c->listen_fd, NULL, NULL);

    if (fd < 0)
        return NULL;
    while (len < sizeof c->received - 1 && strstr(c->received, "\r\n\r\n") == NULL) {
        ssize_t n = recv(fd, c->received + len, sizeof c->received - 1 - len, 0);

        if (n <= 0)
            break;
        len += (size_t)n;
        c->received[len] = '\0';
    }
    send(fd, c->answer, strlen(c->answer), MSG_NOSIGNAL);
    poll(NULL, 0, 50);
    close(fd);
    return NULL;
}

int start_canned(struct canned *c, const char *answer)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;

    memset(c, 0, sizeof *c);
    c->answer = answer;
    c->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->listen_fd < 0 || bind(c->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(c->listen_fd, 4) != 0 ||
        getsockname(c->listen_fd, (struct sockaddr *)&addr, &len) != 0)
        return -1;
    c->port = ntohs(addr.sin_port);
    return pthread_create(&c->thread, NULL, serve_canned, c);
}

void stop_canned(struct canned *c)
{
    shutdown(c->listen_fd, SHUT_RDWR); /* ends an accept() still waiting */
    pthread_join(c->thread, NULL);
    close(c->listen_fd);
}

int recorder_strip_request_ids(char *bytes, size_t *len)
{
    static const char field[] = "\r\nX-Request-Id: ";
    const size_t line = sizeof field - 1 + 32; /* from the CRLF before it to the id's end */
    int removed = 0;
    char *at = bytes;

    while (bytes != NULL && (at = strstr(at, field)) != NULL) {
        const char *id = at + sizeof field - 1;

        if (strspn(id, "0123456789abcdef") == 32 && strncmp(id + 32, "\r\n", 2) == 0) {
            memmove(at, at + line, *len - (size_t)(at + line - bytes) + 1);
            *len -= line;
            removed++;
        } else {
            at += 2;
        }
    }
    return removed;
}

char *recorder_last_answer(struct recorder *r, size_t *len)
{
    char *copy = NULL;

    pthread_mutex_lock(&r->lock);
    if (r->last_answer != NULL)
        copy = copy_bytes(r->last_answer, r->last_answer_len);
    if (copy != NULL)
        *len = r->last_answer_len;
    pthread_mutex_unlock(&r->lock);
    return copy;
}

/* One of the recorder's counters, read under its lock. */
static unsigned long counter(struct recorder *r, const unsigned long *which)
{
    unsigned long n;

    pthread_mutex_lock(&r->lock);
    n = *which;
    pthread_mutex_unlock(&r->lock);
    return n;
}

unsigned long recorder_requests(struct recorder *r)
{
    return counter(r, &r->requests);
}

unsigned long recorder_received(struct recorder *r)
{
    return counter(r, &r->received);
}

unsigned long recorder_connections(struct recorder *r)
{
    return counter(r, &r->connections);
}

unsigned long recorder_open_connections(struct recorder *r)
{
    return counter(r, &r->open);
}

/* --- the raw client -------------------------------------------------------------------- */

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
    return raw_session_paused(port, bytes, len, len, 0, answer, cap, timeout_ms, closed);
}

int raw_session_paused(unsigned port, const char *bytes, size_t len, size_t pause_at, int pause_ms,
                       char *answer, size_t cap, int timeout_ms, bool *closed)
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
    for (size_t at = 0, end = pause_at; at < len; at = end, end = len) {
        if (at > 0)
            poll(NULL, 0, pause_ms);
        if (send(fd, bytes + at, end - at, MSG_NOSIGNAL) != (ssize_t)(end - at)) {
            *closed = true; /* it closed while we were still writing */
            goto out;
        }
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

const char *visible_bytes(const char *bytes, size_t len, char *out, size_t cap)
{
    size_t at = 0;

    for (size_t i = 0; i < len && at + 8 < cap; i++) {
        unsigned char c = (unsigned char)bytes[i];

        if (c == '\r')
            at += (size_t)snprintf(out + at, cap - at, "\\r");
        else if (c == '\n')
            at += (size_t)snprintf(out + at, cap - at, "\\n");
        else if (c == '\t')
            at += (size_t)snprintf(out + at, cap - at, "\\t");
        else if (c < 0x20 || c >= 0x7f)
            at += (size_t)snprintf(out + at, cap - at, "\\x%02x", c);
        else
            out[at++] = (char)c;
    }
    if (at + 8 >= cap && cap > 4)
        memcpy(out + cap - 4, "...", 4);
    else
        out[at] = '\0';
    return out;
}

int recorder_count(struct recorder *r, const char *needle)
{
    size_t len;
    char *bytes = recorder_bytes(r, &len);
    int n = 0;

    for (const char *at = bytes; at != NULL && (at = strstr(at, needle)) != NULL; at++)
        n++;
    free(bytes);
    return n;
}
