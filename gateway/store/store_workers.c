/* The Redis store's threads and their queue; design in store_workers.h. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gateway/store/store_resolve.h"
#include "gateway/store/store_sentinel.h"
#include "gateway/store/store_workers.h"

/* One thread and its connection: the health spell it was opened in, the script's digest (""
 * until first loaded; the same on every Redis, so kept across connections), and what was sent
 * on it and awaits an answer, oldest first (NULL stands for a SCRIPT LOAD). */
struct worker {
    struct gw_store_workers *pool;
    pthread_t thread;
    int wake_fd;  /* an eventfd, written when calls are queued while this thread waits on Redis */
    bool polling; /* under the pool's lock: waiting on Redis (and wake_fd) */
    redisContext *c;
    struct gw_store_lookup *lookup; /* of the host's name, when it is one (store_resolve.h) */
    struct gw_store_lookup *sentinel_lookups[CONFIG_MAX_SENTINELS]; /* of theirs, likewise */
    uint64_t spell;
    char sha[41];
    struct gw_store_call *sent[GW_STORE_IN_FLIGHT];
    size_t first, n_sent;
    bool timed_out; /* the last failure was a deadline */
    char why[GW_STORE_WHY_LEN];
    char script_why[GW_STORE_WHY_LEN]; /* why the last SCRIPT LOAD failed, or "" */
};

struct gw_store_workers {
    const struct gw_store_redis *redis;
    struct gw_store_health *health;
    pthread_mutex_t lock; /* the queue and the flags below, and each worker's `polling` */
    pthread_cond_t queued;
    struct gw_store_call *head, *tail;
    bool started, stopping;
    unsigned idle;       /* threads waiting on `queued` */
    unsigned next_woken; /* where the search for a polling thread to wake starts */
    unsigned n_threads;
    struct worker workers[GW_STORE_THREADS];
};

static void set_why(struct worker *self, const char *format, ...)
{
    va_list ap;

    va_start(ap, format);
    vsnprintf(self->why, sizeof self->why, format, ap);
    va_end(ap);
}

static void set_timed_out(struct worker *self, const char *command)
{
    self->timed_out = true;
    set_why(self, "%s: no answer within limiter.redis.timeout (%lld ms)", command,
            (long long)(self->pool->redis->timeout_ns / 1000000));
}

/* Gives `call` its outcome: the store's health first (store_call.h says why), then the
 * request. */
static void finish(struct gw_store_workers *w, struct gw_store_call *call,
                   enum gw_store_result result, const char *why)
{
    uint64_t state = call->state;

    if (result == GW_STORE_OK)
        gw_store_health_succeeded(w->health, state);
    else
        gw_store_health_failed(w->health, state, why);
    gw_store_call_deliver(call, result);
}

/* Finishes every call of the list `calls` as failed, for `why`. */
static void fail_calls(struct gw_store_workers *w, struct gw_store_call *calls, const char *why)
{
    while (calls != NULL) {
        struct gw_store_call *next = calls->next;

        finish(w, calls, GW_STORE_FAILED, why);
        calls = next;
    }
}

static void drop_connection(struct worker *self)
{
    redisFree(self->c);
    self->c = NULL;
}

/* --- one command at a time, while a connection is set up ---------------------------------- */

/* Bounds the socket's next waits by the time left before `deadline`. -1 (timed out, `why`
 * said for `command`) when none is left. */
static int bound_wait(struct worker *self, int64_t deadline, const char *command)
{
    int64_t left = (deadline - limiter_now_ns()) / 1000;
    struct timeval tv;

    if (left <= 0) {
        set_timed_out(self, command);
        return -1;
    }
    tv.tv_sec = (time_t)(left / 1000000); /* never {0, 0}, which would mean no bound at all */
    tv.tv_usec = (suseconds_t)(left % 1000000);
    if (self->c != NULL && redisSetTimeout(self->c, tv) != REDIS_OK) {
        set_why(self, "%s: %s", command, self->c->errstr);
        return -1;
    }
    return 0;
}

/* Why the connection failed during `command`: the deadline, or the connection's own words.
 * Call it at once: it reads errno. */
static void connection_failed(struct worker *self, int64_t deadline, const char *command)
{
    redisContext *c = self->c;

    if ((c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) ||
        limiter_now_ns() >= deadline) /* SO_RCVTIMEO or SO_SNDTIMEO ran out */
        set_timed_out(self, command);
    else
        set_why(self, "%s: %s", command, c->err != 0 ? c->errstr : "no reply");
}

/* Writes out what is appended to the connection, by `deadline`. 0, or -1 with `why`. */
static int flush(struct worker *self, int64_t deadline, const char *command)
{
    int done = 0;

    while (!done) {
        if (bound_wait(self, deadline, command) != 0)
            return -1;
        if (redisBufferWrite(self->c, &done) != REDIS_OK) {
            connection_failed(self, deadline, command);
            return -1;
        }
    }
    return 0;
}

/* Runs `argc`/`argv` (AUTH, SELECT, SCRIPT LOAD: `name` in the log) by `deadline`, on a
 * connection with nothing else under way, and checks for an answer that is not an error. The
 * reply, or NULL with `why` in Redis's words (WRONGPASS, NOAUTH, NOPERM...) or the
 * connection's. */
static redisReply *setup_command(struct worker *self, int64_t deadline, int argc, const char **argv,
                                 const char *name)
{
    void *reply = NULL;

    if (redisAppendCommandArgv(self->c, argc, argv, NULL) != REDIS_OK) {
        set_why(self, "%s: out of memory", name);
        return NULL;
    }
    if (flush(self, deadline, name) != 0)
        return NULL;
    while (reply == NULL) {
        if (bound_wait(self, deadline, name) != 0)
            return NULL;
        if (redisBufferRead(self->c) != REDIS_OK ||
            redisGetReplyFromReader(self->c, &reply) != REDIS_OK) {
            connection_failed(self, deadline, name);
            return NULL;
        }
    }
    if (((redisReply *)reply)->type == REDIS_REPLY_ERROR) {
        set_why(self, "%s: %.200s", name, ((redisReply *)reply)->str);
        freeReplyObject(reply);
        return NULL;
    }
    return reply;
}

/* Keeps the digest SCRIPT LOAD answered with; false (with `why`) if it is none. */
static bool take_digest(struct worker *self, const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(self->sha, r->str, 41);
        self->script_why[0] = '\0';
        return true;
    }
    if (r->type == REDIS_REPLY_ERROR)
        set_why(self, "SCRIPT LOAD: %.200s", r->str);
    else
        set_why(self, "SCRIPT LOAD: an answer that is no digest");
    snprintf(self->script_why, sizeof self->script_why, "%s", self->why);
    return false;
}

/* Where to connect, by `deadline`: the master the sentinels name, or limiter.redis.address
 * (its name resolved). 0, or -1 with `why`. */
static int find_master(struct worker *self, int64_t deadline, char ip[INET6_ADDRSTRLEN + 1],
                       int *port)
{
    const struct gw_store_redis *redis = self->pool->redis;
    int rc;

    *port = redis->port;
    if (redis->n_sentinels > 0)
        rc = gw_store_sentinel_master(redis, self->sentinel_lookups, deadline, ip, port,
                                      &self->timed_out, self->why, sizeof self->why);
    else
        rc = gw_store_resolve(&self->lookup, redis->host, deadline, ip, &self->timed_out, self->why,
                              sizeof self->why);
    if (rc != 0 && self->timed_out)
        set_timed_out(self, redis->n_sentinels > 0 ? "sentinels" : "resolve");
    return rc;
}

/* Whether the connection is to a master (ROLE), which alone may be written to; a sentinel's
 * word may be a moment old. False with `why` otherwise. */
static bool is_master(struct worker *self, int64_t deadline)
{
    const char *argv[] = {"ROLE"};
    redisReply *r = setup_command(self, deadline, 1, argv, "ROLE");
    bool master = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                  r->element[0]->type == REDIS_REPLY_STRING &&
                  strcmp(r->element[0]->str, "master") == 0;

    if (r != NULL && !master)
        set_why(self, "ROLE: not the master (the sentinels are asked again on the next try)");
    freeReplyObject(r);
    return master;
}

/* A fresh connection: connected, authenticated, its database selected and the script loaded
 * (the first time), all by `deadline`. 0, or -1 with `why` (no connection kept). */
static int open_connection(struct worker *self, int64_t deadline)
{
    const struct gw_store_redis *redis = self->pool->redis;
    const char *load[] = {"SCRIPT", "LOAD", gw_script_text};
    redisReply *r = NULL;
    char db[16], ip[INET6_ADDRSTRLEN + 1];
    int64_t left;
    int port;

    self->spell = gw_store_health_spells(self->pool->health);
    if (find_master(self, deadline, ip, &port) != 0)
        return -1;
    left = (deadline - limiter_now_ns()) / 1000;
    if (left <= 0) {
        set_timed_out(self, "connect");
        return -1;
    }
    self->c = redisConnectWithTimeout(ip, port,
                                      (struct timeval){.tv_sec = (time_t)(left / 1000000),
                                                       .tv_usec = (suseconds_t)(left % 1000000)});
    if (self->c == NULL) {
        set_why(self, "connect: out of memory");
        return -1;
    }
    if (self->c->err != 0) {
        self->timed_out = limiter_now_ns() >= deadline;
        set_why(self, "connect: %s", self->c->errstr);
        goto fail;
    }
    if (redis->password != NULL) {
        const char *argv[] = {"AUTH", redis->password};

        r = setup_command(self, deadline, 2, argv, "AUTH");
        if (r == NULL)
            goto fail;
        freeReplyObject(r);
    }
    if (redis->db != 0) {
        const char *argv[] = {"SELECT", db};

        snprintf(db, sizeof db, "%u", redis->db);
        r = setup_command(self, deadline, 2, argv, "SELECT");
        if (r == NULL)
            goto fail;
        freeReplyObject(r);
    }
    if (redis->n_sentinels > 0 && !is_master(self, deadline))
        goto fail;
    if (self->sha[0] == '\0') {
        r = setup_command(self, deadline, 3, load, "SCRIPT LOAD");
        if (r == NULL || !take_digest(self, r)) {
            freeReplyObject(r);
            goto fail;
        }
        freeReplyObject(r);
    }
    return 0;
fail:
    drop_connection(self);
    return -1;
}

/* --- calls under way on the connection ------------------------------------------------------- */

static void sent_push(struct worker *self, struct gw_store_call *call)
{
    self->sent[(self->first + self->n_sent++) % GW_STORE_IN_FLIGHT] = call;
}

static struct gw_store_call *sent_pop(struct worker *self)
{
    struct gw_store_call *call = self->sent[self->first];

    self->first = (self->first + 1) % GW_STORE_IN_FLIGHT;
    self->n_sent--;
    return call;
}

/* The earliest deadline of the calls under way: the connection's every wait ends there. */
static int64_t sent_deadline(const struct worker *self)
{
    int64_t earliest = INT64_MAX;

    for (size_t i = 0; i < self->n_sent; i++) {
        const struct gw_store_call *call = self->sent[(self->first + i) % GW_STORE_IN_FLIGHT];

        if (call != NULL && call->deadline_ns < earliest)
            earliest = call->deadline_ns;
    }
    return earliest;
}

/* Puts the list `calls` (its last `last`) back at the head of the queue, for a fresh
 * connection (this thread's, if no other is first). */
static void requeue(struct gw_store_workers *w, struct gw_store_call *calls,
                    struct gw_store_call *last)
{
    pthread_mutex_lock(&w->lock);
    last->next = w->head;
    w->head = calls;
    if (w->tail == NULL)
        w->tail = last;
    pthread_mutex_unlock(&w->lock);
}

/* The connection failed (`why`): it is dropped, and every call under way on it fails, but
 * with `retry` (it broke, it did not time out) a call not tried again yet is queued again
 * with the time it has left: a kept connection that Redis closed while it was idle says
 * nothing of Redis. */
static void fail_sent(struct worker *self, bool retry)
{
    struct gw_store_call *again = NULL, *last = NULL;
    int64_t now = limiter_now_ns();

    while (self->n_sent > 0) {
        struct gw_store_call *call = sent_pop(self);

        if (call == NULL)
            continue;
        if (retry && !call->retried && call->deadline_ns > now) {
            call->retried = true;
            call->next = NULL;
            if (last != NULL)
                last->next = call;
            else
                again = call;
            last = call;
        } else {
            finish(self->pool, call, GW_STORE_FAILED, self->why);
        }
    }
    drop_connection(self);
    if (again != NULL)
        requeue(self->pool, again, last);
}

/* Appends EVALSHA for `call` and counts it as under way. -1 when memory is short. */
static int append_call(struct worker *self, struct gw_store_call *call)
{
    struct gw_script_args *args = &call->args;

    args->argv[1] = self->sha;
    if (redisAppendCommandArgv(self->c, args->argc, args->argv, NULL) != REDIS_OK) {
        set_why(self, "EVALSHA: out of memory");
        return -1;
    }
    sent_push(self, call);
    return 0;
}

/* Sends the list `calls` on the connection (opened first when there is none, or when it was
 * opened before the store last degraded), after those already under way. Calls past their
 * deadline fail at once: they waited too long for a thread. */
static void send_calls(struct worker *self, struct gw_store_call *calls)
{
    struct gw_store_workers *w = self->pool;
    struct gw_store_call *live = NULL, **tail = &live;
    int64_t now = limiter_now_ns(), earliest = INT64_MAX;

    self->timed_out = false;
    while (calls != NULL) {
        struct gw_store_call *call = calls;

        calls = call->next;
        call->next = NULL;
        if (call->deadline_ns <= now) {
            set_timed_out(self, "queued");
            finish(w, call, GW_STORE_FAILED, self->why);
            continue;
        }
        earliest = call->deadline_ns < earliest ? call->deadline_ns : earliest;
        *tail = call;
        tail = &call->next;
    }
    if (live == NULL)
        return;
    if (self->n_sent == 0 &&
        (self->c == NULL || self->spell != gw_store_health_spells(w->health))) {
        drop_connection(self);
        if (open_connection(self, earliest) != 0) {
            fail_calls(w, live, self->why);
            return;
        }
    }
    for (struct gw_store_call *call = live, *next; call != NULL; call = next) {
        next = call->next;
        if (append_call(self, call) != 0) {
            fail_calls(w, call, self->why);
            break;
        }
    }
    if (flush(self, sent_deadline(self), "EVALSHA") != 0)
        fail_sent(self, !self->timed_out);
}

/* Redis's answer `r` to the oldest call under way, `call`: finishes it, or, when Redis had
 * lost the script (it restarted) and the call was not sent again yet, keeps it in `again`. */
static void take_answer(struct worker *self, struct gw_store_call *call, const redisReply *r,
                        struct gw_store_call **again, size_t *n_again)
{
    struct gw_store_workers *w = self->pool;
    bool noscript = r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;

    if (noscript && !call->resent) {
        call->resent = true;
        again[(*n_again)++] = call;
    } else if (noscript && self->script_why[0] != '\0') {
        finish(w, call, GW_STORE_FAILED, self->script_why);
    } else if (r->type == REDIS_REPLY_ERROR) { /* WRONGTYPE, NOPERM, OOM: the connection is fine */
        set_why(self, "EVALSHA: %.200s", r->str);
        finish(w, call, GW_STORE_FAILED, self->why);
    } else if (gw_script_answer(r, &call->args, call->answer) != 0) {
        set_why(self, "EVALSHA: an answer of the wrong shape");
        finish(w, call, GW_STORE_FAILED, self->why);
    } else {
        finish(w, call, GW_STORE_OK, NULL);
    }
}

/* Sends the calls Redis answered NOSCRIPT once more, after loading the script, within the
 * time they have left. */
static void send_again(struct worker *self, struct gw_store_call **again, size_t n_again)
{
    const char *load[] = {"SCRIPT", "LOAD", gw_script_text};

    if (self->n_sent + 1 + n_again > GW_STORE_IN_FLIGHT ||
        redisAppendCommandArgv(self->c, 3, load, NULL) != REDIS_OK) {
        set_why(self, "SCRIPT LOAD: out of memory");
        for (size_t i = 0; i < n_again; i++)
            finish(self->pool, again[i], GW_STORE_FAILED, self->why);
        return;
    }
    sent_push(self, NULL);
    for (size_t i = 0; i < n_again; i++)
        if (append_call(self, again[i]) != 0)
            finish(self->pool, again[i], GW_STORE_FAILED, self->why);
    if (flush(self, sent_deadline(self), "EVALSHA") != 0)
        fail_sent(self, !self->timed_out);
}

/* Reads what Redis has sent and finishes the calls it answers, in order. */
static void read_answers(struct worker *self)
{
    struct gw_store_call *again[GW_STORE_IN_FLIGHT];
    size_t n_again = 0;
    int64_t deadline = sent_deadline(self);

    if (redisBufferRead(self->c) != REDIS_OK) {
        connection_failed(self, deadline, "EVALSHA");
        fail_sent(self, !self->timed_out);
        return;
    }
    for (;;) {
        void *reply = NULL;
        struct gw_store_call *call;

        if (redisGetReplyFromReader(self->c, &reply) != REDIS_OK) {
            set_why(self, "EVALSHA: %s", self->c->errstr);
            fail_sent(self, false);
            return;
        }
        if (reply == NULL)
            break;
        if (self->n_sent == 0) {
            freeReplyObject(reply);
            set_why(self, "EVALSHA: an answer to nothing asked");
            fail_sent(self, false);
            return;
        }
        call = sent_pop(self);
        if (call == NULL)
            take_digest(self, reply); /* the calls sent after it say whether it failed */
        else
            take_answer(self, call, reply, again, &n_again);
        freeReplyObject(reply);
    }
    if (n_again > 0)
        send_again(self, again, n_again);
}

/* Waits for Redis's next answers, until the earliest deadline of the calls under way, and
 * takes them; or, when calls are queued meanwhile (wake_fd), returns to send them. A deadline
 * that passes fails every call under way and drops the connection: Redis is slow. */
static void await_answers(struct worker *self)
{
    struct gw_store_workers *w = self->pool;
    struct pollfd fds[2] = {{.fd = self->c->fd, .events = POLLIN},
                            {.fd = self->wake_fd, .events = POLLIN}};
    int64_t deadline = sent_deadline(self), left = deadline - limiter_now_ns();
    struct timespec wait;
    bool queued;
    int ready;

    pthread_mutex_lock(&w->lock);
    queued = w->head != NULL && self->n_sent < GW_STORE_IN_FLIGHT - 1; /* and room for them */
    self->polling = !queued;
    pthread_mutex_unlock(&w->lock);
    left = queued || left < 0 ? 0 : left; /* queued: only look, then go and send them */
    wait.tv_sec = (time_t)(left / 1000000000);
    wait.tv_nsec = (long)(left % 1000000000);
    ready = ppoll(fds, 2, &wait, NULL);
    pthread_mutex_lock(&w->lock);
    self->polling = false;
    pthread_mutex_unlock(&w->lock);
    if (ready > 0 && (fds[1].revents & POLLIN)) {
        uint64_t count;
        ssize_t got = read(self->wake_fd, &count, sizeof count); /* resets it */

        (void)got; /* EAGAIN: nothing was left to reset */
    }
    self->timed_out = false;
    if (ready > 0 && fds[0].revents != 0) {
        read_answers(self);
    } else if (limiter_now_ns() >= deadline) {
        set_timed_out(self, "EVALSHA");
        fail_sent(self, false);
    }
}

/* --- the threads --------------------------------------------------------------------------- */

/* Takes the queued calls this thread can send (as a list), waiting for some while it has none
 * under way. NULL when there are none; with none under way, that means it is to stop. */
static struct gw_store_call *take_calls(struct worker *self)
{
    struct gw_store_workers *w = self->pool;
    struct gw_store_call *calls, *last = NULL;
    size_t room = GW_STORE_IN_FLIGHT - 1 - self->n_sent; /* one for a SCRIPT LOAD */

    pthread_mutex_lock(&w->lock);
    while (self->n_sent == 0 && w->head == NULL && !w->stopping) {
        w->idle++;
        pthread_cond_wait(&w->queued, &w->lock);
        w->idle--;
    }
    calls = w->head;
    for (size_t n = 0; w->head != NULL && n < room; n++) {
        last = w->head;
        w->head = w->head->next;
    }
    if (last != NULL)
        last->next = NULL;
    if (w->head == NULL)
        w->tail = NULL;
    else if (w->idle > 0)
        pthread_cond_signal(&w->queued); /* more than this thread takes */
    pthread_mutex_unlock(&w->lock);
    return last != NULL ? calls : NULL;
}

static void *serve(void *arg)
{
    struct worker *self = arg;

    for (;;) {
        struct gw_store_call *calls = take_calls(self);

        if (calls == NULL && self->n_sent == 0)
            break;
        if (calls != NULL)
            send_calls(self, calls);
        if (self->n_sent > 0)
            await_answers(self);
    }
    drop_connection(self);
    gw_store_lookup_end(self->lookup);
    for (size_t i = 0; i < CONFIG_MAX_SENTINELS; i++)
        gw_store_lookup_end(self->sentinel_lookups[i]);
    return NULL;
}

/* Under the lock: tells a thread of calls queued. An idle one takes them; else one waiting on
 * Redis is woken to send them on its connection at once (the others look at the queue
 * whenever Redis answers them). */
static void wake_thread(struct gw_store_workers *w)
{
    const uint64_t one = 1;

    if (w->idle > 0) {
        pthread_cond_signal(&w->queued);
        return;
    }
    for (unsigned i = 0; i < w->n_threads; i++) {
        struct worker *t = &w->workers[(w->next_woken + i) % w->n_threads];

        if (t->polling) {
            t->polling = false; /* once is enough */
            if (write(t->wake_fd, &one, sizeof one) < 0)
                continue;
            w->next_woken = (w->next_woken + i + 1) % w->n_threads;
            return;
        }
    }
}

struct gw_store_workers *gw_store_workers_new(const struct gw_store_redis *redis,
                                              struct gw_store_health *health)
{
    struct gw_store_workers *w = calloc(1, sizeof *w);

    if (w == NULL)
        return NULL;
    w->redis = redis;
    w->health = health;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->queued, NULL);
    for (unsigned i = 0; i < GW_STORE_THREADS; i++) {
        w->workers[i].pool = w;
        w->workers[i].wake_fd = -1;
    }
    return w;
}

/* Under the lock: the threads, started once. */
static void start_threads(struct gw_store_workers *w)
{
    w->started = true;
    while (w->n_threads < GW_STORE_THREADS) {
        struct worker *t = &w->workers[w->n_threads];

        t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (t->wake_fd < 0 || pthread_create(&t->thread, NULL, serve, t) != 0)
            break;
        w->n_threads++;
    }
}

int gw_store_workers_queue(struct gw_store_workers *w, struct gw_store_call *call)
{
    int rc = -1;

    call->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (!w->started && !w->stopping)
        start_threads(w);
    if (!w->stopping && w->n_threads > 0) {
        if (w->tail != NULL)
            w->tail->next = call;
        else
            w->head = call;
        w->tail = call;
        wake_thread(w);
        rc = 0;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void gw_store_workers_stop(struct gw_store_workers *w)
{
    unsigned n;

    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    n = w->n_threads;
    pthread_cond_broadcast(&w->queued);
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < n; i++)
        pthread_join(w->workers[i].thread, NULL);
    pthread_mutex_lock(&w->lock);
    w->n_threads = 0;
    pthread_mutex_unlock(&w->lock);
}

void gw_store_workers_free(struct gw_store_workers *w)
{
    if (w == NULL)
        return;
    gw_store_workers_stop(w);
    for (unsigned i = 0; i < GW_STORE_THREADS; i++)
        if (w->workers[i].wake_fd >= 0)
            close(w->workers[i].wake_fd);
    pthread_cond_destroy(&w->queued);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
