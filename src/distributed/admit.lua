-- Admission of one page's candidate URLs: test-and-set in the shared Bloom filter, the
-- max_urls budget, the per-host cap and the enqueue, all in one atomic step.
-- KEYS[1]  the crawl's meta hash (carries the {crawl_id} hash tag; other keys share it)
-- ARGV[1]  key prefix, ARGV[2] max_urls, ARGV[3] max_pages_per_host (0: none), ARGV[4] k
-- then per URL: host key, seen shard, queued item (packed: queue_item.rs), k bit offsets in
-- the shard.
-- Returns one code per URL: 1 queued, 0 already seen, 2 over max_urls, 3 over the host cap.
if redis.call('HEXISTS', KEYS[1], 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local P = ARGV[1]
local max_urls = tonumber(ARGV[2])
local host_cap = tonumber(ARGV[3])
local k = tonumber(ARGV[4])
local meta = KEYS[1]
local accepted = tonumber(redis.call('HGET', meta, 'accepted') or '0')
local out = {}
local now = nil
local queued = 0
local bits = 0
local i = 5
while i + 2 + k <= #ARGV do
  local host, shard, item = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local key = P .. 'seen:' .. shard
  local ops = {}
  for j = 1, k do
    ops[#ops + 1] = 'GET'; ops[#ops + 1] = 'u1'; ops[#ops + 1] = ARGV[i + 2 + j]
  end
  local old = redis.call('BITFIELD', key, unpack(ops))
  local clear = 0
  for j = 1, k do
    if old[j] == 0 then clear = clear + 1 end
  end
  if clear == 0 then
    out[#out + 1] = 0
  elseif accepted >= max_urls then
    out[#out + 1] = 2
  elseif host_cap > 0 and tonumber(redis.call('HGET', P .. 'hostn', host) or '0') >= host_cap then
    out[#out + 1] = 3
  else
    ops = {}
    for j = 1, k do
      ops[#ops + 1] = 'SET'; ops[#ops + 1] = 'u1'; ops[#ops + 1] = ARGV[i + 2 + j]; ops[#ops + 1] = 1
    end
    redis.call('BITFIELD', key, unpack(ops))
    bits = bits + clear
    accepted = accepted + 1
    queued = queued + 1
    if host_cap > 0 then redis.call('HINCRBY', P .. 'hostn', host, 1) end
    redis.call('RPUSH', P .. 'q:' .. host, item)
    if redis.call('HEXISTS', P .. 'leased', host) == 0 then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local at = tonumber(redis.call('HGET', P .. 'next', host) or '0')
      if at < now then at = now end
      redis.call('ZADD', P .. 'sched', 'NX', at, host)
    end
    out[#out + 1] = 1
  end
  i = i + 3 + k
end
if queued > 0 then
  redis.call('HSET', meta, 'accepted', accepted)
  redis.call('HINCRBY', meta, 'queued', queued)
  redis.call('HINCRBY', meta, 'bits', bits)
end
return out
