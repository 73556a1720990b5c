-- Leases in one shard: reclaims the expired leases named (their unacknowledged URLs back to
-- the head of their host's queue), tops up leases this process holds (a drained one, all
-- of whose URLs are acknowledged, is ended instead when its host's queue is empty), then
-- leases up to `want` of the hosts named whose time has come. Hosts are named by the caller, from the
-- previous answer's hints, because every key a script touches must be in KEYS (Redis
-- Cluster's rule): a host's queue and lease set are keys of their own.
-- KEYS[1] the shard's meta hash, [2] sched, [3] next, [4] leased, [5] leases, [6] lease,
-- then per host named (in ARGV's order: expired, top-ups, candidates) its queue and its
-- lease set.
-- ARGV[1] shard number, [2] process id, [3] lease ms, [4] hosts wanted, [5] URLs per new
-- lease, [6] hints wanted, [7] hint horizon ms, [8] expired named, [9] top-ups, [10]
-- candidates, then per expired: token, host; per top-up: token, host, URLs wanted, and -1
-- or, for a drained lease, the ms until its host may be served again should it end here;
-- per candidate: host.
-- Returns {leases, hosts scheduled, leases outstanding, tokens of the drained leases ended,
-- ms until the next scheduled host is due (-1: none), version, hosts due soon, expired
-- tokens}; each lease {token, host, item, item, ...} (a top-up repeats its token with only
-- the new items). The version grows with every change of the shard's queues or leases.
--
-- Why a drained lease ends here rather than in release.lua: a host whose lease drains while
-- its queue refills (the process's own pages add to it) is topped up in the same round
-- trip instead of ending, going back on the schedule and being claimed again (two round
-- trips with the process's fetch slots empty); ending it only when the queue is empty is
-- what release.lua did, so nothing else changes. Admission is not touched: a top-up moves
-- URLs already admitted from the queue into the lease.
local meta, sched, next_at, leased, leases, lease = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
if redis.call('HEXISTS', meta, 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local shard = ARGV[1]
local proc = ARGV[2]
local lease_ms = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local per = tonumber(ARGV[5])
local hints = tonumber(ARGV[6])
local horizon = tonumber(ARGV[7])
local n_expired, n_tops, n_candidates = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local changed = false
local key = 7

local function schedule(host, q)
  if redis.call('LLEN', q) > 0 then
    local at = tonumber(redis.call('HGET', next_at, host) or '0')
    if at < now then at = now end
    redis.call('ZADD', sched, 'NX', at, host)
  end
end

-- Moves up to n URLs from the host's queue into its lease set; returns them.
local function take(q, li, n)
  local items = redis.call('LRANGE', q, 0, n - 1)
  if #items > 0 then
    redis.call('LTRIM', q, #items, -1)
    redis.call('SADD', li, unpack(items))
    redis.call('HINCRBY', meta, 'queued', -#items)
    changed = true
  end
  return items
end

local i = 11
for _ = 1, n_expired do
  local tok, host = ARGV[i], ARGV[i + 1]
  local q, li = KEYS[key], KEYS[key + 1]
  i = i + 2
  key = key + 2
  local expiry = redis.call('ZSCORE', leases, tok)
  if expiry and tonumber(expiry) <= now then
    local items = redis.call('SMEMBERS', li)
    redis.call('DEL', li)
    redis.call('ZREM', leases, tok)
    redis.call('HDEL', lease, tok)
    if redis.call('HGET', leased, host) == tok then
      redis.call('HDEL', leased, host)
    end
    for j = #items, 1, -1 do
      redis.call('LPUSH', q, items[j])
    end
    redis.call('HINCRBY', meta, 'queued', #items)
    redis.call('HINCRBY', meta, 'reclaimed_urls', #items)
    redis.call('HINCRBY', meta, 'reclaimed_leases', 1)
    schedule(host, q)
    changed = true
  end
end

local out = {}
local ended = {}
for _ = 1, n_tops do
  local tok, host, n, wait = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local q, li = KEYS[key], KEYS[key + 1]
  i = i + 4
  key = key + 2
  if redis.call('HGET', lease, tok) == proc then
    local items = take(q, li, n)
    if #items > 0 then
      redis.call('ZADD', leases, 'XX', now + lease_ms, tok)
      local one = {tok, host}
      for _, item in ipairs(items) do one[#one + 1] = item end
      out[#out + 1] = one
    elseif wait >= 0 then
      -- Drained and nothing queued: ended as release.lua ends a lease (anything still in
      -- it, which the process says there is not, back to the head of the queue).
      end_lease(meta, sched, next_at, leased, leases, lease, q, li, tok, host, now + wait)
      ended[#ended + 1] = tok
      changed = true
    else
      redis.call('ZADD', leases, 'XX', now + lease_ms, tok)
    end
  end
end

local got = 0
for _ = 1, n_candidates do
  local host = ARGV[i]
  local q, li = KEYS[key], KEYS[key + 1]
  i = i + 1
  key = key + 2
  local at = redis.call('ZSCORE', sched, host)
  if got < want and at and tonumber(at) <= now then
    redis.call('ZREM', sched, host)
    changed = true
    local tok = shard .. '/' .. redis.call('HINCRBY', meta, 'lease_seq', 1) .. '/' .. host
    local items = take(q, li, per)
    if #items > 0 then
      got = got + 1
      redis.call('HSET', leased, host, tok)
      redis.call('HSET', lease, tok, proc)
      redis.call('ZADD', leases, now + lease_ms, tok)
      local one = {tok, host}
      for _, item in ipairs(items) do one[#one + 1] = item end
      out[#out + 1] = one
    end
  end
end

local ver = tonumber(redis.call('HGET', meta, 'ver') or '0')
if changed then
  ver = redis.call('HINCRBY', meta, 'ver', 1)
end
local due = -1
local first = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
if #first == 2 then
  due = tonumber(first[2]) - now
  if due < 0 then due = 0 end
end
local soon = {}
if hints > 0 then
  soon = redis.call('ZRANGEBYSCORE', sched, '-inf', now + horizon, 'LIMIT', 0, hints)
end
local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 100)
return {out, redis.call('ZCARD', sched), redis.call('ZCARD', leases), ended, due, ver, soon,
  expired}
