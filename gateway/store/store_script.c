/* The Lua script of the Redis store and its arguments; design in store_script.h. */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "gateway/store/store_replicas.h"
#include "gateway/store/store_script.h"

/* KEYS[i]: limit i's key, made in C from that limit's version and its own client key, so the
 * script needs no notion of clients; sliding_window_log keeps its sorted set at KEYS[i] ":log"
 * and concurrency its leases at KEYS[i] ":slots" (store.h says why). ARGV[1]: what to do
 * (1 decide, 2 give back, 3 renew leases, 4 peek, 5 reset, 6 grant); ARGV[2]: the number of
 * limits n; ARGV[3]: the request's lease (its concurrency slots are members LEASE ":" 1..cost);
 * ARGV[4]: how long a lease lasts, in microseconds. Then per limit: algorithm (1 token_bucket,
 * 2 gcra, 3 fixed_window, 4 sliding_window_log, 5 sliding_window_counter, 6 concurrency),
 * requests, per in microseconds, burst, the request's cost in units (a cost of k is decided as
 * k requests at one instant, as the local limiters do: limiter.h), to give back or to grant,
 * the instant the decision charged it, and how long the request may wait for its turn (delay:,
 * 0: not).
 *
 * Deciding returns per limit: allowed (0/1), remaining, reset and retry-after in milliseconds
 * (rounded up); then the instant it was charged at and the instant it was decided at, in
 * microseconds. Writes happen only when every limit allows. A request denied now, whose
 * limits are all buckets and each allows it within its wait, is charged at its turn instead,
 * as limiter_reserve_all() does: the earliest instant all allow it, a theoretical arrival
 * time moved on from there; it is then allowed, its charge instant that turn. Giving back
 * (limiter_refund()'s rules, against Redis's clock) and renewing return nothing.
 *
 * Peeking answers as deciding would (limiter_peek()), both instants now, with nothing written
 * and no place kept; only what has expired is swept (a log's old times, lapsed slots). Its
 * reset is the client's as it is, not as after the request, as limiter_peek() says it.
 * Resetting (limiter_reset()) deletes a limit's keys: a bucket's, the current and previous
 * windows', a log's; a concurrency limit is left alone. Granting (limiter_grant()) gives
 * `cost` units back, at most the quota: a bucket's as a give-back of a charge made now; a
 * window's off the current window's count, and for sliding_window_counter what is left of
 * them off the previous one's by as much as that count weighs now; a log's newest times.
 * Each answers per limit 1 when the client had spent anything there (a state the call
 * changed), else 0. Times are microseconds from Redis's TIME; numbers are written with
 * %.0f so that no timestamp turns into an exponent.
 *
 * A heartbeat (op 7, KEYS[1] PREFIX "replicas") adds the replica's id (ARGV[3]) to a sorted
 * set scored by when it lapses (now plus ARGV[4]), drops the lapsed, and answers how many are
 * left: the replicas alive (store_replicas.h).
 *
 * A log's members are named TIME ":" and an 8-digit index, from 0 for the first charged at
 * that microsecond, and charges are given back (and granted) from the top of their instant,
 * so an instant's names stay 0 to m-1 and the next is m: two requests in one microsecond never
 * share a name, which would count them once. A concurrency set lives as long as its last lease
 * (replicas may run leases of different lengths), and a decision first drops its own request's
 * members: one sent again after its connection broke must not count the slots it took the first
 * time. */
const char gw_script_text[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local function int(x) return string.format('%.0f', x) end\n"
    "local function ttl(us) return int(math.ceil(us / 1000) + 1) end\n"
    "local op, lease, span = tonumber(ARGV[1]), ARGV[3], tonumber(ARGV[4])\n"
    "if op == 7 then\n"
    "  redis.call('ZADD', KEYS[1], int(now + span), lease)\n"
    "  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', int(now))\n"
    "  redis.call('PEXPIRE', KEYS[1], ttl(span))\n"
    "  return {redis.call('ZCARD', KEYS[1])}\n"
    "end\n"
    "local out, writes, all = {}, {}, true\n"
    "for i = 1, tonumber(ARGV[2]) do\n"
    "  local a = 4 + (i - 1) * 7\n"
    "  local algo, requests = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])\n"
    "  local per, burst = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])\n"
    "  local cost, charged = tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])\n"
    "  local key = KEYS[i]\n"
    "  local allowed, remaining, reset, retry = 0, 0, 0, 0\n"
    "  if op == 6 then charged, cost = now, math.min(cost, algo <= 2 and burst or requests) end\n"
    "  if op == 2 or op == 6 then\n"
    "    if algo <= 2 then\n"
    "      local interval = math.ceil(per / requests)\n"
    "      local tat = tonumber(redis.call('GET', key) or '0')\n"
    "      local back = cost * interval - math.max(math.max(now, tat - burst * interval) - "
    "charged, 0)\n"
    "      allowed = tat > now and 1 or 0\n"
    "      tat = tat - math.max(back, 0)\n"
    "      if back <= 0 then\n"
    "      elseif tat > now then redis.call('SET', key, int(tat), 'PX', ttl(tat - now))\n"
    "      else redis.call('DEL', key) end\n"
    "    elseif algo == 3 or algo == 5 then\n"
    "      local start = charged - charged % per\n"
    "      local wkey = key .. ':' .. int(start)\n"
    "      local count = tonumber(redis.call('GET', wkey) or '0')\n"
    "      if count > 0 then redis.call('DECRBY', wkey, math.min(cost, count)) end\n"
    "      allowed = count > 0 and 1 or 0\n"
    "      local rest = cost - math.min(cost, count)\n"
    "      if op == 6 and algo == 5 and rest > 0 then\n"
    "        local pkey = key .. ':' .. int(start - per)\n"
    "        local prev = tonumber(redis.call('GET', pkey) or '0')\n"
    "        local weighs = math.ceil(rest * per / (per - (now - start)))\n"
    "        if prev > 0 then\n"
    "          redis.call('DECRBY', pkey, math.min(weighs, prev))\n"
    "          allowed = 1\n"
    "        end\n"
    "      end\n"
    "    elseif algo == 4 and op == 6 then\n"
    "      key = key .. ':log'\n"
    "      redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - per))\n"
    "      allowed = math.min(redis.call('ZREMRANGEBYRANK', key, -cost, -1), 1)\n"
    "    elseif algo == 4 then\n"
    "      key = key .. ':log'\n"
    "      local at = redis.call('ZREVRANGEBYSCORE', key, int(charged), int(charged), 'LIMIT', 0, "
    "cost)\n"
    "      if #at > 0 then redis.call('ZREM', key, unpack(at)) end\n"
    "    elseif op == 2 then\n"
    "      for j = 1, cost do redis.call('ZREM', key .. ':slots', lease .. ':' .. j) end\n"
    "    end\n"
    "  elseif op == 5 then\n"
    "    if algo <= 2 then\n"
    "      allowed = tonumber(redis.call('GET', key) or '0') > now and 1 or 0\n"
    "      redis.call('DEL', key)\n"
    "    elseif algo == 3 or algo == 5 then\n"
    "      local start = now - now % per\n"
    "      local ckey, pkey = key .. ':' .. int(start), key .. ':' .. int(start - per)\n"
    "      local spent = tonumber(redis.call('GET', ckey) or '0')\n"
    "      if algo == 5 then spent = spent + tonumber(redis.call('GET', pkey) or '0') end\n"
    "      allowed = spent > 0 and 1 or 0\n"
    "      redis.call('DEL', ckey, pkey)\n"
    "    elseif algo == 4 then\n"
    "      key = key .. ':log'\n"
    "      redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - per))\n"
    "      allowed = math.min(redis.call('DEL', key), 1)\n"
    "    end\n"
    "  elseif op == 3 then\n"
    "    key = key .. ':slots'\n"
    "    for j = 1, cost do\n"
    "      redis.call('ZADD', key, 'XX', int(now + span), lease .. ':' .. j)\n"
    "    end\n"
    "    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]\n"
    "    if last then redis.call('PEXPIRE', key, ttl(tonumber(last) - now)) end\n"
    "  elseif algo <= 2 then\n"
    "    local interval = math.ceil(per / requests)\n"
    "    local tolerance = burst * interval\n"
    "    local tat = tonumber(redis.call('GET', key) or '0')\n"
    "    local ahead = math.max(tat, now) + cost * interval - now\n"
    "    if ahead <= tolerance then\n"
    "      allowed, remaining, reset = 1, math.floor((tolerance - ahead) / interval), ahead\n"
    "      if op == 4 then reset = math.max(tat - now, 0) end\n"
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
    "      if op == 4 and count == 0 then reset = 0 end\n"
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
    "      if op == 4 then\n"
    "        local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]\n"
    "        reset = newest and tonumber(newest) + per - now or 0\n"
    "      end\n"
    "      local same = redis.call('ZCOUNT', key, int(now), int(now))\n"
    "      for j = 0, cost - 1 do\n"
    "        local name = string.format('%s:%08d', int(now), same + j)\n"
    "        writes[#writes + 1] = {'ZADD', key, int(now), name}\n"
    "      end\n"
    "      writes[#writes + 1] = {'PEXPIRE', key, ttl(per)}\n"
    "    else\n"
    "      local leaving = count + cost - requests - 1\n"
    "      local oldest = tonumber(redis.call('ZRANGE', key, leaving, leaving, 'WITHSCORES')[2])\n"
    "      local newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])\n"
    "      reset, retry = newest + per - now, oldest + per - now\n"
    "      remaining = math.max(requests - count, 0)\n"
    "    end\n"
    "  elseif algo == 5 then\n"
    "    local start = now - now % per\n"
    "    local ckey = key .. ':' .. int(start)\n"
    "    local curr = tonumber(redis.call('GET', ckey) or '0')\n"
    "    local prev = tonumber(redis.call('GET', key .. ':' .. int(start - per)) or '0')\n"
    "    local elapsed = now - start\n"
    "    local slack = requests * per - curr * per - prev * (per - elapsed)\n"
    "    if slack > (cost - 1) * per then\n"
    "      allowed, slack = 1, slack - cost * per\n"
    "      if op == 1 then curr = curr + cost end\n"
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
    "  else\n"
    "    key = key .. ':slots'\n"
    "    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now))\n"
    "    if op == 1 then\n"
    "      for j = 1, cost do redis.call('ZREM', key, lease .. ':' .. j) end\n"
    "    end\n"
    "    local count = redis.call('ZCARD', key)\n"
    "    if count + cost <= requests then\n"
    "      local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]\n"
    "      allowed, remaining = 1, requests - count - cost\n"
    "      for j = 1, cost do\n"
    "        writes[#writes + 1] = {'ZADD', key, int(now + span), lease .. ':' .. j}\n"
    "      end\n"
    "      writes[#writes + 1] = {'PEXPIRE', key, ttl(math.max(tonumber(last or 0), now + span) "
    "- now)}\n"
    "    else\n"
    "      retry, remaining = 1000000, math.max(requests - count, 0)\n"
    "    end\n"
    "  end\n"
    "  if allowed == 0 then all = false end\n"
    "  out[#out + 1] = allowed\n"
    "  out[#out + 1] = remaining\n"
    "  out[#out + 1] = math.ceil(reset / 1000)\n"
    "  out[#out + 1] = math.ceil(retry / 1000)\n"
    "end\n"
    "if op == 5 or op == 6 then\n"
    "  local changed = {}\n"
    "  for i = 1, tonumber(ARGV[2]) do changed[i] = out[4 * i - 3] end\n"
    "  return changed\n"
    "end\n"
    "if op ~= 1 and op ~= 4 then return {} end\n"
    "if all or op == 4 then\n"
    "  if op == 1 then\n"
    "    for _, w in ipairs(writes) do redis.call(unpack(w)) end\n"
    "  end\n"
    "  out[#out + 1] = now\n"
    "  out[#out + 1] = now\n"
    "  return out\n"
    "end\n"
    "local turn, places = now, {}\n"
    "for i = 1, tonumber(ARGV[2]) do\n"
    "  local a = 4 + (i - 1) * 7\n"
    "  local algo, requests = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])\n"
    "  local per, burst = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])\n"
    "  local cost, wait = tonumber(ARGV[a + 5]), tonumber(ARGV[a + 7])\n"
    "  if algo > 2 or wait <= 0 and not (out[4 * i - 3] == 1) then turn = -1 break end\n"
    "  local interval = math.ceil(per / requests)\n"
    "  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')\n"
    "  local at = math.max(now, tat + cost * interval - burst * interval)\n"
    "  if at - now > wait and at > now then turn = -1 break end\n"
    "  turn = math.max(turn, at)\n"
    "  places[i] = {interval, burst * interval, tat, cost}\n"
    "end\n"
    "if turn <= now then\n"
    "  out[#out + 1] = now\n"
    "  out[#out + 1] = now\n"
    "  return out\n"
    "end\n"
    "for i, p in ipairs(places) do\n"
    "  local tat = math.max(p[3], turn) + p[4] * p[1]\n"
    "  redis.call('SET', KEYS[i], int(tat), 'PX', ttl(tat - now))\n"
    "  out[4 * i - 3] = 1\n"
    "  out[4 * i - 2] = math.floor((p[2] - (tat - turn)) / p[1])\n"
    "  out[4 * i - 1] = math.ceil((tat - now) / 1000)\n"
    "  out[4 * i] = 0\n"
    "end\n"
    "out[#out + 1] = turn\n"
    "out[#out + 1] = now\n"
    "return out\n";

/* The script's number for `algorithm` (the top of this file). 0 for an unknown one, which
 * no limit has: config resolved each one's algorithm as it checked it. */
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
    case LIMITER_CONCURRENCY:
        return 6;
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

/* Limit i's key: PREFIX ROUTE ":" LIMIT ":" VERSION ":" BLAKE2b-128(client key). */
static void limit_key(char *out, size_t len, const char *prefix, const struct gw_store_ask *ask,
                      size_t i)
{
    char client_hex[33], version[9];
    unsigned char digest[16];

    crypto_generichash(digest, sizeof digest, (const unsigned char *)ask->client_keys[i],
                       strlen(ask->client_keys[i]), NULL, 0);
    sodium_bin2hex(client_hex, sizeof client_hex, digest, sizeof digest);
    limit_version(ask->limits[i], version);
    snprintf(out, len, "%.64s%.64s:%.129s:%s:%s", prefix, ask->route, ask->names[i], version,
             client_hex);
}

/* A replica's heartbeat (GW_STORE_BEAT): its id `ask->lease` in PREFIX "replicas", lasting
 * GW_STORE_BEAT_TTL_NS. */
static void beat_args(struct gw_script_args *a, const char *prefix, const struct gw_store_ask *ask)
{
    a->argc = 0;
    a->op = GW_STORE_BEAT;
    a->n_limits = 1; /* its answer: the replicas alive, in remaining */
    snprintf(a->keys[0], sizeof a->keys[0], "%.64sreplicas", prefix);
    snprintf(a->lease, sizeof a->lease, "%s", ask->lease);
    snprintf(a->numbers[1], sizeof a->numbers[1], "%d", (int)GW_STORE_BEAT);
    snprintf(a->numbers[2], sizeof a->numbers[2], "%lld", GW_STORE_BEAT_TTL_NS / 1000);
    a->argv[a->argc++] = "EVALSHA";
    a->argv[a->argc++] = NULL; /* the digest, filled by the sender */
    a->argv[a->argc++] = "1";
    a->argv[a->argc++] = a->keys[0];
    a->argv[a->argc++] = a->numbers[1];
    a->argv[a->argc++] = "0";
    a->argv[a->argc++] = a->lease;
    a->argv[a->argc++] = a->numbers[2];
}

void gw_script_args_make(struct gw_script_args *a, const char *prefix, int64_t lease_ns,
                         const struct gw_store_ask *ask)
{
    size_t n = ask->n;

    if (ask->op == GW_STORE_BEAT) {
        beat_args(a, prefix, ask);
        return;
    }
    a->argc = 0;
    a->op = ask->op;
    a->n_limits = n;
    a->argv[a->argc++] = "EVALSHA";
    a->argv[a->argc++] = NULL; /* the digest, filled by the sender */
    snprintf(a->numbers[0], sizeof a->numbers[0], "%zu", n);
    a->argv[a->argc++] = a->numbers[0];
    for (size_t i = 0; i < n; i++) {
        limit_key(a->keys[i], sizeof a->keys[i], prefix, ask, i);
        a->argv[a->argc++] = a->keys[i];
    }
    snprintf(a->numbers[1], sizeof a->numbers[1], "%d", (int)ask->op);
    snprintf(a->lease, sizeof a->lease, "%s", ask->lease ? ask->lease : "");
    snprintf(a->numbers[2], sizeof a->numbers[2], "%lld", (long long)(lease_ns / 1000));
    a->argv[a->argc++] = a->numbers[1];
    a->argv[a->argc++] = a->numbers[0];
    a->argv[a->argc++] = a->lease;
    a->argv[a->argc++] = a->numbers[2];
    for (size_t i = 0; i < n; i++) {
        char(*f)[24] = &a->numbers[GW_SCRIPT_HEAD + i * GW_SCRIPT_FIELDS];
        const struct limiter_params *limit = ask->limits[i];

        a->requests[i] = limit->requests;
        snprintf(f[0], sizeof f[0], "%d", algorithm_code(limit->algorithm_id));
        snprintf(f[1], sizeof f[1], "%llu", (unsigned long long)limit->requests);
        snprintf(f[2], sizeof f[2], "%lld", (long long)(limit->per_ns / 1000));
        snprintf(f[3], sizeof f[3], "%llu", (unsigned long long)limit->burst);
        snprintf(f[4], sizeof f[4], "%llu", (unsigned long long)(ask->costs ? ask->costs[i] : 1));
        snprintf(f[5], sizeof f[5], "%lld",
                 (long long)(ask->charged_ns ? ask->charged_ns[i] / 1000 : 0));
        snprintf(f[6], sizeof f[6], "%lld",
                 (long long)(ask->max_wait_ns ? ask->max_wait_ns[i] / 1000 : 0));
        for (int k = 0; k < GW_SCRIPT_FIELDS; k++)
            a->argv[a->argc++] = f[k];
    }
}

/* RESET's or GRANT's answer: per limit 1 when the client had spent something there (so the
 * call changed it), into out[i].allowed. */
static int changes_answer(const redisReply *r, size_t n, struct limiter_decision *out)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return -1;
        memset(&out[i], 0, sizeof out[i]);
        out[i].allowed = r->element[i]->integer != 0;
        out[i].remaining = (uint64_t)r->element[i]->integer; /* BEAT: the replicas alive */
    }
    return 0;
}

int gw_script_answer(const redisReply *r, const struct gw_script_args *a,
                     struct limiter_decision *out)
{
    size_t n = a->n_limits;
    int64_t charged_us, now_us;

    if (a->op == GW_STORE_RESET || a->op == GW_STORE_GRANT || a->op == GW_STORE_BEAT)
        return changes_answer(r, n, out);
    if (a->op != GW_STORE_DECIDE && a->op != GW_STORE_PEEK)
        return r->type == REDIS_REPLY_ARRAY && r->elements == 0 ? 0 : -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 * n + 2)
        return -1;
    for (size_t i = 0; i < 4 * n + 2; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return -1;
    charged_us = r->element[4 * n]->integer;
    now_us = r->element[4 * n + 1]->integer;
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].allowed = r->element[4 * i]->integer != 0;
        out[i].limit = a->requests[i];
        out[i].remaining = (uint64_t)r->element[4 * i + 1]->integer;
        out[i].reset_ms = r->element[4 * i + 2]->integer;
        out[i].retry_after_ms = r->element[4 * i + 3]->integer;
        if (out[i].allowed && a->op == GW_STORE_DECIDE) { /* a peek charged nothing */
            out[i].charged_ns = charged_us * 1000;
            out[i].wait_ns = (charged_us - now_us) * 1000;
        }
    }
    return 0;
}

void gw_script_args_copy(struct gw_script_args *to, const struct gw_script_args *from)
{
    const char *base = (const char *)from, *end = base + sizeof *from;

    memcpy(to, from, sizeof *to);
    for (int i = 0; i < to->argc; i++)
        if (from->argv[i] >= base && from->argv[i] < end)
            to->argv[i] = (const char *)to + (from->argv[i] - base);
}

void gw_script_args_set_op(struct gw_script_args *a, enum gw_store_op op)
{
    a->op = op;
    snprintf(a->numbers[1], sizeof a->numbers[1], "%d", (int)op);
}
