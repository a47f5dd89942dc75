/* The error log, and the queues and writer threads of both logs; design in log.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "gateway/common/log.h"
#include "gateway/common/respond.h"

#define ACCESS_QUEUE_BYTES (256 * 1024)
#define ERROR_QUEUE_BYTES  (64 * 1024)
#define MAX_SINKS          8
#define SINK_IDLE_NS       1000000000LL /* a file's duplicate is closed after this long unused */
/* Once woken, a writer lets lines gather this long before it writes: under load a wake-up
 * (a futex call for the queuing thread and a context switch) serves a batch, not a line. */
#define GATHER_NS 1000000

/* A file the queue writes to. stdin, stdout and stderr are never closed by sluice and are used
 * as they are; any other file's fd belongs to a runtime that closes it when its last request
 * ends, possibly before the writer reaches its lines (and the number may then name another
 * file, or a client's socket). So the queue keeps a duplicate, found again by the file's
 * identity, not by the fd number. */
struct sink {
    bool used;
    bool owned; /* fd is the queue's duplicate */
    uint32_t dev_major, dev_minor;
    uint64_t ino;
    int fd;
    unsigned queued;  /* lines queued or being written */
    uint64_t created; /* the queue's sink count when made: the highest is the current file */
    int64_t last_used_ns;
};

struct line {
    struct line *next;
    unsigned sink; /* index in the queue's sinks */
    size_t len;
    char text[];
};

enum queue_state { NOT_STARTED, RUNNING, STOPPING, STOPPED };

struct queue {
    size_t capacity;
    pthread_mutex_t lock;   /* guards everything below but `dropped`; never held in write() */
    pthread_cond_t wake;    /* lines queued, or stopping */
    pthread_cond_t drained; /* nothing queued and nothing being written */
    enum queue_state state;
    struct line *head, **tail;
    size_t bytes; /* of text queued or being written */
    bool writing;
    bool waiting; /* the writer sleeps on `wake`: only then is it signalled */
    struct sink sinks[MAX_SINKS];
    uint64_t sinks_made;
    pthread_t writer;
    _Atomic uint64_t dropped;
    char batch[PIPE_BUF]; /* the writer's: a cancelled writer leaves nothing to free */
};

/* A batch always takes at least one line. */
_Static_assert(GW_LOG_LINE_MAX <= PIPE_BUF, "a line must fit a batch");

static struct queue queues[GW_N_LOG_STREAMS] = {
    [GW_LOG_ERROR] = {.capacity = ERROR_QUEUE_BYTES, .lock = PTHREAD_MUTEX_INITIALIZER},
    [GW_LOG_ACCESS] = {.capacity = ACCESS_QUEUE_BYTES, .lock = PTHREAD_MUTEX_INITIALIZER},
};

static int64_t monotonic_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static struct timespec deadline_at(int64_t ns)
{
    return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
}

/* All of `len` bytes, or false. */
static bool write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

/* The identity of the file open at `fd`. AT_STATX_DONT_SYNC: the cached attributes, so that a
 * file on a hung network mount cannot block the caller here either. fstat() where statx() is
 * missing (Linux before 4.11) or filtered out (an old container seccomp profile). */
static int identify(int fd, struct statx *id)
{
    struct stat st;

    if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_INO, id) == 0)
        return 0;
    if ((errno != ENOSYS && errno != EPERM) || fstat(fd, &st) != 0)
        return -1;
    id->stx_ino = st.st_ino;
    id->stx_dev_major = major(st.st_dev);
    id->stx_dev_minor = minor(st.st_dev);
    return 0;
}

/* The sink of the file open at `fd` (identified as `id` when fd > 2), made if new; -1 when
 * there is no room or no fd for it. Queue locked. */
static int sink_of(struct queue *q, int fd, const struct statx *id, int64_t now_ns)
{
    int free_slot = -1;

    for (int i = 0; i < MAX_SINKS; i++) {
        struct sink *k = &q->sinks[i];

        if (!k->used) {
            free_slot = free_slot < 0 ? i : free_slot;
            continue;
        }
        if (fd <= STDERR_FILENO
                ? !k->owned && k->fd == fd
                : k->owned && k->ino == id->stx_ino && k->dev_major == id->stx_dev_major &&
                      k->dev_minor == id->stx_dev_minor) {
            k->last_used_ns = now_ns;
            return i;
        }
    }
    if (free_slot < 0)
        return -1;
    q->sinks[free_slot] =
        (struct sink){.used = true, .fd = fd, .created = ++q->sinks_made, .last_used_ns = now_ns};
    if (fd > STDERR_FILENO) {
        q->sinks[free_slot].owned = true;
        q->sinks[free_slot].ino = id->stx_ino;
        q->sinks[free_slot].dev_major = id->stx_dev_major;
        q->sinks[free_slot].dev_minor = id->stx_dev_minor;
        q->sinks[free_slot].fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (q->sinks[free_slot].fd < 0) {
            q->sinks[free_slot].used = false;
            return -1;
        }
    }
    return free_slot;
}

/* Lets go of the duplicates of files left behind (by a reload that moved the access log,
 * say): nothing queued for them for a while, and a newer file in use. Queue locked. Their fds
 * are added to `doomed` (MAX_SINKS long), to be closed once the lock is released: a close()
 * can block (NFS), and request threads wait for the lock. */
static void close_idle_sinks(struct queue *q, int64_t now_ns, int *doomed, int *n_doomed)
{
    uint64_t newest = 0;

    for (int i = 0; i < MAX_SINKS; i++)
        if (q->sinks[i].used && q->sinks[i].created > newest)
            newest = q->sinks[i].created;
    for (int i = 0; i < MAX_SINKS; i++) {
        struct sink *k = &q->sinks[i];

        if (k->used && k->owned && k->queued == 0 && k->created != newest &&
            now_ns - k->last_used_ns >= SINK_IDLE_NS) {
            doomed[(*n_doomed)++] = k->fd;
            k->used = false;
        }
    }
}

void gw_log_line(enum gw_log_stream stream, int fd, const char *text, size_t len)
{
    struct queue *q = &queues[stream];
    struct statx id;
    struct line *line;
    int sink;

    if (fd < 0 || len == 0)
        return;
    /* Both before the lock: it guards the queue, not the system calls. */
    if (fd > STDERR_FILENO && identify(fd, &id) != 0)
        goto dropped;
    line = len <= GW_LOG_LINE_MAX ? malloc(sizeof *line + len) : NULL;
    if (line == NULL)
        goto dropped;
    line->next = NULL;
    line->len = len;
    memcpy(line->text, text, len);

    pthread_mutex_lock(&q->lock);
    if (q->state == NOT_STARTED) {
        pthread_mutex_unlock(&q->lock);
        free(line);
        if (!write_all(fd, text, len))
            atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
        return;
    }
    sink = q->state == RUNNING && q->bytes + len <= q->capacity
               ? sink_of(q, fd, &id, monotonic_ns())
               : -1;
    if (sink < 0) {
        pthread_mutex_unlock(&q->lock);
        free(line);
        goto dropped;
    }
    line->sink = (unsigned)sink;
    q->sinks[sink].queued++;
    q->bytes += len;
    *q->tail = line;
    q->tail = &line->next;
    if (q->waiting)
        pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->lock);
    return;

dropped:
    atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
}

/* close_idle_sinks(), with the closes made while the lock is released. Queue locked. */
static void let_go_idle_sinks(struct queue *q)
{
    int doomed[MAX_SINKS], n = 0;

    close_idle_sinks(q, monotonic_ns(), doomed, &n);
    if (n == 0)
        return;
    pthread_mutex_unlock(&q->lock);
    while (n > 0)
        close(doomed[--n]);
    pthread_mutex_lock(&q->lock);
}

/* The writer: takes whole lines for one file off the queue, up to PIPE_BUF bytes, and writes
 * them with the lock released. Cancellation is off except inside that write(), so a stop that
 * cannot wait cancels it there, never with the lock held. */
static void *drain_queue(void *arg)
{
    struct queue *q = arg;

    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_mutex_lock(&q->lock);
    for (;;) {
        size_t len = 0;
        unsigned n = 0, sink;
        int fd;
        bool ok;

        bool slept = false;

        while (q->head == NULL && q->state == RUNNING) {
            struct timespec wake_at = deadline_at(monotonic_ns() + SINK_IDLE_NS);

            q->waiting = slept = true;
            pthread_cond_timedwait(&q->wake, &q->lock, &wake_at);
            q->waiting = false;
            let_go_idle_sinks(q);
        }
        if (slept && q->head != NULL && q->state == RUNNING) {
            /* Not on the stack: a writer cancelled in write() leaves its frame's ASan
             * redzones behind, which a local here moved onto what the thread's exit uses. */
            static const struct timespec gather = {0, GATHER_NS};

            pthread_mutex_unlock(&q->lock);
            nanosleep(&gather, NULL);
            pthread_mutex_lock(&q->lock);
        }
        if (q->head == NULL)
            break; /* stopping, and all written */
        sink = q->head->sink;
        while (q->head != NULL && q->head->sink == sink && len + q->head->len <= sizeof q->batch) {
            struct line *line = q->head;

            memcpy(q->batch + len, line->text, line->len);
            len += line->len;
            n++;
            q->head = line->next;
            if (q->head == NULL)
                q->tail = &q->head;
            free(line);
        }
        fd = q->sinks[sink].fd;
        q->writing = true;
        pthread_mutex_unlock(&q->lock);

        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
        ok = write_all(fd, q->batch, len);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);

        pthread_mutex_lock(&q->lock);
        q->writing = false;
        q->bytes -= len;
        q->sinks[sink].queued -= n;
        if (!ok)
            atomic_fetch_add_explicit(&q->dropped, n, memory_order_relaxed);
        if (q->head == NULL)
            pthread_cond_broadcast(&q->drained);
        let_go_idle_sinks(q);
    }
    pthread_cond_broadcast(&q->drained);
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

int gw_log_start(void)
{
    pthread_condattr_t monotonic;
    int rc = 0;

    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    for (int s = 0; s < GW_N_LOG_STREAMS; s++) {
        struct queue *q = &queues[s];

        pthread_mutex_lock(&q->lock);
        if (q->state == NOT_STARTED || q->state == STOPPED) {
            pthread_cond_init(&q->wake, &monotonic);
            pthread_cond_init(&q->drained, &monotonic);
            q->head = NULL;
            q->tail = &q->head;
            q->bytes = 0;
            q->state = RUNNING;
            if (pthread_create(&q->writer, NULL, drain_queue, q) != 0) {
                pthread_cond_destroy(&q->wake);
                pthread_cond_destroy(&q->drained);
                q->state = NOT_STARTED;
                rc = -1;
            }
        }
        pthread_mutex_unlock(&q->lock);
    }
    pthread_condattr_destroy(&monotonic);
    return rc;
}

/* Joins `writer`, waiting a moment for a cancelled one to unwind; false if it did not. */
static bool joined(pthread_t writer)
{
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline); /* pthread_timedjoin_np's clock */
    deadline.tv_nsec += 200 * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    return pthread_timedjoin_np(writer, NULL, &deadline) == 0;
}

void gw_log_stop(int64_t timeout_ns)
{
    struct timespec deadline = deadline_at(monotonic_ns() + timeout_ns);

    for (int s = 0; s < GW_N_LOG_STREAMS; s++) {
        pthread_mutex_lock(&queues[s].lock);
        if (queues[s].state == RUNNING) {
            queues[s].state = STOPPING;
            pthread_cond_signal(&queues[s].wake);
        }
        pthread_mutex_unlock(&queues[s].lock);
    }
    for (int s = 0; s < GW_N_LOG_STREAMS; s++) {
        struct queue *q = &queues[s];
        bool drained;

        pthread_mutex_lock(&q->lock);
        if (q->state != STOPPING) {
            pthread_mutex_unlock(&q->lock);
            continue;
        }
        while ((q->head != NULL || q->writing) &&
               pthread_cond_timedwait(&q->drained, &q->lock, &deadline) == 0)
            ;
        drained = q->head == NULL && !q->writing;
        pthread_mutex_unlock(&q->lock);
        if (!drained)
            pthread_cancel(q->writer); /* its reader stopped reading: give up on it */
        /* One that cannot even be cancelled (a write to a hung NFS mount sleeps
         * uninterruptibly) is left as it is, queue and all, still STOPPING: the process is
         * about to exit anyway. */
        if (!joined(q->writer))
            continue;

        pthread_mutex_lock(&q->lock);
        while (q->head != NULL) {
            struct line *line = q->head;

            q->head = line->next;
            atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
            free(line);
        }
        q->tail = &q->head;
        q->bytes = 0;
        q->writing = false;
        for (int i = 0; i < MAX_SINKS; i++) {
            if (q->sinks[i].used && q->sinks[i].owned)
                close(q->sinks[i].fd);
            q->sinks[i] = (struct sink){0};
        }
        pthread_cond_destroy(&q->wake);
        pthread_cond_destroy(&q->drained);
        q->state = STOPPED;
        pthread_mutex_unlock(&q->lock);
    }
}

uint64_t gw_log_dropped(enum gw_log_stream stream)
{
    return atomic_load_explicit(&queues[stream].dropped, memory_order_relaxed);
}

bool gw_log_limit_pass(struct gw_log_limit *limit, int64_t now_ns, int64_t interval_ns,
                       uint64_t *suppressed)
{
    int64_t next = atomic_load_explicit(&limit->next_ns, memory_order_relaxed);

    if (now_ns < next ||
        !atomic_compare_exchange_strong(&limit->next_ns, &next, now_ns + interval_ns)) {
        atomic_fetch_add_explicit(&limit->suppressed, 1, memory_order_relaxed);
        return false;
    }
    *suppressed = atomic_exchange(&limit->suppressed, 0);
    return true;
}

static _Atomic int log_format = CONFIG_LOG_TEXT;
static _Atomic int log_level = CONFIG_LOG_INFO;

void gw_log_configure(enum config_log_format format, enum config_log_level level)
{
    atomic_store_explicit(&log_format, (int)format, memory_order_relaxed);
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

bool gw_log_enabled(enum config_log_level level)
{
    return (int)level >= atomic_load_explicit(&log_level, memory_order_relaxed);
}

/* Writes `text` into `out` (`cap` bytes, cut short rather than overflow) with its control
 * characters as \n, \r, \t or \xNN, so that it stays on one line; returns the length. */
static size_t escape_text(char *out, size_t cap, const char *text)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = 0;

    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++) {
        char piece[4] = {(char)*c};
        size_t n = 1;

        if (*c < 0x20 || *c == 0x7f) {
            piece[0] = '\\';
            piece[1] = *c == '\n' ? 'n' : *c == '\r' ? 'r' : *c == '\t' ? 't' : 'x';
            n = 2;
            if (piece[1] == 'x') {
                piece[2] = hex[*c >> 4];
                piece[3] = hex[*c & 15];
                n = 4;
            }
        }
        if (len + n > cap)
            break;
        memcpy(out + len, piece, n);
        len += n;
    }
    return len;
}

void gw_log(enum config_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    char message[2048], line[4096], stamp[32];
    bool json = atomic_load_explicit(&log_format, memory_order_relaxed) == CONFIG_LOG_JSON;
    struct timespec now;
    struct tm tm;
    size_t len;
    va_list ap;

    if (!gw_log_enabled(level))
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    len = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + len, sizeof stamp - len, ".%03ldZ", now.tv_nsec / 1000000);
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    /* The message, escaped, leaves room for what ends the line: at most `"}` and '\n'. */
    if (json) {
        len = (size_t)snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"",
                               stamp, names[level]);
        len += gw_json_escape(line + len, sizeof line - len - 3, message, SIZE_MAX);
        line[len++] = '"';
        line[len++] = '}';
    } else {
        len = (size_t)snprintf(line, sizeof line, "%s %s ", stamp, names[level]);
        len += escape_text(line + len, sizeof line - len - 1, message);
    }
    line[len++] = '\n';
    gw_log_line(GW_LOG_ERROR, STDERR_FILENO, line, len);
}
