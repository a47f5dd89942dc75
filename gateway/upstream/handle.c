/* One upstream handle's life: made with its easy and multi handles, the sockets of the
 * connections it holds tracked (so that a stale one is seen before a request goes out on it),
 * and freed with its connection. The struct itself is in handle.h. */
#include <curl/curl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/upstream/handle.h"
#include "gateway/upstream/proxy.h"

void gw_upstream_free(struct gw_upstream *u)
{
    gw_upstream_finish(u);
    /* Its idle connection closes with the multi handle. */
    curl_multi_cleanup(u->multi);
    curl_easy_cleanup(u->easy);
    free(u->head);
    free(u->body);
    free(u);
}

/* Stops tracking the handle's socket `i`: closed by libcurl with close_socket() (its watch
 * dropped first), or (`closed`) already closed without it, when its number, perhaps another
 * thread's by now, is not touched (the kernel took it out of a loop's epoll set). */
static void untrack_socket(struct gw_upstream *u, size_t i, bool closed)
{
    if (u->watches[i] != NULL && closed)
        gw_upstream_free_watch(u->loop, u->watches[i]);
    else if (u->watches[i] != NULL)
        gw_upstream_drop_watch(u, u->watches[i]);
    u->n_sockets--;
    u->sockets[i] = u->sockets[u->n_sockets];
    u->watches[i] = u->watches[u->n_sockets];
}

/* libcurl's sockets for this handle's connections are opened and closed here, so that
 * gw_upstream_start() can look at them before a request goes out on one. A number the kernel
 * hands out again was closed behind close_socket()'s back (gw_upstream_finish()). */
static curl_socket_t open_socket(void *cls, curlsocktype purpose, struct curl_sockaddr *address)
{
    struct gw_upstream *u = cls;
    curl_socket_t fd;

    (void)purpose;
    fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd == CURL_SOCKET_BAD)
        return fd;
    for (size_t i = 0; i < u->n_sockets; i++)
        if (u->sockets[i] == fd) {
            untrack_socket(u, i, true);
            break;
        }
    if (u->n_sockets == TRACKED_SOCKETS) {
        close(fd);
        return CURL_SOCKET_BAD;
    }
    u->sockets[u->n_sockets] = fd;
    u->watches[u->n_sockets++] = NULL; /* on a loop, on_socket() gives it one */
    return fd;
}

static int close_socket(void *cls, curl_socket_t fd)
{
    struct gw_upstream *u = cls;

    for (size_t i = 0; i < u->n_sockets; i++)
        if (u->sockets[i] == fd) {
            untrack_socket(u, i, false);
            break;
        }
    return close(fd);
}

CURLM *gw_upstream_new_multi(struct gw_upstream *u)
{
    CURLM *multi = curl_multi_init();

    if (multi == NULL)
        return NULL;
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 1L);
    if (u->loop != NULL)
        gw_upstream_loop_watch_multi(multi, u);
    return multi;
}

struct gw_upstream *gw_upstream_new(struct gw_upstream_loop *loop, struct upstream_pool *pool)
{
    struct gw_upstream *u = calloc(1, sizeof *u);

    if (u == NULL)
        return NULL;
    u->pool = pool;
    u->loop = loop;
    u->timer_ns = -1;
    u->easy = curl_easy_init();
    u->multi = gw_upstream_new_multi(u);
    if (u->easy == NULL || u->multi == NULL) {
        gw_upstream_free(u);
        return NULL;
    }
    curl_easy_setopt(u->easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(u->easy, CURLOPT_OPENSOCKETDATA, u);
    curl_easy_setopt(u->easy, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
    curl_easy_setopt(u->easy, CURLOPT_CLOSESOCKETDATA, u);
    gw_upstream_set_handle_options(u);
    return u;
}

/* libcurl checks an idle connection only after about a second. On a loop, the loop's epoll
 * set has told already (struct watch). */
bool gw_upstream_holds_stale(const struct gw_upstream *u)
{
    struct pollfd fds[TRACKED_SOCKETS];

    if (u->loop != NULL)
        return u->stale;
    for (size_t i = 0; i < u->n_sockets; i++)
        fds[i] = (struct pollfd){.fd = u->sockets[i], .events = POLLIN};
    return u->n_sockets > 0 && poll(fds, u->n_sockets, 0) > 0;
}

/* The socket of the connection libcurl keeps for the next exchange, or CURL_SOCKET_BAD: asked
 * before the transfer is taken out of the multi (libcurl forgets it then). With
 * CURLMOPT_MAXCONNECTS 1 a handle keeps at most that one, and only after a transfer that
 * ended: one taken out before its end has its connection closed. */
static curl_socket_t kept_socket(struct gw_upstream *u)
{
    curl_socket_t fd = CURL_SOCKET_BAD;
    bool ended = u->done;
    CURLMsg *msg;
    int queued;

    while ((msg = curl_multi_info_read(u->multi, &queued)) != NULL)
        ended = ended || msg->msg == CURLMSG_DONE;
    if (!ended || curl_easy_getinfo(u->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK)
        fd = CURL_SOCKET_BAD;
    return fd;
}

/* After an exchange the handle tracks only the socket libcurl kept (`kept`). libcurl closes
 * some sockets without calling close_socket(): 7.88 closes a connection still being made
 * (a client gone before the upstream's connect completed) with plain close(). Their numbers
 * may already be another thread's, so they are forgotten without being touched: the kernel
 * took them out of a loop's epoll set as they closed. (Tracking them on would fill the
 * handle's table, after which open_socket() refuses every connect, which libcurl reports as
 * "Couldn't connect to server" in 0 ms, a healthy server's failure.) */
static void forget_closed_sockets(struct gw_upstream *u, curl_socket_t kept)
{
    for (size_t i = u->n_sockets; i-- > 0;)
        if (u->sockets[i] != kept)
            untrack_socket(u, i, true);
}

void gw_upstream_detach(struct gw_upstream *u)
{
    curl_socket_t kept = kept_socket(u);

    curl_multi_remove_handle(u->multi, u->easy);
    forget_closed_sockets(u, kept);
}
