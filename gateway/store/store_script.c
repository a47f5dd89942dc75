/* The Lua script of the Redis store and its arguments; design in store_script.h. */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "gateway/store/store_script.h"

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
const char gw_script_text[] =
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

/* The script's number for `algorithm` (the top of this file). 0 for an unknown one, which
 * no limit has: config resolved each one's algorithm as it checked it, and refuses
 * concurrency with the Redis store. */
static int algorithm_code(enum limiter_algorithm algorithm)
{
    switch (algorithm) {
    case LIMITER_TOKEN_BUCKET:
        return 1;
    case LIMITER_GCRA:
        return 2;
    case LIMITER_FIXED_WINDOW:
        return 3;
    case LIMITER_SLIDING_WINDOW_LOG:
        return 4;
    case LIMITER_SLIDING_WINDOW_COUNTER:
        return 5;
    case LIMITER_CONCURRENCY: /* not kept in Redis: config refuses it there */
    case LIMITER_ALGORITHM_UNKNOWN:
        break;
    }
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

void gw_script_args_make(struct gw_script_args *a, const char *prefix, const char *route,
                         const char *const *names, const struct limiter_params *const *limits,
                         const uint64_t *costs, size_t n, const char *const *client_keys)
{
    char client_hex[33], version[9];
    unsigned char digest[16];

    a->argc = 0;
    a->n_limits = n;
    a->argv[a->argc++] = "EVALSHA";
    a->argv[a->argc++] = NULL; /* the digest, filled by the sender */
    snprintf(a->numbers[0], sizeof a->numbers[0], "%zu", n);
    a->argv[a->argc++] = a->numbers[0];
    for (size_t i = 0; i < n; i++) {
        crypto_generichash(digest, sizeof digest, (const unsigned char *)client_keys[i],
                           strlen(client_keys[i]), NULL, 0);
        sodium_bin2hex(client_hex, sizeof client_hex, digest, sizeof digest);
        limit_version(limits[i], version);
        snprintf(a->keys[i], sizeof a->keys[i], "%.64s%.64s:%.129s:%s:%s", prefix, route, names[i],
                 version, client_hex);
        a->argv[a->argc++] = a->keys[i];
    }
    a->argv[a->argc++] = a->numbers[0];
    for (size_t i = 0; i < n; i++) {
        char(*f)[24] = &a->numbers[1 + i * 5];

        a->requests[i] = limits[i]->requests;
        snprintf(f[0], sizeof f[0], "%d", algorithm_code(limits[i]->algorithm_id));
        snprintf(f[1], sizeof f[1], "%llu", (unsigned long long)limits[i]->requests);
        snprintf(f[2], sizeof f[2], "%lld", (long long)(limits[i]->per_ns / 1000));
        snprintf(f[3], sizeof f[3], "%llu", (unsigned long long)limits[i]->burst);
        snprintf(f[4], sizeof f[4], "%llu", (unsigned long long)(costs ? costs[i] : 1));
        for (int k = 0; k < 5; k++)
            a->argv[a->argc++] = f[k];
    }
}

int gw_script_answer(const redisReply *r, const struct gw_script_args *a,
                     struct limiter_decision *out)
{
    size_t n = a->n_limits;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 * n)
        return -1;
    for (size_t i = 0; i < 4 * n; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return -1;
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].allowed = r->element[4 * i]->integer != 0;
        out[i].limit = a->requests[i];
        out[i].remaining = (uint64_t)r->element[4 * i + 1]->integer;
        out[i].reset_ms = r->element[4 * i + 2]->integer;
        out[i].retry_after_ms = r->element[4 * i + 3]->integer;
    }
    return 0;
}
