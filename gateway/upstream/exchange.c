/* One exchange's steps, as proxy.h gives them: start, feed the request body, wait for the
 * head, read the body, finish; and the small loop a handle without an event loop blocks on
 * (curl_multi_poll) until the step it waits for has come. */
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "gateway/upstream/handle.h"
#include "gateway/upstream/proxy.h"
#include "limiter/limiter.h"

#define POLL_SLICE_MS 200 /* longest single wait, so an abort is seen promptly */

void gw_upstream_collect(struct gw_upstream *u)
{
    CURLMsg *msg;
    int queued;

    while ((msg = curl_multi_info_read(u->multi, &queued)) != NULL)
        if (msg->msg == CURLMSG_DONE) {
            u->done = true;
            u->result = msg->data.result;
            u->progress++;
        }
    if (u->progress != u->told) {
        u->told = u->progress;
        u->wait_deadline_ns = 0;
        if (u->notify != NULL) {
            u->loop->told = true;
            u->notify(u->notify_cls);
        }
    }
}

static bool head_ready(const struct gw_upstream *u)
{
    return u->head_done;
}

static bool body_ready(const struct gw_upstream *u)
{
    return u->body_off < u->body_len;
}

/* Runs the transfer until `ready` holds, it ends, or `deadline` passes. Returns 0, or -1 on
 * the deadline or an abort. */
static int drive(struct gw_upstream *u, bool (*ready)(const struct gw_upstream *), int64_t deadline)
{
    while (!ready(u) && !u->done) {
        int running;
        int64_t left_ms;

        curl_multi_perform(u->multi, &running);
        gw_upstream_collect(u);
        if (ready(u) || u->done)
            break;
        /* never wake before the deadline */
        left_ms = (deadline - limiter_now_ns() + 999999) / 1000000;
        if (left_ms <= 0 || gw_proxy_aborting())
            return -1;
        curl_multi_poll(u->multi, NULL, 0, left_ms < POLL_SLICE_MS ? (int)left_ms : POLL_SLICE_MS,
                        NULL);
    }
    return 0;
}

/* Sets the exchange's fault, with our words for it where libcurl has none. */
static void fail_with(struct gw_upstream *u, enum gw_fault fault, const char *ours)
{
    u->fault = fault;
    if (ours != NULL || u->error_text[0] == '\0')
        snprintf(u->error_text, sizeof u->error_text, "%s",
                 ours != NULL ? ours : curl_easy_strerror(u->result));
}

enum gw_fault gw_upstream_fault(const struct gw_upstream *u, const char **text)
{
    *text = u->error_text;
    return u->fault;
}

enum gw_upstream_error gw_upstream_start(struct gw_upstream *u, const struct gw_forward *fw,
                                         gw_upstream_notify *notify, void *cls)
{
    gw_upstream_finish(u);
    /* A stray answer on the connection would be taken for this request's. */
    if (gw_upstream_holds_stale(u)) {
        CURLM *fresh = gw_upstream_new_multi(u);

        if (fresh == NULL)
            return GW_UPSTREAM_OTHER;
        curl_multi_cleanup(u->multi); /* closes the connection; the next one is new */
        u->multi = fresh;
        u->stale = false;
    }
    gw_upstream_set_request_options(u, fw);
    u->request_body = fw->body;
    u->fault = GW_FAULT_NONE;
    u->error_text[0] = '\0';
    u->timeout_ns = fw->timeout_ns;
    u->max_head = fw->max_head;
    if (curl_multi_add_handle(u->multi, u->easy) != CURLM_OK) {
        fail_with(u, GW_FAULT_OTHER, "the transfer could not be started");
        return GW_UPSTREAM_OTHER;
    }
    u->attached = true;
    /* The wait for the head starts once the body has gone; a long upload is not a slow
     * upstream (gw_upstream_feed() bounds each wait for it to take more). */
    if (fw->body == NULL || fw->body->ended) {
        u->wait_deadline_ns = limiter_now_ns() + fw->timeout_ns;
        gw_upstream_wake_loop_by(u, u->wait_deadline_ns);
    }
    if (u->loop != NULL) {
        u->notify = notify;
        u->notify_cls = cls;
        gw_upstream_link_running(u);
        gw_upstream_wake_loop_by(u, u->timer_ns); /* a timer libcurl may not announce again */
    }
    return GW_UPSTREAM_OK;
}

/* Sets the fault of an exchange that ended, or gave up waiting (`waited_for` says for what),
 * without a response head, and ends it. */
static enum gw_upstream_error no_head(struct gw_upstream *u, const char *waited_for)
{
    if (u->timed_out)
        fail_with(u, GW_FAULT_TIMEOUT, waited_for);
    else if (u->head_too_large)
        fail_with(u, GW_FAULT_TOO_LARGE, "the response head is over max_response_header_size");
    else if (u->result == CURLE_OK)
        fail_with(u, GW_FAULT_OTHER, "the transfer ended without a response head");
    else
        fail_with(u, gw_fault_of(u->result), NULL);
    gw_upstream_finish(u);
    return gw_fault_error(u->fault);
}

/* The wait that is starting gives up `timeout` from now, unless one is running already. */
static void arm_wait(struct gw_upstream *u)
{
    if (u->wait_deadline_ns == 0)
        u->wait_deadline_ns = limiter_now_ns() + u->timeout_ns;
    gw_upstream_wake_loop_by(u, u->wait_deadline_ns);
}

/* Whether the upstream takes no more of the request body: it answered (libcurl stops sending
 * on a status of 300 or more), or the exchange ended. */
static bool body_refused(const struct gw_upstream *u)
{
    return u->done || u->timed_out || (u->head_done && u->status >= 300);
}

static bool takes_body(const struct gw_upstream *u)
{
    return body_refused(u) || gw_body_room(u->request_body) > 0 || u->request_body->ended;
}

enum gw_upstream_error gw_upstream_feed(struct gw_upstream *u, bool more)
{
    int running;

    if (u->send_paused && !u->done) {
        u->send_paused = false;
        /* The answer's side stays paused if its buffer is full (gw_upstream_read()). */
        curl_easy_pause(u->easy, u->paused ? CURLPAUSE_RECV : CURLPAUSE_CONT);
    }
    if (u->loop == NULL && !u->done) {
        curl_multi_perform(u->multi, &running); /* sends what it can now, waits for nothing */
        gw_upstream_collect(u);
    }
    for (;;) {
        if (u->head_done && body_refused(u))
            return GW_UPSTREAM_ANSWERED;
        if (u->done || u->timed_out)
            return no_head(u, "the upstream took no more of the body within the route's timeout");
        if (!more || takes_body(u))
            return GW_UPSTREAM_OK;
        if (u->loop != NULL) {
            arm_wait(u); /* the loop tells when bytes have gone, or the wait ended */
            return GW_UPSTREAM_PENDING;
        }
        if (drive(u, takes_body, limiter_now_ns() + u->timeout_ns) != 0)
            u->timed_out = true;
    }
}

enum gw_upstream_error gw_upstream_head(struct gw_upstream *u)
{
    if (u->loop == NULL && !u->timed_out) {
        arm_wait(u);
        if (drive(u, head_ready, u->wait_deadline_ns) != 0)
            u->timed_out = true;
    }
    if (u->head_done)
        return GW_UPSTREAM_OK;
    if (!u->done && !u->timed_out) {
        arm_wait(u);
        return GW_UPSTREAM_PENDING;
    }
    return no_head(u, "no response head within the route's timeout");
}

long gw_upstream_status(const struct gw_upstream *u)
{
    return u->status;
}

int64_t gw_upstream_content_length(const struct gw_upstream *u)
{
    curl_off_t length = -1;

    if (curl_easy_getinfo(u->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) != CURLE_OK)
        return -1;
    return length;
}

const char *gw_upstream_fields(const struct gw_upstream *u, size_t *len)
{
    *len = u->head_len;
    return u->head;
}

bool gw_upstream_whole_body(const struct gw_upstream *u, const char **body, size_t *len)
{
    if (!u->done || u->result != CURLE_OK || u->paused)
        return false;
    *body = u->body + u->body_off;
    *len = u->body_len - u->body_off;
    return true;
}

ssize_t gw_upstream_read(struct gw_upstream *u, char *buf, size_t max)
{
    size_t n;

    if (!body_ready(u) && u->paused) {
        u->paused = false;
        u->body_off = u->body_len = 0;
        /* May deliver into the buffer at once; the request body's side stays as it was. */
        curl_easy_pause(u->easy, u->send_paused ? CURLPAUSE_SEND : CURLPAUSE_CONT);
    }
    if (!body_ready(u) && !u->done && !u->timed_out) {
        if (u->loop != NULL) {
            arm_wait(u); /* the loop tells of the next bytes, or of this wait's end */
            return GW_UPSTREAM_WOULD_BLOCK;
        }
        if (drive(u, body_ready, limiter_now_ns() + u->timeout_ns) != 0) {
            fail_with(u, GW_FAULT_TIMEOUT, "no more of the body within the route's timeout");
            return -1;
        }
    }
    if (!body_ready(u)) {
        if (u->done && u->result == CURLE_OK)
            return 0;
        if (u->timed_out)
            fail_with(u, GW_FAULT_TIMEOUT, "no more of the body within the route's timeout");
        else
            fail_with(u, GW_FAULT_CUT, NULL); /* whatever libcurl says cut it short */
        return -1;
    }
    n = u->body_len - u->body_off;
    if (n > max)
        n = max;
    memcpy(buf, u->body + u->body_off, n);
    u->body_off += n;
    return (ssize_t)n;
}

void gw_upstream_finish(struct gw_upstream *u)
{
    if (u->loop != NULL)
        gw_upstream_unlink_running(u);
    if (u->attached)
        gw_upstream_detach(u);
    u->attached = false;
    u->notify = NULL;
    u->request_body = NULL;
    u->send_paused = false;
    /* timer_ns stays: libcurl announces a timer only when it changes, and the next transfer
     * may start with the one last announced. */
    u->wait_deadline_ns = 0;
    u->timed_out = false;
    u->done = false;
    u->result = CURLE_OK;
    u->status = 0;
    u->head_done = u->head_too_large = false;
    u->head_len = 0;
    u->body_len = u->body_off = 0;
    u->paused = false;
}
