/*
 * handle: the insides of an upstream handle (struct gw_upstream), of the pools that keep the
 * idle ones and of the event loops that drive them, for the files that implement proxy.h and
 * no others: nothing outside gateway/upstream includes it, and the rest of the folder, like
 * everyone else, goes by proxy.h. proxy.h has the design, and says which file holds which
 * part of it.
 *
 * A handle is touched by one thread at a time: its request's while it blocks, or its loop's.
 * A pool set is shared by the threads that take from it, under its lock.
 */
#ifndef SLUICE_GATEWAY_UPSTREAM_HANDLE_H
#define SLUICE_GATEWAY_UPSTREAM_HANDLE_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/upstream/proxy.h"

#define BODY_BUFFER (64 * 1024)
/* A handle keeps one upstream connection (CURLMOPT_MAXCONNECTS 1); while a dead one is being
 * replaced, two are open for a moment. */
#define TRACKED_SOCKETS 4

struct upstream_pool;
struct pool_set;
struct watch;

struct gw_upstream {
    CURL *easy;
    CURLM *multi;
    struct upstream_pool *pool;      /* where it goes back to */
    struct gw_upstream_loop *loop;   /* the event loop it runs on, or NULL: it blocks */
    struct gw_upstream *prev, *next; /* in its loop's list of running exchanges */
    gw_upstream_notify *notify;      /* told of each step, on a loop */
    void *notify_cls;
    unsigned progress, told;  /* steps taken (head, body bytes, end), and those told of */
    int64_t timer_ns;         /* when libcurl wants to be called on a loop; -1: never */
    int64_t wait_deadline_ns; /* when a wait for the head or more body gives up; 0: none */
    bool timed_out, running;
    int64_t idle_since_ns;                  /* when it went back, for pruning */
    curl_socket_t sockets[TRACKED_SOCKETS]; /* the connections it holds open */
    struct watch *watches[TRACKED_SOCKETS]; /* on a loop: where each is watched, or NULL */
    size_t n_sockets;
    bool stale;    /* on a loop: a connection it holds was readable while no request was out */
    bool attached; /* easy is in multi */
    bool done;
    CURLcode result;
    unsigned sends, max_sends;    /* requests sent in this exchange, and how many may be */
    struct gw_body *request_body; /* the exchange's (gw_forward), or NULL */
    bool send_paused;             /* libcurl waits for more of it */

    enum gw_fault fault;              /* the last exchange's, until the next starts */
    char error_text[CURL_ERROR_SIZE]; /* libcurl's words for it (CURLOPT_ERRORBUFFER) */

    long status;
    bool head_done, head_too_large;
    char *head; /* "name\0value\0" pairs of the final response head */
    size_t head_len, head_cap;
    size_t head_wire; /* the final response head's size as sent on */

    char *body; /* BODY_BUFFER bytes, allocated at the first body byte and not zeroed, so that
                   memory is touched only as far as answers reach */
    size_t body_len, body_off;
    bool paused;
    int64_t timeout_ns;
    uint64_t max_head;
};

/* The idle handles for one origin (scheme://host:port, with the forward proxy if any), least
 * recently used first. */
struct upstream_pool {
    char *origin;
    struct gw_upstream **idle;
    size_t n_idle, cap;
    struct upstream_pool *next;
};

/* The pools of handles that block (thread_per_connection), or of one event loop's. */
struct pool_set {
    pthread_mutex_t lock; /* held for a push, a pop or a prune */
    struct upstream_pool *pools;
};

/* Where one of a loop's upstream sockets is watched: the tag its epoll events carry, from the
 * socket's first use to its close. Between exchanges the socket stays in the epoll set, for
 * input, so that a stray answer or a close marks the handle stale as it comes, without a
 * poll() before each request. Tags are kept for the loop's life and reused, so an event
 * already fetched for a socket that has since gone finds a tag with no owner, never freed
 * memory. */
struct watch {
    struct gw_upstream *owner; /* NULL while unused */
    curl_socket_t fd;
    uint32_t events; /* what the epoll set has for it; 0: not in it */
    bool wanted;     /* libcurl is waiting on it for a transfer */
    bool foreign;    /* not one of the handle's connections (libcurl's resolver's, say) */
    struct watch *next_free;
};

#define WATCH_BLOCK 64

struct watch_block {
    struct watch watches[WATCH_BLOCK];
    struct watch_block *next;
};

struct gw_upstream_loop {
    int epoll_fd;
    struct pool_set pools;
    struct gw_upstream *running; /* exchanges in progress, for their timers */
    struct watch *free_watches;
    struct watch_block *blocks;
    bool told;           /* an exchange's notify was called since gw_upstream_loop_told() */
    int64_t earliest_ns; /* no running exchange has a timer or deadline before this */
};

/* --- pool.c ------------------------------------------------------------------------------ */

/* server.upstream_idle_timeout, as gw_proxy_configure() last set it. */
int64_t gw_upstream_idle_timeout_ns(void);

/* Frees every idle handle in `loop`'s pools (NULL: the blocking handles'), and the pools. */
void gw_upstream_pools_free(struct gw_upstream_loop *loop);

/* --- handle.c ---------------------------------------------------------------------------- */

/* A new handle for `pool`, on `loop` (NULL: it blocks), with no connection yet; NULL when
 * memory is short. Freed with gw_upstream_free(), which closes its connection. */
struct gw_upstream *gw_upstream_new(struct gw_upstream_loop *loop, struct upstream_pool *pool);
void gw_upstream_free(struct gw_upstream *u);

/* A multi handle for `u` that keeps one connection (on a loop, reporting to it); NULL when
 * memory is short. The caller owns it (curl_multi_cleanup()). */
CURLM *gw_upstream_new_multi(struct gw_upstream *u);

/* True when a connection `u` holds has something to read (bytes or EOF) while no request is
 * outstanding on it: a stray answer that would be taken for the next request's, or a close. */
bool gw_upstream_holds_stale(const struct gw_upstream *u);

/* Takes the transfer out of its multi handle; `u` then tracks only the socket libcurl kept. */
void gw_upstream_detach(struct gw_upstream *u);

/* --- transfer.c -------------------------------------------------------------------------- */

/* What every exchange of a handle shares, set once when the handle is made. */
void gw_upstream_set_handle_options(struct gw_upstream *u);

/* What differs from one exchange to the next: `fw`'s method, URL, fields, body, timeouts. */
void gw_upstream_set_request_options(struct gw_upstream *u, const struct gw_forward *fw);

/* --- exchange.c -------------------------------------------------------------------------- */

/* Reads the transfer's end, if it came, and tells the request of any step taken. */
void gw_upstream_collect(struct gw_upstream *u);

/* --- loop.c ------------------------------------------------------------------------------ */

/* Has `multi` report `u`'s sockets into its loop's epoll set and its timer to the loop. */
void gw_upstream_loop_watch_multi(CURLM *multi, struct gw_upstream *u);

/* Keeps the loop's earliest time no later than `at` (nothing for a handle without a loop). */
void gw_upstream_wake_loop_by(struct gw_upstream *u, int64_t at);

/* Adds `u` to its loop's running exchanges, or takes it out (if it is in). */
void gw_upstream_link_running(struct gw_upstream *u);
void gw_upstream_unlink_running(struct gw_upstream *u);

/* The watch's tag goes back to the loop's free ones (its socket is out of the epoll set). */
void gw_upstream_free_watch(struct gw_upstream_loop *loop, struct watch *w);

/* The socket's watch goes with the socket (closing it): out of the epoll set, then freed. */
void gw_upstream_drop_watch(struct gw_upstream *u, struct watch *w);

#endif
