/* A request between libmicrohttpd and the phases; design in request.h. */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gateway/common/log.h"
#include "gateway/core/pipeline.h"
#include "gateway/front/head.h"
#include "gateway/front/loop.h"
#include "gateway/front/offload.h"
#include "gateway/front/request.h"
#include "gateway/front/sleeper.h"
#include "gateway/front/wire.h"

#define RESPONSE_BLOCK (32 * 1024)

/* The adapter's part of a request: its context in the pipeline (gw_http_module). */
struct http_ctx {
    struct gw_offload_job job; /* event mode: a step's blocking work off the loop */
    void (*job_fn)(struct gw_req *rq);
    struct gw_req *rq;
    const struct gw_head *head;    /* the connection's strict reading (head.h) */
    uint32_t index;                /* this request's place on its connection, from 0 */
    struct gw_loop *loop;          /* the event loop it runs on, or NULL */
    struct gw_offload *offload;    /* with a loop: where blocking work goes */
    struct gw_sleeper *sleeper;    /* where it waits for an instant */
    enum gw_woken *woken;          /* while it waits there: where to say why it goes on */
    struct MHD_Connection *client; /* for suspending and resuming it */
    bool started;
    bool suspended; /* event mode: set aside until a step may go on */
    bool sem_ready;
    sem_t resumed; /* thread_per_connection: the connection's thread waits on it */
};

static void http_free(struct gw_req *rq, void *ctx)
{
    struct http_ctx *h = ctx;

    (void)rq;
    if (h->sem_ready)
        sem_destroy(&h->resumed);
}

struct gw_module gw_http_module = {
    .name = "http",
    .ctx_size = sizeof(struct http_ctx),
    .on_free = http_free,
};

/* struct gw_request is this adapter's name for the request it drives. */
static struct gw_req *core(struct gw_request *r)
{
    return (struct gw_req *)(void *)r;
}

static struct http_ctx *http_of(const struct gw_req *rq)
{
    return gw_req_ctx(rq, &gw_http_module);
}

/* --- waiting: suspended on a loop, or the connection's thread blocked ------------------- */

static void io_suspend(struct gw_req *rq)
{
    struct http_ctx *h = http_of(rq);

    if (h->loop != NULL) {
        h->suspended = true;
        MHD_suspend_connection(h->client);
    } else if (!h->sem_ready) {
        h->sem_ready = sem_init(&h->resumed, 0, 0) == 0;
    }
}

static void io_resume(struct gw_req *rq, bool other_thread)
{
    struct http_ctx *h = http_of(rq);
    struct gw_loop *loop = h->loop;

    if (loop == NULL) {
        if (h->sem_ready)
            sem_post(&h->resumed);
        return;
    }
    if (!h->suspended)
        return;
    /* Once resumed, the loop may finish the request and free it before this thread goes on:
     * nothing of it is read after the resumption. */
    h->suspended = false;
    MHD_resume_connection(h->client);
    if (other_thread)
        gw_loop_wake(loop); /* libmicrohttpd tells only its own threads of a resumption */
}

static void run_job(struct gw_offload_job *job)
{
    struct http_ctx *h = (struct http_ctx *)job; /* the job is its first member */

    h->job_fn(h->rq);
    gw_req_hand_back(h->rq);
}

static void io_aside(struct gw_req *rq, void (*job)(struct gw_req *rq))
{
    struct http_ctx *h = http_of(rq);

    io_suspend(rq);
    if (h->loop == NULL) {
        job(rq);
        io_resume(rq, false);
        return;
    }
    h->job_fn = job;
    h->rq = rq;
    h->job.run = run_job;
    gw_offload_queue(h->offload, &h->job);
}

/* On the sleeper's thread: its instant came, or its client left. */
static void woke(void *arg, enum gw_woken why)
{
    struct gw_req *rq = arg;

    *http_of(rq)->woken = why;
    gw_req_hand_back(rq);
}

static int io_sleep(struct gw_req *rq, int64_t until_ns, enum gw_woken *why)
{
    struct http_ctx *h = http_of(rq);
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(h->client, MHD_CONNECTION_INFO_CONNECTION_FD);

    if (fd == NULL || h->sleeper == NULL)
        return -1;
    h->woken = why;
    io_suspend(rq);
    if (gw_sleeper_add(h->sleeper, fd->connect_fd, until_ns, woke, rq) != 0)
        woke(rq, GW_WOKEN_REFUSED); /* goes on at once, as a step that waited does */
    return 0;
}

static bool io_quiet(const struct gw_req *rq)
{
    const struct http_ctx *h = http_of(rq);

    return h->head->heads == h->index + 1 && h->head->held == 0 && h->head->fault == 0;
}

static const struct gw_req_io io = {
    .suspend = io_suspend,
    .resume = io_resume,
    .aside = io_aside,
    .quiet = io_quiet,
    .sleep = io_sleep,
};

/* Runs `stage` until it does not wait, or, on a loop, until it does (the connection is set
 * aside then, and libmicrohttpd calls again once it is resumed). */
static enum gw_step run(struct gw_req *rq, enum gw_step (*stage)(struct gw_req *rq))
{
    struct http_ctx *h = http_of(rq);
    enum gw_step step;

    while ((step = stage(rq)) == GW_WAIT && h->loop == NULL)
        while (sem_wait(&h->resumed) != 0 && errno == EINTR)
            ;
    return step;
}

/* --- answers ----------------------------------------------------------------------------- */

static ssize_t read_answer(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct gw_req *rq = cls;
    ssize_t n = rq->answer.read(rq, pos, buf, max);

    if (n == GW_READ_END) {
        gw_req_answer_whole(rq);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n == GW_READ_ERROR)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    /* A body of known length ends with its last byte: libmicrohttpd asks no more. */
    if (n > 0 && rq->answer.length >= 0 && pos + (uint64_t)n >= (uint64_t)rq->answer.length)
        gw_req_answer_whole(rq);
    return n; /* GW_READ_WAIT is 0: the connection is set aside */
}

static void on_upgraded(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra_in,
                        size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh);

static struct MHD_Response *response_of(struct gw_req *rq)
{
    struct gw_answer *a = &rq->answer;
    struct MHD_Response *response = NULL;

    switch (a->kind) {
    case GW_ANSWER_STATIC:
        return MHD_create_response_from_buffer(a->body_len, (void *)a->body,
                                               MHD_RESPMEM_PERSISTENT);
    case GW_ANSWER_OWNED:
        response =
            MHD_create_response_from_buffer(a->body_len, (void *)a->body, MHD_RESPMEM_MUST_FREE);
        if (response != NULL) { /* libmicrohttpd's to free now: the answer holds it no more */
            a->kind = GW_ANSWER_NONE;
            a->body = NULL;
        }
        return response;
    case GW_ANSWER_COPY:
        return MHD_create_response_from_buffer(a->body_len, (void *)a->body, MHD_RESPMEM_MUST_COPY);
    case GW_ANSWER_STREAM:
        return MHD_create_response_from_callback(a->length >= 0 ? (uint64_t)a->length
                                                                : MHD_SIZE_UNKNOWN,
                                                 RESPONSE_BLOCK, read_answer, rq, NULL);
    case GW_ANSWER_SWITCH: /* its "Connection: Upgrade" is libmicrohttpd's own */
        return MHD_create_response_for_upgrade(on_upgraded, rq);
    case GW_ANSWER_NONE:
        break;
    }
    return NULL;
}

/* Sends the request's answer: the one a module made, or its refusal's. MHD_NO (the connection
 * closed without one) when there is none, or memory is short. */
static enum MHD_Result answer(struct gw_req *rq, struct MHD_Connection *c)
{
    struct gw_answer *a = &rq->answer;
    struct MHD_Response *response;
    enum MHD_Result ret;

    if (a->kind == GW_ANSWER_NONE && (rq->refusal == 0 || gw_pipeline_refusal(rq) != 0))
        return MHD_NO;
    response = response_of(rq);
    if (response == NULL)
        return MHD_NO;
    for (size_t i = 0; i < a->fields.n; i++)
        MHD_add_response_header(response, a->fields.at[i].name, a->fields.at[i].value);
    ret = MHD_queue_response(c, a->status, response);
    rq->status = a->status;
    MHD_destroy_response(response);
    if (a->kind != GW_ANSWER_STREAM && a->kind != GW_ANSWER_SWITCH)
        gw_req_answer_whole(rq); /* the whole body is libmicrohttpd's now */
    return ret;
}

/* --- the request's life -------------------------------------------------------------------- */

struct gw_request *gw_request_new(struct gw_runtime *runtime, const char *raw_uri,
                                  const struct gw_head *head, struct gw_access_memo *memo,
                                  uint32_t index, struct gw_loop *loop, struct gw_offload *offload,
                                  struct gw_sleeper *sleeper, struct gw_tunnels *tunnels)
{
    struct gw_req_spec spec = {
        .runtime = runtime,
        .io = &io,
        .upstream_loop = loop != NULL ? gw_loop_upstream(loop) : NULL,
        .tunnels = tunnels,
        .memo = memo,
        .target = raw_uri,
    };
    struct gw_req *rq;
    struct http_ctx *h;

    rq = gw_req_new(&spec);
    if (rq == NULL)
        return NULL;
    h = http_of(rq);
    h->head = head;
    h->index = index;
    h->loop = loop;
    h->offload = offload;
    h->sleeper = sleeper;
    return (struct gw_request *)(void *)rq;
}

static enum MHD_Result add_field(void *cls, enum MHD_ValueKind kind, const char *name,
                                 const char *value)
{
    (void)kind;
    return gw_fields_add(cls, name, value) == 0 ? MHD_YES : MHD_NO;
}

/* Refuses the request when sluice's own reading of the connection (head.h) refused it, or
 * did not see it where libmicrohttpd did: its head (or, with `whole`, its body too) should
 * have been read by now. */
static void refuse_misread(struct gw_req *rq, bool whole)
{
    const struct http_ctx *h = http_of(rq);
    const struct gw_head *head = h->head;

    if (head->fault != 0 && head->fault_at == h->index)
        gw_req_refuse(rq, head->fault, head->reason);
    else if ((whole ? head->messages : head->heads) <= h->index)
        gw_req_refuse(rq, 400, "the request was read two ways; it is refused rather than guessed");
}

/* The head's phases have run (or wait). Answering before the body makes libmicrohttpd close
 * the connection after the answer (unless the body is empty); worth it only to avoid reading
 * a body that goes nowhere. Otherwise the answer comes at the final call, where a 429 or 404
 * keeps the connection open. */
static enum MHD_Result after_head(struct gw_req *rq, struct MHD_Connection *c, enum gw_step step)
{
    if (step == GW_ANSWERED && rq->has_body && !rq->empty_body)
        return answer(rq, c);
    return MHD_YES;
}

/* The first call: the head is in. */
static enum MHD_Result begin(struct gw_req *rq, struct MHD_Connection *c, const char *method,
                             const char *version)
{
    const union MHD_ConnectionInfo *addr =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

    rq->has_peer = gw_addr_from_sockaddr(addr ? addr->client_addr : NULL, &rq->peer) == 0;
    rq->tls = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION) != NULL;
    if (rq->tls && rq->memo != NULL && rq->memo->tls[0] == '\0') { /* once a connection */
        const union MHD_ConnectionInfo *tls =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_PROTOCOL);
        const char *name = tls ? gnutls_protocol_get_name((gnutls_protocol_t)tls->protocol) : NULL;

        snprintf(rq->memo->tls, sizeof rq->memo->tls, "%s", name ? name : "TLS");
    }
    rq->method = method;
    rq->http11 = strcmp(version, "HTTP/1.1") == 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_field, &rq->fields);
    gw_req_begin(rq);
    refuse_misread(rq, false);
    return after_head(rq, c, run(rq, gw_pipeline_head));
}

enum MHD_Result gw_request_handle(struct gw_request *r, struct MHD_Connection *c,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size)
{
    struct gw_req *rq = core(r);
    struct http_ctx *h = http_of(rq);
    enum gw_step step;

    h->client = c;
    if (!h->started) {
        h->started = true;
        return begin(rq, c, method, version);
    }
    /* Back from a wait in the head: libmicrohttpd makes the first call again for a connection
     * suspended in it. */
    if (rq->phase < GW_PHASE_BODY)
        return after_head(rq, c, run(rq, gw_pipeline_head));
    if (*upload_data_size > 0) {
        while ((step = gw_pipeline_body(rq, upload_data, upload_data_size)) == GW_WAIT &&
               h->loop == NULL)
            while (sem_wait(&h->resumed) != 0 && errno == EINTR)
                ;
        return step == GW_ANSWERED ? MHD_NO : MHD_YES;
    }
    if (rq->refusal == 0)
        refuse_misread(rq, true);
    step = run(rq, gw_pipeline_content);
    return step == GW_WAIT ? MHD_YES : answer(rq, c);
}

bool gw_request_upgraded(const struct gw_request *r)
{
    return core((struct gw_request *)r)->status == 101;
}

bool gw_request_reading_body(const struct gw_request *r)
{
    const struct gw_req *rq = core((struct gw_request *)r);

    /* Asked right after gw_request_handle(), when the store's thread (or an upgrade's) may
     * already be handing the request back: `suspended` is read only once neither has it
     * (a request waiting on either is not in the BODY phase). */
    return rq->has_body && !rq->empty_body && rq->phase == GW_PHASE_BODY && rq->status == 0 &&
           !http_of(rq)->suspended;
}

/* A head the strict reader refused reached libmicrohttpd as a stand-in (wire.h): its log line
 * says nothing of it. */
static void finish(struct gw_req *rq)
{
    const struct http_ctx *h = http_of(rq);

    rq->stand_in = h->head->fault != 0 && !h->head->fault_in_body && h->head->fault_at == h->index;
    gw_pipeline_finish(rq);
}

void gw_request_done(struct gw_request *r)
{
    struct gw_req *rq = core(r);

    finish(rq); /* unless an upgrade finished it */
    gw_req_free(rq);
}

/* --- upgrades ------------------------------------------------------------------------------ */

struct tunnel_close {
    struct MHD_UpgradeResponseHandle *urh;
    struct gw_loop *loop;
    int tls_fd; /* a TLS client's socket; -1 for plain HTTP */
};

/* The tunnel is over: libmicrohttpd closes the client's socket (on a loop, once woken). Over
 * TLS it first passes on what the tunnel left for the client, and waits for the client's side
 * to end too, which the read side shut ends at once. */
static void tunnel_closed(void *cls)
{
    struct tunnel_close *tc = cls;

    if (tc->tls_fd >= 0)
        shutdown(tc->tls_fd, SHUT_RD);
    MHD_upgrade_action(tc->urh, MHD_UPGRADE_ACTION_CLOSE);
    if (tc->loop != NULL)
        gw_loop_wake(tc->loop);
    free(tc);
}

/* libmicrohttpd has sent the 101 and hands over the client's socket: the module that made
 * the answer takes it (a tunnel). The request is over for its client then; on a loop
 * libmicrohttpd ends it only when the tunnel closes, but a tunnel is no request, and its line
 * and figures are those of the switch. */
static void on_upgraded(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra_in,
                        size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh)
{
    struct gw_req *rq = cls;
    struct tunnel_close *tc = malloc(sizeof *tc);
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct gw_switched connection = {sock, extra_in, extra_in_size, rq->tls, tunnel_closed, tc};

    (void)req_cls;
    /* Over TLS, libmicrohttpd carries the plaintext to `sock` through the strict reader's
     * gnutls_record_recv(): it is no HTTP from here. */
    if (fd != NULL)
        gw_wire_upgraded(fd->connect_fd, sock);
    if (tc != NULL)
        *tc = (struct tunnel_close){urh, http_of(rq)->loop,
                                    rq->tls && fd != NULL ? fd->connect_fd : -1};
    else
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
    rq->answer.switched(rq, tc != NULL ? &connection : NULL);
    finish(rq);
}
