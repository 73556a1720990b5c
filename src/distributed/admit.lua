-- Admission of candidate URLs of one shard's hosts: test-and-set in the shard's part of the
-- Bloom filter, the max_urls budget, the per-host cap and the enqueue, in one atomic step.
-- Every key it touches is in KEYS (Redis Cluster's rule; all keys carry the shard's tag):
-- KEYS[1] the shard's meta hash, [2] sched, [3] next, [4] leased, [5] hostn, then, when
-- ARGV[1] is '1' (one server: the budget is taken here), [6] the crawl's meta hash; then the
-- seen parts the URLs' bits are in, then each host's queue.
-- ARGV[1] budget inline ('1') or granted (cluster, '0'), [2] max_urls, [3] max_pages_per_host
-- (0: none), [4] this shard's budget granted so far by grant.lua (cluster), [5] hosts, [6]
-- seen parts, then per host: host, its number of URLs n, then per URL: queued item (packed:
-- queue_item.rs), its seen part (1-based, in KEYS' order), the byte offset of its 64-byte
-- block in the part, and its probe: (byte in the block, mask) pairs, one per byte holding
-- some of its k bits (bit o of the part is byte o / 8, mask 0x80 >> o % 8: the bits
-- BITFIELD u1 and SETBIT address).
-- Returns one code per URL, in ARGV's order: 1 queued, 5 queued and its host put on the
-- schedule (on a host's first URL queued; the process hints its next claims with it: see
-- shard_views.rs), 0 already seen, 2 over max_urls, 3 over the host cap, 4 new but the
-- shard's budget is spent (cluster: ask grant.lua, then admit again).
--
-- Why it is built so: Redis's CPU per admitted URL is what a crawl on one node pays most
-- for, and a redis.call costs more in converting its arguments and reply than a small
-- command's own work (a number argument is even formatted with printf). So a URL's k bits
-- are read with one GETRANGE of its block and tested here with bit operations, and set,
-- once the URL is admitted, with one SETRANGE of the block (two calls of three arguments,
-- where BITFIELD took 3k + 2 to read and 4k + 2 to set); a host's URLs are pushed by one
-- RPUSH and its schedule and cap are looked at once per call. URLs are decided one by
-- one, in order, as before: a URL repeated in the call finds its own bits set, and a URL
-- a cap refuses leaves no bit behind.
local meta = KEYS[1]
if redis.call('HEXISTS', meta, 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local inline = ARGV[1] == '1'
local max_urls = tonumber(ARGV[2])
local host_cap = tonumber(ARGV[3])
local n_hosts = tonumber(ARGV[5])
local n_parts = tonumber(ARGV[6])
local sched, next_at, leased, hostn = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local crawl = nil
local parts = 6
local avail
if inline then
  crawl = KEYS[6]
  parts = 7
  avail = max_urls - tonumber(redis.call('HGET', crawl, 'granted') or '0')
else
  local budget = tonumber(redis.call('HGET', meta, 'budget') or '0')
  local granted = tonumber(ARGV[4])
  if granted > budget then
    budget = granted
    redis.call('HSET', meta, 'budget', budget)
  end
  avail = budget - tonumber(redis.call('HGET', meta, 'accepted') or '0')
end
local queues = parts + n_parts
local band, bor, byte, char = bit.band, bit.bor, string.byte, string.char
local out = {}
local queued = 0
local now = nil
local u = 0
local i = 7
for h = 1, n_hosts do
  local host = ARGV[i]
  local n = tonumber(ARGV[i + 1])
  i = i + 2
  local capped = 0
  if host_cap > 0 then capped = tonumber(redis.call('HGET', hostn, host) or '0') end
  local items = {}
  local first = nil
  for _ = 1, n do
    u = u + 1
    local seen = KEYS[parts + tonumber(ARGV[i + 1]) - 1]
    local at = tonumber(ARGV[i + 2])
    local probe = ARGV[i + 3]
    local block = redis.call('GETRANGE', seen, at, at + 63)
    local new = false
    for j = 1, #probe, 2 do
      local b, mask = byte(probe, j, j + 1)
      if band(byte(block, b + 1) or 0, mask) ~= mask then
        new = true
        break
      end
    end
    if not new then
      out[u] = 0
    elseif host_cap > 0 and capped >= host_cap then
      -- Before the budget: a URL its host's cap refuses never asks grant.lua for budget it
      -- would not use.
      out[u] = 3
    elseif queued >= avail then
      out[u] = inline and 2 or 4
    else
      -- The block as read (zeros past the string's end), with the URL's bits set.
      local bytes = {byte(block, 1, 64)}
      for z = #bytes + 1, 64 do bytes[z] = 0 end
      for j = 1, #probe, 2 do
        local b, mask = byte(probe, j, j + 1)
        bytes[b + 1] = bor(bytes[b + 1], mask)
      end
      redis.call('SETRANGE', seen, at, char(unpack(bytes)))
      capped = capped + 1
      queued = queued + 1
      items[#items + 1] = ARGV[i]
      out[u] = 1
      first = first or u
    end
    i = i + 4
  end
  if first then
    redis.call('RPUSH', KEYS[queues + h - 1], unpack(items))
    if host_cap > 0 then redis.call('HINCRBY', hostn, host, #items) end
    if redis.call('HEXISTS', leased, host) == 0 then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local due = tonumber(redis.call('HGET', next_at, host) or '0')
      if due < now then due = now end
      if redis.call('ZADD', sched, 'NX', due, host) == 1 then out[first] = 5 end
    end
  end
end
if queued > 0 then
  redis.call('HINCRBY', meta, 'accepted', queued)
  redis.call('HINCRBY', meta, 'queued', queued)
  redis.call('HINCRBY', meta, 'ver', 1)
  if inline then redis.call('HINCRBY', crawl, 'granted', queued) end
end
return out
