/*
 * A recording upstream, in the test process: a raw-socket HTTP/1.1 server that keeps every
 * byte it receives, so a test can say exactly what the gateway sent upstream, and nothing
 * else. test_upstream (a separate process that echoes) answers what a request looked like
 * once parsed; the recorder answers what was on the wire, including anything smuggled after
 * a request.
 *
 * It listens on 127.0.0.1 on a port the kernel picks (r->port once started) and serves every
 * connection from one thread with poll(). Every byte received on any connection is appended,
 * as received, to one buffer. Requests are read the way the gateway writes them: a head up
 * to CRLFCRLF, then a Content-Length body if the head has one. Each is answered
 * "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" and the connection kept open. A head with
 * Transfer-Encoding (the gateway always sends a length), a malformed Content-Length, or more
 * than 64 KiB without CRLFCRLF gets the connection closed: those bytes are still recorded.
 *
 * Misbehaviours: recorder_set_mode() switches the answers to those of a broken or hostile
 * upstream, for every connection from the next request on, until it is set again (a reset
 * keeps it). The modes are flags and combine; each is deterministic:
 *   RECORDER_ECHO_AUTH    the body is the request's Authorization value (empty without one),
 *                         so a client can tell whose answer it got.
 *   RECORDER_STRAY        STRAY_MS (50 ms) after an answer, if nothing more has arrived on that
 *                         connection, one unrequested whole response goes out on it,
 *                         RECORDER_STRAY_RESPONSE, and the connection stays open.
 *   RECORDER_CLOSE_AFTER_READ
 *                         the Nth request on each connection (recorder_set_close_at(), 2 by
 *                         default: the first reuse) is read whole and recorded, then the
 *                         connection is closed without an answer.
 *   RECORDER_HUGE_HEAD    the answer's head (status line to the empty line, inclusive) is
 *                         recorder_set_head_size() bytes (20 KiB by default), filled with fields
 *                         "X-Fill-<i>: <letters>" of 64 bytes a line, the last one shorter.
 *   RECORDER_TWO_CONNECTION_FIELDS
 *                         the head holds "Connection: keep-alive", then a second field
 *                         "Connection: X-Secret", then "X-Secret: leaked".
 * recorder_set_delay() holds each answer back for a while (a slow upstream), so that
 * concurrent requests need connections of their own.
 *
 * Statuses: recorder_set_status() makes every answer carry another status than 200 (with the
 * same "ok" body, so not 1xx, 204 or 304), and recorder_set_path_status() gives the requests
 * for one path (the target up to any '?', compared byte for byte) a status of their own, so
 * that a server can fail its health checks ("GET /health") while it answers everything else.
 * Both hold, like the modes, until set again.
 *
 * Stopping and starting again: recorder_stop() closes the listening socket and every
 * connection, so that the port refuses connections (a server killed); recorder_start_on()
 * binds that port again (with SO_REUSEADDR, since the connections the recorder closed linger
 * in TIME_WAIT), so that the same server comes back where the gateway's config names it. The
 * recorder's sockets are close-on-exec: a gateway started after it would otherwise inherit
 * the listening socket and keep the port accepting connections (which nobody then serves)
 * after recorder_stop().
 *
 * Counting: `requests` are the requests answered, `received` every request read whole
 * (answered or not), `connections` those accepted since the last reset and `open` those open
 * now (the peer's close is seen at once, since every connection is polled).
 *
 * Locking: the thread appends under r->lock; the accessors below take it too, so a test may
 * call them while the gateway is talking to the recorder.
 *
 * Raw clients: raw_session() sends bytes on a new connection and says what came back and
 * whether the server closed the connection.
 */
#ifndef SLUICE_TESTS_RECORDER_H
#define SLUICE_TESTS_RECORDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define RECORDER_NORMAL                0u
#define RECORDER_ECHO_AUTH             (1u << 0)
#define RECORDER_STRAY                 (1u << 1)
#define RECORDER_CLOSE_AFTER_READ      (1u << 2)
#define RECORDER_HUGE_HEAD             (1u << 3)
#define RECORDER_TWO_CONNECTION_FIELDS (1u << 4)

/* What RECORDER_STRAY writes on an idle connection. */
#define RECORDER_STRAY_RESPONSE "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"

struct recorder_conn;

struct recorder {
    unsigned port; /* set by recorder_start() */

    /* private */
    int listen_fd, wake[2];
    pthread_t thread;
    pthread_mutex_t lock;
    char *bytes;
    size_t len, cap;
    unsigned long requests, received, connections, open;
    struct recorder_conn *conns;
    size_t n_conns;
    unsigned modes, close_at;
    size_t head_size;
    int delay_ms;
    int status;           /* of every answer (recorder_set_status()) */
    char status_path[64]; /* "": none (recorder_set_path_status()) */
    int path_status;
    char *last_answer;
    size_t last_answer_len;
};

/* Binds 127.0.0.1:0 and starts the thread, in RECORDER_NORMAL mode. 0, or -1 (nothing left
 * running). */
int recorder_start(struct recorder *r);

/* The same on 127.0.0.1:`port` (0: one the kernel picks), with SO_REUSEADDR: after
 * recorder_stop(), on the port it had, to bring a stopped server back. 0, or -1 (the port is
 * taken, say; nothing left running). */
int recorder_start_on(struct recorder *r, unsigned port);

/* Stops the thread and closes every connection; frees what the recorder holds. */
void recorder_stop(struct recorder *r);

/* Forgets the bytes and counts so far (open connections stay open, the mode stays). */
void recorder_reset(struct recorder *r);

/* The RECORDER_* flags, ORed, that shape the answers from the next request on. */
void recorder_set_mode(struct recorder *r, unsigned modes);

/* RECORDER_CLOSE_AFTER_READ: which request on a connection, counted from 1, goes unanswered. */
void recorder_set_close_at(struct recorder *r, unsigned nth);

/* RECORDER_HUGE_HEAD: the size of the answer's head in bytes. */
void recorder_set_head_size(struct recorder *r, size_t bytes);

/* Every answer goes out `ms` after its request was read whole (0, the default: at once). */
void recorder_set_delay(struct recorder *r, int ms);

/* The status of every answer from the next request on (200, the default, says "OK"). */
void recorder_set_status(struct recorder *r, int status);

/* The status of the answers to requests for `path` (the target up to any '?'), whatever
 * recorder_set_status() says; NULL (or a path longer than 63 bytes) for none. */
void recorder_set_path_status(struct recorder *r, const char *path, int status);

/* A copy of every byte received since the last reset, NUL-terminated for convenience (the
 * NUL is not counted in *len). The caller frees it. */
char *recorder_bytes(struct recorder *r, size_t *len);

/* Takes out of `bytes` (`*len` of them, NUL-terminated, as recorder_bytes() gives) every
 * field line "X-Request-Id: " followed by 32 lower-case hex digits and CRLF: the id the
 * gateway makes for a request that brings none it believes (gateway/common/trace.h), random
 * each time, so that a test comparing the rest byte for byte need not know it. `*len` is
 * updated; returns how many lines went. The trace suite checks the id itself. */
int recorder_strip_request_ids(char *bytes, size_t *len);

/* A copy of the last answer sent (NUL-terminated, the NUL not counted in *len), or NULL when
 * none has been. The caller frees it. */
char *recorder_last_answer(struct recorder *r, size_t *len);

/* How often `needle` occurs in the bytes received since the last reset. */
int recorder_count(struct recorder *r, const char *needle);

/* Requests answered, requests read whole (answered or not), and connections accepted, since
 * the last reset. */
unsigned long recorder_requests(struct recorder *r);
unsigned long recorder_received(struct recorder *r);
unsigned long recorder_connections(struct recorder *r);

/* Connections open now (the peer has not closed them, nor the recorder). */
unsigned long recorder_open_connections(struct recorder *r);

/* A canned upstream: takes one connection on 127.0.0.1:`port` (picked by the kernel), reads a
 * request head into `received`, writes `answer` and closes 50 ms later. For answers the
 * recorder does not give (a 101, a malformed head). */
struct canned {
    int listen_fd;
    unsigned port;
    const char *answer;
    char received[4096];
    pthread_t thread;
};

/* 0, or -1 when it could not listen. */
int start_canned(struct canned *c, const char *answer);

/* Stops it, whether it took its connection or not. */
void stop_canned(struct canned *c);

/* Sends `len` bytes on a new connection to 127.0.0.1:`port`, then reads into `answer` (`cap`
 * bytes, NUL-terminated) until the server closes the connection or `timeout_ms` passes. To
 * keep keep-alive exchanges short it also stops once a whole first response has come and
 * nothing more arrives for a quarter second. *closed is true when the server closed (end of
 * file or a reset) before it stopped reading. Returns the status of the first response, 0 when
 * none came. */
int raw_session(unsigned port, const char *bytes, size_t len, char *answer, size_t cap,
                int timeout_ms, bool *closed);

/* raw_session() with the bytes sent in two writes: the first `pause_at` of them, then the rest
 * `pause_ms` later. */
int raw_session_paused(unsigned port, const char *bytes, size_t len, size_t pause_at, int pause_ms,
                       char *answer, size_t cap, int timeout_ms, bool *closed);

/* How many responses `answer` holds: "HTTP/1.1 " at the start of a line. */
int count_responses(const char *answer);

/* `len` bytes of `bytes` with CR, LF, tabs and other controls made visible ("\r", "\x00"),
 * into `out` (`cap` bytes, cut short with "..." when it does not fit); returns `out`. */
const char *visible_bytes(const char *bytes, size_t len, char *out, size_t cap);

#endif
