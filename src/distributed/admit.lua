-- Admission of candidate URLs of one shard's hosts: test-and-set in the shard's part of the
-- Bloom filter, the max_urls budget, the per-host cap and the enqueue, in one atomic step.
-- Every key it touches is in KEYS (Redis Cluster's rule; all keys carry the shard's tag):
-- KEYS[1] the shard's meta hash, [2] sched, [3] next, [4] leased, [5] hostn, then, when
-- ARGV[1] is '1' (one server: the budget is taken here), [6] the crawl's meta hash; then per
-- URL its host's queue and its seen part.
-- ARGV[1] budget inline ('1') or granted (cluster, '0'), [2] max_urls, [3] max_pages_per_host
-- (0: none), [4] k, [5] this shard's budget granted so far by grant.lua (cluster), then per
-- URL: host, queued item (packed: queue_item.rs), k bit offsets in the seen part.
-- Returns one code per URL: 1 queued, 5 queued and its host put on the schedule (the process
-- hints its next claims with it: see shard_views.rs), 0 already seen, 2 over max_urls, 3 over
-- the host cap, 4 new but the shard's budget is spent (cluster: ask grant.lua, then admit
-- again).
local meta = KEYS[1]
if redis.call('HEXISTS', meta, 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local inline = ARGV[1] == '1'
local max_urls = tonumber(ARGV[2])
local host_cap = tonumber(ARGV[3])
local k = tonumber(ARGV[4])
local sched, next_at, leased, hostn = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local crawl = nil
local key = 6
local avail
if inline then
  crawl = KEYS[6]
  key = 7
  avail = max_urls - tonumber(redis.call('HGET', crawl, 'granted') or '0')
else
  local budget = tonumber(redis.call('HGET', meta, 'budget') or '0')
  local granted = tonumber(ARGV[5])
  if granted > budget then
    budget = granted
    redis.call('HSET', meta, 'budget', budget)
  end
  avail = budget - tonumber(redis.call('HGET', meta, 'accepted') or '0')
end
local out = {}
local now = nil
local queued = 0
local bits = 0
local i = 6
while i + 1 + k <= #ARGV do
  local host, item = ARGV[i], ARGV[i + 1]
  local q, seen = KEYS[key], KEYS[key + 1]
  local ops = {}
  for j = 1, k do
    ops[#ops + 1] = 'GET'; ops[#ops + 1] = 'u1'; ops[#ops + 1] = ARGV[i + 1 + j]
  end
  local old = redis.call('BITFIELD', seen, unpack(ops))
  local clear = 0
  for j = 1, k do
    if old[j] == 0 then clear = clear + 1 end
  end
  if clear == 0 then
    out[#out + 1] = 0
  elseif host_cap > 0 and tonumber(redis.call('HGET', hostn, host) or '0') >= host_cap then
    -- Before the budget: a URL its host's cap refuses never asks grant.lua for budget it
    -- would not use.
    out[#out + 1] = 3
  elseif queued >= avail then
    out[#out + 1] = inline and 2 or 4
  else
    ops = {}
    for j = 1, k do
      ops[#ops + 1] = 'SET'; ops[#ops + 1] = 'u1'; ops[#ops + 1] = ARGV[i + 1 + j]; ops[#ops + 1] = 1
    end
    redis.call('BITFIELD', seen, unpack(ops))
    bits = bits + clear
    queued = queued + 1
    if host_cap > 0 then redis.call('HINCRBY', hostn, host, 1) end
    redis.call('RPUSH', q, item)
    local code = 1
    if redis.call('HEXISTS', leased, host) == 0 then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local at = tonumber(redis.call('HGET', next_at, host) or '0')
      if at < now then at = now end
      code = code + 4 * redis.call('ZADD', sched, 'NX', at, host)
    end
    out[#out + 1] = code
  end
  i = i + 2 + k
  key = key + 2
end
if queued > 0 then
  redis.call('HINCRBY', meta, 'accepted', queued)
  redis.call('HINCRBY', meta, 'queued', queued)
  redis.call('HINCRBY', meta, 'bits', bits)
  redis.call('HINCRBY', meta, 'ver', 1)
  if inline then redis.call('HINCRBY', crawl, 'granted', queued) end
end
return out
