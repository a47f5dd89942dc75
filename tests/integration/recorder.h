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

struct recorder_conn;

struct recorder {
    unsigned port; /* set by recorder_start() */

    /* private */
    int listen_fd, wake[2];
    pthread_t thread;
    pthread_mutex_t lock;
    char *bytes;
    size_t len, cap;
    unsigned long requests, connections;
    struct recorder_conn *conns;
    size_t n_conns;
};

/* Binds 127.0.0.1:0 and starts the thread. 0, or -1 (nothing left running). */
int recorder_start(struct recorder *r);

/* Stops the thread and closes every connection; frees what the recorder holds. */
void recorder_stop(struct recorder *r);

/* Forgets the bytes and counts so far (open connections stay open). */
void recorder_reset(struct recorder *r);

/* A copy of every byte received since the last reset, NUL-terminated for convenience (the
 * NUL is not counted in *len). The caller frees it. */
char *recorder_bytes(struct recorder *r, size_t *len);

/* Requests answered, and connections accepted, since the last reset. */
unsigned long recorder_requests(struct recorder *r);
unsigned long recorder_connections(struct recorder *r);

/* Sends `len` bytes on a new connection to 127.0.0.1:`port`, then reads into `answer` (`cap`
 * bytes, NUL-terminated) until the server closes the connection or `timeout_ms` passes. To
 * keep keep-alive exchanges short it also stops once a whole first response has come and
 * nothing more arrives for a quarter second. *closed is true when the server closed (end of
 * file or a reset) before it stopped reading. Returns the status of the first response, 0 when
 * none came. */
int raw_session(unsigned port, const char *bytes, size_t len, char *answer, size_t cap,
                int timeout_ms, bool *closed);

/* How many responses `answer` holds: "HTTP/1.1 " at the start of a line. */
int count_responses(const char *answer);

#endif
