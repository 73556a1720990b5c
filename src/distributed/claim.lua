-- Leases: reclaims expired leases (their unacknowledged URLs back to the head of their
-- host's queue), tops up leases this process holds, then hands it up to `want` more hosts
-- whose time has come.
-- KEYS[1] the meta hash; ARGV[1] prefix, ARGV[2] process id, ARGV[3] lease ms,
-- ARGV[4] hosts wanted, ARGV[5] URLs per new lease, ARGV[6] leases to top up, then per
-- top-up: token, URLs wanted.
-- Returns {leases, hosts scheduled, leases outstanding, URLs queued, ms until the next
-- scheduled host is due (-1: none)}, each lease {token, host, item, item, ...} (a top-up
-- repeats its token with only the new items).
if redis.call('HEXISTS', KEYS[1], 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local P = ARGV[1]
local proc = ARGV[2]
local lease_ms = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local per = tonumber(ARGV[5])
local tops = tonumber(ARGV[6])
local meta = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function schedule(host)
  if redis.call('LLEN', P .. 'q:' .. host) > 0 then
    local at = tonumber(redis.call('HGET', P .. 'next', host) or '0')
    if at < now then at = now end
    redis.call('ZADD', P .. 'sched', 'NX', at, host)
  end
end

-- Moves up to n URLs from the host's queue into the lease's set; returns them.
local function take(tok, host, n)
  local q = P .. 'q:' .. host
  local items = redis.call('LRANGE', q, 0, n - 1)
  if #items > 0 then
    redis.call('LTRIM', q, #items, -1)
    redis.call('SADD', P .. 'li:' .. tok, unpack(items))
    redis.call('HINCRBY', meta, 'queued', -#items)
  end
  return items
end

local expired = redis.call('ZRANGEBYSCORE', P .. 'leases', '-inf', now, 'LIMIT', 0, 100)
for _, tok in ipairs(expired) do
  local host = redis.call('HGET', P .. 'lease:' .. tok, 'host')
  local items = redis.call('SMEMBERS', P .. 'li:' .. tok)
  redis.call('DEL', P .. 'lease:' .. tok, P .. 'li:' .. tok)
  redis.call('ZREM', P .. 'leases', tok)
  if host then
    if redis.call('HGET', P .. 'leased', host) == tok then
      redis.call('HDEL', P .. 'leased', host)
    end
    for j = #items, 1, -1 do
      redis.call('LPUSH', P .. 'q:' .. host, items[j])
    end
    redis.call('HINCRBY', meta, 'queued', #items)
    redis.call('HINCRBY', meta, 'reclaimed_urls', #items)
    redis.call('HINCRBY', meta, 'reclaimed_leases', 1)
    schedule(host)
  end
end

local leases = {}
local i = 7
for _ = 1, tops do
  local tok, n = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local lease = P .. 'lease:' .. tok
  if redis.call('HGET', lease, 'proc') == proc then
    local host = redis.call('HGET', lease, 'host')
    redis.call('ZADD', P .. 'leases', 'XX', now + lease_ms, tok)
    local items = take(tok, host, n)
    if #items > 0 then
      local out = {tok, host}
      for _, item in ipairs(items) do out[#out + 1] = item end
      leases[#leases + 1] = out
    end
  end
end

if want > 0 then
  local hosts = redis.call('ZRANGEBYSCORE', P .. 'sched', '-inf', now, 'LIMIT', 0, want)
  for _, host in ipairs(hosts) do
    redis.call('ZREM', P .. 'sched', host)
    local tok = tostring(redis.call('HINCRBY', meta, 'lease_seq', 1))
    local items = take(tok, host, per)
    if #items > 0 then
      redis.call('HSET', P .. 'leased', host, tok)
      redis.call('HSET', P .. 'lease:' .. tok, 'host', host, 'proc', proc)
      redis.call('ZADD', P .. 'leases', now + lease_ms, tok)
      local out = {tok, host}
      for _, item in ipairs(items) do out[#out + 1] = item end
      leases[#leases + 1] = out
    end
  end
end
local due = -1
local first = redis.call('ZRANGE', P .. 'sched', 0, 0, 'WITHSCORES')
if #first == 2 then
  due = tonumber(first[2]) - now
  if due < 0 then due = 0 end
end
return {leases, redis.call('ZCARD', P .. 'sched'), redis.call('ZCARD', P .. 'leases'),
  tonumber(redis.call('HGET', meta, 'queued') or '0'), due}
