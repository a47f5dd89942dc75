/* The shared store in Redis; design in store.h. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/common/log.h"
#include "gateway/store/store.h"

#define POOL_SIZE       64
#define FIRST_BACKOFF   (100 * (int64_t)1000000)
#define LONGEST_BACKOFF (5 * (int64_t)1000000000)
#define WHY_LEN         256 /* why a call failed, as the log says it */

/* KEYS[i]: limit i's key, made in C from that limit's version and its own client key, so the
 * script needs no notion of clients; sliding_window_log keeps its sorted set at KEYS[i] ":log"
 * (store.h says why). ARGV[1]: the number of limits n; then per limit: algorithm (1
 * token_bucket, 2 gcra, 3 fixed_window, 4 sliding_window_log, 5 sliding_window_counter),
 * requests, per in microseconds, burst, and the request's cost in units (a cost of k is
 * decided as k requests at one instant, as the local limiters do: limiter.h). Returns per
 * limit: allowed (0/1), remaining, reset
 * and retry-after in milliseconds (rounded up). Writes happen only when every limit allows.
 * Times are microseconds from Redis's TIME; numbers are written with %.0f so that no
 * timestamp turns into an exponent. */
static const char script[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local function int(x) return string.format('%.0f', x) end\n"
    "local function ttl(us) return int(math.ceil(us / 1000) + 1) end\n"
    "local out, writes, all = {}, {}, true\n"
    "for i = 1, tonumber(ARGV[1]) do\n"
    "  local a = 1 + (i - 1) * 5\n"
    "  local algo, requests = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])\n"
    "  local per, burst = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])\n"
    "  local cost = tonumber(ARGV[a + 5])\n"
    "  local key = KEYS[i]\n"
    "  local allowed, remaining, reset, retry = 0, 0, 0, 0\n"
    "  if algo <= 2 then\n"
    "    local interval = math.ceil(per / requests)\n"
    "    local tolerance = burst * interval\n"
    "    local tat = tonumber(redis.call('GET', key) or '0')\n"
    "    local ahead = math.max(tat, now) + cost * interval - now\n"
    "    if ahead <= tolerance then\n"
    "      allowed, remaining, reset = 1, math.floor((tolerance - ahead) / interval), ahead\n"
    "      writes[#writes + 1] = {'SET', key, int(now + ahead), 'PX', ttl(ahead)}\n"
    "    else\n"
    "      reset, retry = math.max(tat - now, 0), ahead - tolerance\n"
    "      remaining = math.max(math.floor((tolerance - math.max(tat - now, 0)) / interval), 0)\n"
    "    end\n"
    "  elseif algo == 3 then\n"
    "    local start = now - now % per\n"
    "    local wkey = key .. ':' .. int(start)\n"
    "    local count = tonumber(redis.call('GET', wkey) or '0')\n"
    "    if count + cost <= requests then\n"
    "      allowed, remaining, reset = 1, requests - count - cost, start + per - now\n"
    "      writes[#writes + 1] = {'INCRBY', wkey, cost}\n"
    "      writes[#writes + 1] = {'PEXPIRE', wkey, ttl(per)}\n"
    "    else\n"
    "      reset, retry = start + per - now, start + per - now\n"
    "      remaining = math.max(requests - count, 0)\n"
    "    end\n"
    "  elseif algo == 4 then\n"
    "    key = key .. ':log'\n"
    "    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - per))\n"
    "    local count = redis.call('ZCARD', key)\n"
    "    if count + cost <= requests then\n"
    "      allowed, remaining, reset = 1, requests - count - cost, per\n"
    "      for j = 0, cost - 1 do\n"
    "        writes[#writes + 1] = {'ZADD', key, int(now), int(now) .. ':' .. (count + j)}\n"
    "      end\n"
    "      writes[#writes + 1] = {'PEXPIRE', key, ttl(per)}\n"
    "    else\n"
    "      local leaving = count + cost - requests - 1\n"
    "      local oldest = tonumber(redis.call('ZRANGE', key, leaving, leaving, 'WITHSCORES')[2])\n"
    "      local newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])\n"
    "      reset, retry = newest + per - now, oldest + per - now\n"
    "      remaining = math.max(requests - count, 0)\n"
    "    end\n"
    "  else\n"
    "    local start = now - now % per\n"
    "    local ckey = key .. ':' .. int(start)\n"
    "    local curr = tonumber(redis.call('GET', ckey) or '0')\n"
    "    local prev = tonumber(redis.call('GET', key .. ':' .. int(start - per)) or '0')\n"
    "    local elapsed = now - start\n"
    "    local slack = requests * per - curr * per - prev * (per - elapsed)\n"
    "    if slack > (cost - 1) * per then\n"
    "      allowed, curr, slack = 1, curr + cost, slack - cost * per\n"
    "      if slack > 0 then remaining = math.ceil(slack / per) end\n"
    "      writes[#writes + 1] = {'INCRBY', ckey, cost}\n"
    "      writes[#writes + 1] = {'PEXPIRE', ckey, ttl(2 * per)}\n"
    "    else\n"
    "      local limit = requests - (cost - 1)\n"
    "      local wait, left = -1, limit - curr\n"
    "      if curr < limit then\n"
    "        if prev < left then wait = 0 else\n"
    "          local e = math.floor(per * (prev - left) / prev) + 1\n"
    "          if e < per then wait = math.max(e - elapsed, 0) end\n"
    "        end\n"
    "      end\n"
    "      if wait < 0 then\n"
    "        wait = per - elapsed\n"
    "        if curr >= limit then wait = wait + math.floor(per * (curr - limit) / curr) + 1 end\n"
    "      end\n"
    "      retry = wait\n"
    "      if slack > 0 then remaining = math.ceil(slack / per) end\n"
    "    end\n"
    "    if curr > 0 then reset = start + 2 * per - now elseif prev > 0 then reset = start + per - "
    "now end\n"
    "  end\n"
    "  if allowed == 0 then all = false end\n"
    "  out[#out + 1] = allowed\n"
    "  out[#out + 1] = remaining\n"
    "  out[#out + 1] = math.ceil(reset / 1000)\n"
    "  out[#out + 1] = math.ceil(retry / 1000)\n"
    "end\n"
    "if all then\n"
    "  for _, w in ipairs(writes) do redis.call(unpack(w)) end\n"
    "end\n"
    "return out\n";

struct gw_store {
    char *host, *password, *prefix;
    int port;
    uint32_t db;
    struct timeval timeout;

    pthread_mutex_t lock; /* the pool and the script's digest */
    redisContext *idle[POOL_SIZE];
    size_t n_idle;
    char sha[41];

    /* Healthy while even, degraded while odd; each change adds one. A call keeps the value
     * it started under, and its outcome counts only if that is still current: a call that
     * started healthy cannot end a degraded spell, nor one begun before a recovery start the
     * next. */
    _Atomic uint64_t state;
    _Atomic int64_t retry_at_ns; /* while degraded: when one call may probe Redis again */
    _Atomic int64_t backoff_ns;
    _Atomic uint64_t errors;
    char last_why[WHY_LEN]; /* under `lock`: the failure the log last reported */
};

struct gw_store *gw_store_new(const struct config *config)
{
    struct gw_store *s = calloc(1, sizeof *s);
    const char *password = config->redis.password;

    if (s == NULL)
        return NULL;
    /* `password: "${REDIS_PASSWORD:-}"` with the variable unset means no password; AUTH ""
     * would fail against a Redis that has none. */
    if (password != NULL && password[0] == '\0')
        password = NULL;
    s->host = strdup(config->redis.address.host);
    s->port = config->redis.address.port;
    s->password = password ? strdup(password) : NULL;
    s->prefix = strdup(config->redis.prefix);
    s->db = config->redis.db;
    s->timeout.tv_sec = config->redis.timeout_ns / 1000000000;
    s->timeout.tv_usec = config->redis.timeout_ns % 1000000000 / 1000;
    pthread_mutex_init(&s->lock, NULL);
    atomic_init(&s->backoff_ns, FIRST_BACKOFF);
    if (s->host == NULL || s->prefix == NULL || (password && !s->password)) {
        gw_store_free(s);
        return NULL;
    }
    return s;
}

void gw_store_free(struct gw_store *s)
{
    if (s == NULL)
        return;
    while (s->n_idle > 0)
        redisFree(s->idle[--s->n_idle]);
    pthread_mutex_destroy(&s->lock);
    free(s->host);
    free(s->password);
    free(s->prefix);
    free(s);
}

static void set_why(char why[WHY_LEN], const char *format, ...)
{
    va_list ap;

    va_start(ap, format);
    vsnprintf(why, WHY_LEN, format, ap);
    va_end(ap);
}

/* Why `command` on `c` failed, given its reply `r`: Redis's own error text (WRONGPASS,
 * NOAUTH, NOPERM, WRONGTYPE...) or the connection's. Call it at once: it reads errno. True
 * when `r` is an answer, not an error. */
static bool reply_ok(const struct gw_store *s, redisContext *c, redisReply *r, const char *command,
                     char why[WHY_LEN])
{
    if (r != NULL && r->type != REDIS_REPLY_ERROR)
        return true;
    if (r != NULL)
        set_why(why, "%s: %.200s", command, r->str);
    else if (c->err == REDIS_ERR_IO && errno == EAGAIN) /* SO_RCVTIMEO ran out */
        set_why(why, "%s: no answer within limiter.redis.timeout (%lld ms)", command,
                (long long)s->timeout.tv_sec * 1000 + s->timeout.tv_usec / 1000);
    else
        set_why(why, "%s: %s", command, c->err != 0 ? c->errstr : "no reply");
    return false;
}

/* With `reuse`, a connection from the pool if it has one (`*pooled` set); else a new one
 * (authenticated, its database selected). NULL with `why` filled. */
static redisContext *take_connection(struct gw_store *s, bool reuse, bool *pooled,
                                     char why[WHY_LEN])
{
    redisContext *c = NULL;
    char db[16];

    pthread_mutex_lock(&s->lock);
    if (reuse && s->n_idle > 0)
        c = s->idle[--s->n_idle];
    pthread_mutex_unlock(&s->lock);
    *pooled = c != NULL;
    if (c != NULL)
        return c;

    c = redisConnectWithTimeout(s->host, s->port, s->timeout);
    if (c == NULL) {
        set_why(why, "connect: out of memory");
        goto fail;
    }
    if (c->err != 0 || redisSetTimeout(c, s->timeout) != REDIS_OK) {
        set_why(why, "connect: %s", c->errstr);
        goto fail;
    }
    if (s->password != NULL) {
        const char *argv[] = {"AUTH", s->password};
        redisReply *r = redisCommandArgv(c, 2, argv, NULL);
        bool ok = reply_ok(s, c, r, "AUTH", why);

        freeReplyObject(r);
        if (!ok)
            goto fail;
    }
    if (s->db != 0) {
        const char *argv[] = {"SELECT", db};
        redisReply *r;
        bool ok;

        snprintf(db, sizeof db, "%u", s->db);
        r = redisCommandArgv(c, 2, argv, NULL);
        ok = reply_ok(s, c, r, "SELECT", why);
        freeReplyObject(r);
        if (!ok)
            goto fail;
    }
    return c;
fail:
    redisFree(c);
    return NULL;
}

static void give_back(struct gw_store *s, redisContext *c)
{
    pthread_mutex_lock(&s->lock);
    if (s->n_idle < POOL_SIZE) {
        s->idle[s->n_idle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    redisFree(c);
}

/* Loads the script into Redis (it forgets it on restart) and keeps its digest. 0, or -1 with
 * `why` filled. */
static int load_script(struct gw_store *s, redisContext *c, char why[WHY_LEN])
{
    const char *argv[] = {"SCRIPT", "LOAD", script};
    redisReply *r = redisCommandArgv(c, 3, argv, NULL);
    int rc = -1;

    if (reply_ok(s, c, r, "SCRIPT LOAD", why) && r->type == REDIS_REPLY_STRING && r->len == 40) {
        pthread_mutex_lock(&s->lock);
        memcpy(s->sha, r->str, 41);
        pthread_mutex_unlock(&s->lock);
        rc = 0;
    } else if (r != NULL && r->type != REDIS_REPLY_ERROR) {
        set_why(why, "SCRIPT LOAD: an answer that is no digest");
    }
    freeReplyObject(r);
    return rc;
}

static int algorithm_code(const char *name)
{
    static const char *const names[] = {"token_bucket", "gcra", "fixed_window",
                                        "sliding_window_log", "sliding_window_counter"};

    for (int i = 0; i < 5; i++)
        if (strcmp(names[i], name) == 0)
            return i + 1;
    return 0;
}

/* The version of a limit, 8 hex digits: BLAKE2b of everything that defines what it counts
 * (algorithm, requests, per, burst; not max_clients, which only sizes the memory fallback).
 * Every replica with the same limit computes the same version, before and after a restart. */
static void limit_version(const struct limiter_params *limit, char hex[9])
{
    char text[128];
    unsigned char digest[crypto_generichash_BYTES_MIN];
    int len = snprintf(text, sizeof text, "%s %llu %lld %llu", limit->algorithm,
                       (unsigned long long)limit->requests, (long long)limit->per_ns,
                       (unsigned long long)limit->burst);

    crypto_generichash(digest, sizeof digest, (const unsigned char *)text, (size_t)len, NULL, 0);
    sodium_bin2hex(hex, 9, digest, 4);
}

/* Runs the script for one request. 0 and `out` filled, or -1 with `why` filled (`c` is then
 * to be dropped when `*broken`). */
static int run_script(struct gw_store *s, redisContext *c, const char *route,
                      const char *const *names, const struct limiter_params *const *limits,
                      const uint64_t *costs, size_t n, const char *const *client_keys,
                      struct limiter_decision *out, bool *broken, char why[WHY_LEN])
{
    enum { MAX_ARGS = 4 + LIMITER_MAX_PER_REQUEST * 6 };
    char keys[LIMITER_MAX_PER_REQUEST][320], numbers[LIMITER_MAX_PER_REQUEST * 5 + 2][24];
    char client_hex[33], version[9], sha[41];
    unsigned char digest[16];
    const char *argv[MAX_ARGS];
    redisReply *r = NULL;
    int argc = 0, rc = -1;

    pthread_mutex_lock(&s->lock);
    memcpy(sha, s->sha, sizeof sha);
    pthread_mutex_unlock(&s->lock);

    argv[argc++] = "EVALSHA";
    argv[argc++] = sha;
    snprintf(numbers[0], sizeof numbers[0], "%zu", n);
    argv[argc++] = numbers[0];
    for (size_t i = 0; i < n; i++) {
        crypto_generichash(digest, sizeof digest, (const unsigned char *)client_keys[i],
                           strlen(client_keys[i]), NULL, 0);
        sodium_bin2hex(client_hex, sizeof client_hex, digest, sizeof digest);
        limit_version(limits[i], version);
        snprintf(keys[i], sizeof keys[i], "%.64s%.64s:%.129s:%s:%s", s->prefix, route, names[i],
                 version, client_hex);
        argv[argc++] = keys[i];
    }
    argv[argc++] = numbers[0];
    for (size_t i = 0; i < n; i++) {
        char(*f)[24] = &numbers[1 + i * 5];

        snprintf(f[0], sizeof f[0], "%d", algorithm_code(limits[i]->algorithm));
        snprintf(f[1], sizeof f[1], "%llu", (unsigned long long)limits[i]->requests);
        snprintf(f[2], sizeof f[2], "%lld", (long long)(limits[i]->per_ns / 1000));
        snprintf(f[3], sizeof f[3], "%llu", (unsigned long long)limits[i]->burst);
        snprintf(f[4], sizeof f[4], "%llu", (unsigned long long)(costs ? costs[i] : 1));
        for (int k = 0; k < 5; k++)
            argv[argc++] = f[k];
    }

    for (int attempt = 0; attempt < 2; attempt++) {
        if (sha[0] == '\0' || attempt == 1) {
            if (load_script(s, c, why) != 0) {
                *broken = true;
                return -1;
            }
            pthread_mutex_lock(&s->lock);
            memcpy(sha, s->sha, sizeof sha);
            pthread_mutex_unlock(&s->lock);
        }
        freeReplyObject(r);
        r = redisCommandArgv(c, argc, argv, NULL);
        if (r == NULL || r->type != REDIS_REPLY_ERROR || strncmp(r->str, "NOSCRIPT", 8) != 0)
            break;
    }
    *broken = r == NULL;
    if (reply_ok(s, c, r, "EVALSHA", why) && r->type == REDIS_REPLY_ARRAY && r->elements == 4 * n) {
        rc = 0;
        for (size_t i = 0; i < n; i++) {
            memset(&out[i], 0, sizeof out[i]);
            out[i].allowed = r->element[4 * i]->integer != 0;
            out[i].limit = limits[i]->requests;
            out[i].remaining = (uint64_t)r->element[4 * i + 1]->integer;
            out[i].reset_ms = r->element[4 * i + 2]->integer;
            out[i].retry_after_ms = r->element[4 * i + 3]->integer;
        }
    } else if (r != NULL && r->type != REDIS_REPLY_ERROR) {
        set_why(why, "EVALSHA: an answer of the wrong shape");
    }
    freeReplyObject(r);
    return rc;
}

/* Whether a call may go to Redis: always while healthy; while degraded, once per backoff, for
 * exactly one caller, the probe. `*state` is the state the call starts under. */
static bool may_try(struct gw_store *s, uint64_t *state)
{
    int64_t at, now;

    *state = atomic_load(&s->state);
    if (*state % 2 == 0)
        return true;
    at = atomic_load(&s->retry_at_ns);
    now = limiter_now_ns();
    return now >= at &&
           atomic_compare_exchange_strong(&s->retry_at_ns, &at, now + atomic_load(&s->backoff_ns));
}

/* A call begun under `state` failed because of `why`. The first failure of a healthy store
 * degrades it and starts the backoff; a failed probe doubles the backoff; the failures of
 * calls that began before the last change (under way when the first one struck, or before the
 * probe that ended the spell) change nothing. */
static void note_failure(struct gw_store *s, uint64_t state, const char *why)
{
    int64_t backoff = atomic_load(&s->backoff_ns);
    bool first = false, new_reason = false;

    /* Whatever broke one connection most likely broke the idle ones too: drop them, so that
     * the next probe opens a fresh one rather than failing on a dead one. */
    pthread_mutex_lock(&s->lock);
    while (s->n_idle > 0)
        redisFree(s->idle[--s->n_idle]);
    pthread_mutex_unlock(&s->lock);

    atomic_fetch_add(&s->errors, 1);
    if (state % 2 == 0) {
        uint64_t healthy = state;

        if (!atomic_compare_exchange_strong(&s->state, &healthy, state + 1))
            return;
        first = true;
        backoff = FIRST_BACKOFF;
    } else if (atomic_load(&s->state) == state) {
        backoff = backoff * 2 < LONGEST_BACKOFF ? backoff * 2 : LONGEST_BACKOFF;
    } else {
        return;
    }
    atomic_store(&s->backoff_ns, backoff);
    atomic_store(&s->retry_at_ns, limiter_now_ns() + backoff);

    /* Said once per spell, and again only when a probe fails for another reason (a Redis
     * that comes back asking for a password). */
    pthread_mutex_lock(&s->lock);
    new_reason = first || strcmp(s->last_why, why) != 0;
    if (new_reason)
        snprintf(s->last_why, sizeof s->last_why, "%s", why);
    pthread_mutex_unlock(&s->lock);
    if (first)
        gw_warn("store: redis at %s:%d failed (%s); limiting per on_store_error until it answers",
                s->host, s->port, why);
    else if (new_reason)
        gw_warn("store: redis at %s:%d still fails (%s)", s->host, s->port, why);
}

/* A call begun under `state` succeeded. Only the probe ends a degraded spell: a call that was
 * under way when Redis failed and comes back later says nothing about Redis now, and letting
 * it end the spell would cut the backoff short and make the store flap under load. */
static void note_success(struct gw_store *s, uint64_t state)
{
    uint64_t degraded = state;

    if (state % 2 == 1 && atomic_compare_exchange_strong(&s->state, &degraded, state + 1)) {
        atomic_store(&s->backoff_ns, FIRST_BACKOFF);
        gw_info("store: redis at %s:%d answers again; shared limits restored", s->host, s->port);
    }
}

enum gw_store_result gw_store_decide(struct gw_store *s, const char *route,
                                     const char *const *names,
                                     const struct limiter_params *const *limits,
                                     const uint64_t *costs, size_t n,
                                     const char *const *client_keys, struct limiter_decision *out)
{
    char why[WHY_LEN] = "";
    uint64_t state;
    bool pooled = false;

    if (n == 0 || n > LIMITER_MAX_PER_REQUEST || !may_try(s, &state))
        return GW_STORE_FAILED;
    /* A pooled connection that Redis (or something between) closed while it was idle fails
     * on first use: that says nothing about Redis, so a fresh connection gets one try. */
    for (int attempt = 0; attempt < 2; attempt++) {
        redisContext *c = take_connection(s, attempt == 0, &pooled, why);
        bool broken = true;

        if (c != NULL &&
            run_script(s, c, route, names, limits, costs, n, client_keys, out, &broken, why) == 0) {
            give_back(s, c);
            note_success(s, state);
            return GW_STORE_OK;
        }
        if (c != NULL && !broken)
            give_back(s, c); /* an error reply: the connection itself is fine */
        else
            redisFree(c);
        if (!(pooled && broken))
            break;
    }
    note_failure(s, state, why);
    return GW_STORE_FAILED;
}

void gw_store_render_metrics(const struct gw_store *s, FILE *out)
{
    fprintf(out,
            "# HELP sluice_store_errors_total Calls to the shared store that failed.\n"
            "# TYPE sluice_store_errors_total counter\n"
            "sluice_store_errors_total %llu\n"
            "# HELP sluice_store_degraded 1 while the shared store is failing and routes limit "
            "per on_store_error.\n"
            "# TYPE sluice_store_degraded gauge\n"
            "sluice_store_degraded %d\n",
            (unsigned long long)atomic_load(&s->errors), (int)(atomic_load(&s->state) % 2));
}
