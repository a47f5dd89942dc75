/* The master's address asked of the sentinels; design in store_sentinel.h. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/store/store_sentinel.h"
#include "limiter/limiter.h"

/* The time left until `deadline_ns`, as hiredis takes it; false when none is. */
static bool time_left(int64_t deadline_ns, struct timeval *tv)
{
    int64_t left = (deadline_ns - limiter_now_ns()) / 1000;

    if (left <= 0)
        return false;
    *tv = (struct timeval){.tv_sec = (time_t)(left / 1000000),
                           .tv_usec = (suseconds_t)(left % 1000000)};
    return true;
}

/* One command on `c`, its answer within the connection's timeout; NULL with `why` on an
 * error reply or a broken connection. */
static redisReply *ask(redisContext *c, const char *what, char *why, size_t why_len, int argc,
                       const char **argv)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);

    if (r == NULL) {
        snprintf(why, why_len, "%s: %s", what, c->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, why_len, "%s: %.200s", what, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* Whether `r` is an address as the sentinels give it, [host, port], its port into `*port`. */
static bool is_address(const redisReply *r, int *port)
{
    char *end;
    long n;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[0]->len > INET6_ADDRSTRLEN)
        return false;
    n = strtol(r->element[1]->str, &end, 10);
    if (end == r->element[1]->str || *end != '\0' || n <= 0 || n > 65535)
        return false;
    *port = (int)n;
    return true;
}

/* Asks one sentinel, at `ip`:`port`, for the master's address. 0, or -1 with `why`. */
static int ask_sentinel(const struct gw_store_redis *redis, const char *ip, int port,
                        int64_t deadline_ns, char host[INET6_ADDRSTRLEN + 1], int *master_port,
                        char *why, size_t why_len)
{
    const char *auth[] = {"AUTH", redis->sentinel_password};
    const char *get[] = {"SENTINEL", "get-master-addr-by-name", redis->master};
    struct timeval tv;
    redisContext *c;
    redisReply *r = NULL;
    int rc = -1;

    if (!time_left(deadline_ns, &tv)) {
        snprintf(why, why_len, "sentinel %s:%d: timed out", ip, port);
        return -1;
    }
    c = redisConnectWithTimeout(ip, port, tv);
    if (c == NULL || c->err != 0) {
        snprintf(why, why_len, "sentinel %s:%d: %s", ip, port, c ? c->errstr : "out of memory");
        redisFree(c);
        return -1;
    }
    redisSetTimeout(c, tv);
    if (redis->sentinel_password != NULL) {
        r = ask(c, "AUTH", why, why_len, 2, auth);
        if (r == NULL)
            goto out;
        freeReplyObject(r);
    }
    r = ask(c, "SENTINEL get-master-addr-by-name", why, why_len, 3, get);
    if (r == NULL)
        goto out;
    if (!is_address(r, master_port)) {
        snprintf(why, why_len, "sentinel %s:%d knows no master called %s", ip, port, redis->master);
        goto out;
    }
    memcpy(host, r->element[0]->str, r->element[0]->len);
    host[r->element[0]->len] = '\0';
    rc = 0;
out:
    freeReplyObject(r);
    redisFree(c);
    return rc;
}

int gw_store_sentinel_master(const struct gw_store_redis *redis, struct gw_store_lookup **lookups,
                             int64_t deadline_ns, char host[INET6_ADDRSTRLEN + 1], int *port,
                             bool *timed_out, char *why, size_t why_len)
{
    char ip[INET6_ADDRSTRLEN];

    *timed_out = false;
    snprintf(why, why_len, "no sentinel answered");
    for (size_t i = 0; i < redis->n_sentinels; i++) {
        if (gw_store_resolve(&lookups[i], redis->sentinels[i].host, deadline_ns, ip, timed_out, why,
                             why_len) != 0) {
            if (*timed_out)
                return -1;
            continue;
        }
        if (ask_sentinel(redis, ip, redis->sentinels[i].port, deadline_ns, host, port, why,
                         why_len) == 0)
            return 0;
        *timed_out = limiter_now_ns() >= deadline_ns;
        if (*timed_out)
            return -1;
    }
    return -1;
}
