/* The Redis store's threads and their queue; design in store_workers.h. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_workers.h"

/* One thread: its connection, the health spell it was opened in, and the script's digest as
 * this connection's Redis knows it ("" until loaded). */
struct worker {
    struct gw_store_workers *pool;
    pthread_t thread;
    redisContext *c;
    uint64_t spell;
    char sha[41];
};

struct gw_store_workers {
    const struct gw_store_redis *redis;
    struct gw_store_health *health;
    pthread_mutex_t lock; /* the queue and the flags below */
    pthread_cond_t queued;
    struct gw_store_call *head, *tail;
    bool started, stopping;
    unsigned n_threads;
    struct worker workers[GW_STORE_THREADS];
};

/* The calls one thread sends together, each still open (unanswered) or not, and why the last
 * failure happened. */
struct batch {
    struct gw_store_call *calls[GW_STORE_BATCH];
    bool open[GW_STORE_BATCH];
    size_t n;
    int64_t deadline_ns; /* the earliest of theirs */
    bool timed_out;      /* the last failure was the deadline */
    char why[GW_STORE_WHY_LEN];
};

static void set_why(struct batch *b, const char *format, ...)
{
    va_list ap;

    va_start(ap, format);
    vsnprintf(b->why, sizeof b->why, format, ap);
    va_end(ap);
}

static long long timeout_ms(const struct gw_store_workers *w)
{
    return (long long)(w->redis->timeout_ns / 1000000);
}

/* Gives `call` its outcome: the store's health first (store_call.h says why), then the
 * request. A call whose waiter gave up is only freed. */
static void finish(struct gw_store_workers *w, struct gw_store_call *call,
                   enum gw_store_result result, const char *why)
{
    uint64_t state = call->state;

    if (!gw_store_call_claim(call))
        return;
    if (result == GW_STORE_OK)
        gw_store_health_succeeded(w->health, state);
    else
        gw_store_health_failed(w->health, state, why);
    gw_store_call_deliver(call, result);
}

static void drop_connection(struct worker *self)
{
    redisFree(self->c);
    self->c = NULL;
}

/* Bounds the socket's next waits by the time left before the batch's deadline. -1 (the
 * batch timed out, `why` said for `command`) when none is left. */
static int bound_wait(struct worker *self, struct batch *b, const char *command)
{
    int64_t left = b->deadline_ns - limiter_now_ns();
    struct timeval tv;

    if (left <= 0) {
        b->timed_out = true;
        set_why(b, "%s: no answer within limiter.redis.timeout (%lld ms)", command,
                timeout_ms(self->pool));
        return -1;
    }
    left = left / 1000 > 0 ? left / 1000 : 1; /* {0, 0} would mean no bound at all */
    tv.tv_sec = (time_t)(left / 1000000);
    tv.tv_usec = (suseconds_t)(left % 1000000);
    if (self->c != NULL && redisSetTimeout(self->c, tv) != REDIS_OK) {
        set_why(b, "%s: %s", command, self->c->errstr);
        return -1;
    }
    return 0;
}

/* Why the connection failed during `command`: the deadline, or the connection's own words.
 * Call it at once: it reads errno. */
static void connection_failed(struct worker *self, struct batch *b, const char *command)
{
    redisContext *c = self->c;

    if ((c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) ||
        limiter_now_ns() >= b->deadline_ns) { /* SO_RCVTIMEO or SO_SNDTIMEO ran out */
        b->timed_out = true;
        set_why(b, "%s: no answer within limiter.redis.timeout (%lld ms)", command,
                timeout_ms(self->pool));
    } else {
        set_why(b, "%s: %s", command, c->err != 0 ? c->errstr : "no reply");
    }
}

/* Writes out what is appended to the connection. 0, or -1 with `why`. */
static int flush(struct worker *self, struct batch *b, const char *command)
{
    int done = 0;

    while (!done) {
        if (bound_wait(self, b, command) != 0)
            return -1;
        if (redisBufferWrite(self->c, &done) != REDIS_OK) {
            connection_failed(self, b, command);
            return -1;
        }
    }
    return 0;
}

/* The next reply on the connection, each read bounded by the time left. NULL with `why`. */
static redisReply *next_reply(struct worker *self, struct batch *b, const char *command)
{
    void *reply = NULL;

    if (redisGetReplyFromReader(self->c, &reply) != REDIS_OK) {
        connection_failed(self, b, command);
        return NULL;
    }
    while (reply == NULL) {
        if (bound_wait(self, b, command) != 0)
            return NULL;
        if (redisBufferRead(self->c) != REDIS_OK ||
            redisGetReplyFromReader(self->c, &reply) != REDIS_OK) {
            connection_failed(self, b, command);
            return NULL;
        }
    }
    return reply;
}

/* Runs `argc`/`argv` (AUTH, SELECT, SCRIPT LOAD: `name` in the log) within the batch's time,
 * and checks for an answer that is not an error. The reply, or NULL with `why` in Redis's
 * words (WRONGPASS, NOAUTH, NOPERM...) or the connection's (which is then broken). */
static redisReply *setup_command(struct worker *self, struct batch *b, int argc, const char **argv,
                                 const char *name)
{
    redisReply *r = NULL;

    if (redisAppendCommandArgv(self->c, argc, argv, NULL) != REDIS_OK) {
        set_why(b, "%s: out of memory", name);
        return NULL;
    }
    if (flush(self, b, name) == 0)
        r = next_reply(self, b, name);
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        set_why(b, "%s: %.200s", name, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* A fresh connection for the worker: connected, authenticated, its database selected, all
 * within the batch's time. 0, or -1 with `why` (no connection kept). */
static int open_connection(struct worker *self, struct batch *b)
{
    const struct gw_store_redis *redis = self->pool->redis;
    struct timeval tv;
    redisReply *r = NULL;
    int64_t left;
    char db[16];

    self->spell = gw_store_health_spells(self->pool->health);
    if (bound_wait(self, b, "connect") != 0)
        return -1;
    left = (b->deadline_ns - limiter_now_ns()) / 1000;
    left = left > 0 ? left : 1;
    tv.tv_sec = (time_t)(left / 1000000);
    tv.tv_usec = (suseconds_t)(left % 1000000);
    self->c = redisConnectWithTimeout(redis->host, redis->port, tv);
    if (self->c == NULL) {
        set_why(b, "connect: out of memory");
        return -1;
    }
    if (self->c->err != 0) {
        b->timed_out = limiter_now_ns() >= b->deadline_ns;
        set_why(b, "connect: %s", self->c->errstr);
        goto fail;
    }
    if (redis->password != NULL) {
        const char *argv[] = {"AUTH", redis->password};

        r = setup_command(self, b, 2, argv, "AUTH");
        if (r == NULL)
            goto fail;
        freeReplyObject(r);
    }
    if (redis->db != 0) {
        const char *argv[] = {"SELECT", db};

        snprintf(db, sizeof db, "%u", redis->db);
        r = setup_command(self, b, 2, argv, "SELECT");
        if (r == NULL)
            goto fail;
        freeReplyObject(r);
    }
    return 0;
fail:
    drop_connection(self);
    return -1;
}

/* Loads the script into Redis (it forgets it on restart) and keeps its digest. 0, or -1
 * with `why`. */
static int load_script(struct worker *self, struct batch *b)
{
    const char *argv[] = {"SCRIPT", "LOAD", gw_script_text};
    redisReply *r = setup_command(self, b, 3, argv, "SCRIPT LOAD");
    int rc = -1;

    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(self->sha, r->str, 41);
        rc = 0;
    } else {
        set_why(b, "SCRIPT LOAD: an answer that is no digest");
    }
    freeReplyObject(r);
    return rc;
}

/* Reads Redis's answer to one call: finishes it, or leaves it open when Redis had lost the
 * script (`*noscript` set). */
static void take_answer(struct worker *self, struct batch *b, size_t i, redisReply *r,
                        bool *noscript)
{
    struct gw_store_call *call = b->calls[i];

    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        *noscript = true;
        return;
    }
    b->open[i] = false;
    if (r->type == REDIS_REPLY_ERROR) { /* WRONGTYPE, NOPERM, OOM...: the connection is fine */
        set_why(b, "EVALSHA: %.200s", r->str);
        finish(self->pool, call, GW_STORE_FAILED, b->why);
    } else if (gw_script_answer(r, &call->args, call->answer) != 0) {
        set_why(b, "EVALSHA: an answer of the wrong shape");
        finish(self->pool, call, GW_STORE_FAILED, b->why);
    } else {
        finish(self->pool, call, GW_STORE_OK, NULL);
    }
}

/* Sends the batch's open calls as one pipeline and reads their answers in order. 0 when
 * every answer was read (`*noscript` when some asked for the script: they are still open);
 * -1 when the connection failed (`why`; the calls not yet answered are still open). */
static int exchange(struct worker *self, struct batch *b, bool *noscript)
{
    *noscript = false;
    for (size_t i = 0; i < b->n; i++) {
        struct gw_script_args *args = &b->calls[i]->args;

        if (!b->open[i])
            continue;
        args->argv[1] = self->sha;
        if (redisAppendCommandArgv(self->c, args->argc, args->argv, NULL) != REDIS_OK) {
            set_why(b, "EVALSHA: out of memory");
            return -1;
        }
    }
    if (flush(self, b, "EVALSHA") != 0)
        return -1;
    for (size_t i = 0; i < b->n; i++) {
        redisReply *r;

        if (!b->open[i])
            continue;
        r = next_reply(self, b, "EVALSHA");
        if (r == NULL)
            return -1;
        take_answer(self, b, i, r, noscript);
        freeReplyObject(r);
    }
    return 0;
}

/* Runs a batch to the end: every call in it is finished when this returns. */
static void run_batch(struct worker *self, struct batch *b)
{
    bool retried = false, noscript = false;

    for (int round = 0; round < 4; round++) {
        bool reused = self->c != NULL && self->spell == gw_store_health_spells(self->pool->health);

        if (!reused) {
            drop_connection(self);
            if (open_connection(self, b) != 0)
                break;
        }
        if (self->sha[0] == '\0' && load_script(self, b) != 0) {
            if (self->c->err != 0)
                drop_connection(self);
            break;
        }
        if (exchange(self, b, &noscript) == 0) {
            if (!noscript)
                break;
            self->sha[0] = '\0'; /* Redis restarted: load it and send those again */
            continue;
        }
        drop_connection(self);
        /* A kept connection that failed at once was most likely closed while idle: one more
         * try on a fresh one, in the time left. A timeout is Redis's slowness: not again. */
        if (!reused || retried || b->timed_out)
            break;
        retried = true;
    }
    if (noscript && b->why[0] == '\0')
        set_why(b, "EVALSHA: NOSCRIPT after the script was loaded");
    for (size_t i = 0; i < b->n; i++)
        if (b->open[i])
            finish(self->pool, b->calls[i], GW_STORE_FAILED, b->why);
}

/* Takes up to GW_STORE_BATCH queued calls into `b`, waiting while there are none; finishes
 * those already past their deadline. False when stopping and nothing is left. */
static bool take_batch(struct gw_store_workers *w, struct batch *b)
{
    struct gw_store_call *calls = NULL, *last = NULL;
    int64_t now;

    pthread_mutex_lock(&w->lock);
    while (w->head == NULL && !w->stopping)
        pthread_cond_wait(&w->queued, &w->lock);
    calls = w->head;
    for (size_t n = 0; w->head != NULL && n < GW_STORE_BATCH; n++) {
        last = w->head;
        w->head = w->head->next;
    }
    if (last != NULL)
        last->next = NULL;
    if (w->head == NULL)
        w->tail = NULL;
    else
        pthread_cond_signal(&w->queued); /* more for another thread */
    pthread_mutex_unlock(&w->lock);
    if (calls == NULL)
        return false;

    b->n = 0;
    b->timed_out = false;
    b->why[0] = '\0';
    now = limiter_now_ns();
    while (calls != NULL) {
        struct gw_store_call *call = calls;

        calls = call->next;
        if (call->deadline_ns <= now) {
            set_why(b, "no thread free within limiter.redis.timeout (%lld ms)", timeout_ms(w));
            finish(w, call, GW_STORE_FAILED, b->why);
            continue;
        }
        if (b->n == 0 || call->deadline_ns < b->deadline_ns)
            b->deadline_ns = call->deadline_ns;
        b->open[b->n] = true;
        b->calls[b->n++] = call;
    }
    b->why[0] = '\0';
    return true;
}

static void *serve(void *arg)
{
    struct worker *self = arg;
    struct batch *b = malloc(sizeof *b);

    /* Without its batch a thread cannot work; the others take the queue. */
    while (b != NULL && take_batch(self->pool, b))
        if (b->n > 0)
            run_batch(self, b);
    drop_connection(self);
    free(b);
    return NULL;
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
    for (unsigned i = 0; i < GW_STORE_THREADS; i++)
        w->workers[i].pool = w;
    return w;
}

/* Under the lock: the threads, started once. */
static void start_threads(struct gw_store_workers *w)
{
    w->started = true;
    while (w->n_threads < GW_STORE_THREADS && pthread_create(&w->workers[w->n_threads].thread, NULL,
                                                             serve, &w->workers[w->n_threads]) == 0)
        w->n_threads++;
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
        pthread_cond_signal(&w->queued);
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
    w->n_threads = 0;
    pthread_cond_broadcast(&w->queued);
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < n; i++)
        pthread_join(w->workers[i].thread, NULL);
}

void gw_store_workers_free(struct gw_store_workers *w)
{
    if (w == NULL)
        return;
    gw_store_workers_stop(w);
    pthread_cond_destroy(&w->queued);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
