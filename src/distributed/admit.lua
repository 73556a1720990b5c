-- Admission of candidate URLs of one shard's hosts: test-and-set in the shard's part of the
-- Bloom filter, the max_urls budget, the per-host cap and the enqueue, in one atomic step.
-- Every key it touches is in KEYS (Redis Cluster's rule; all keys carry the shard's tag):
-- KEYS[1] the shard's meta hash, [2] sched, [3] next, [4] leased, [5] hostn, then, when
-- ARGV[1] is '1' (one server: the budget is taken here), [6] the crawl's meta hash; then the
-- seen parts the URLs' bits are in, then each host's queue.
-- ARGV[1] budget inline ('1') or granted (cluster, '0'), [2] max_urls, [3] max_pages_per_host
-- (0: none), [4] k, [5] this shard's budget granted so far by grant.lua (cluster), [6] hosts,
-- [7] seen parts, then per host: host, its number of URLs n, then per URL: queued item
-- (packed: queue_item.rs), its seen part (1-based, in KEYS' order), k bit offsets in it.
-- Returns one code per URL, in ARGV's order: 1 queued, 5 queued and its host put on the
-- schedule (on a host's first URL queued; the process hints its next claims with it: see
-- shard_views.rs), 0 already seen, 2 over max_urls, 3 over the host cap, 4 new but the
-- shard's budget is spent (cluster: ask grant.lua, then admit again).
--
-- Why it is built so (Redis's CPU per admitted URL is what it saves): a redis.call costs
-- a few µs of argument and reply conversion beyond its work, and a number argument is
-- formatted with printf, so the bits are written with string values, a host's URLs are
-- pushed by one RPUSH, and its schedule and cap are looked at once per call. When no URL
-- of the call can be refused by a cap (the budget left and each host's cap leave room for
-- all of them, seen or not), the test-and-set is one BITFIELD SET per seen part for all
-- URLs: SET returns each bit's old value, in order, so a URL whose k bits were all set is
-- seen, one with a bit clear is new and now set, exactly as one GET-then-SET per URL in
-- the same order decides (a URL repeated in the call finds its own bits set). Otherwise
-- (a cap may refuse) each URL is read first and set only once admitted, so a refused URL
-- leaves no bit behind.
local meta = KEYS[1]
if redis.call('HEXISTS', meta, 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local inline = ARGV[1] == '1'
local max_urls = tonumber(ARGV[2])
local host_cap = tonumber(ARGV[3])
local k = tonumber(ARGV[4])
local n_hosts = tonumber(ARGV[6])
local n_parts = tonumber(ARGV[7])
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
  local granted = tonumber(ARGV[5])
  if granted > budget then
    budget = granted
    redis.call('HSET', meta, 'budget', budget)
  end
  avail = budget - tonumber(redis.call('HGET', meta, 'accepted') or '0')
end
local queues = parts + n_parts

-- The URLs in ARGV's order: each one's host (its number) and where its item is in ARGV.
local host_of, at = {}, {}
local host_name, host_count = {}, {}
local total = 0
local i = 8
for h = 1, n_hosts do
  host_name[h] = ARGV[i]
  local n = tonumber(ARGV[i + 1])
  i = i + 2
  for _ = 1, n do
    total = total + 1
    host_of[total] = h
    at[total] = i
    i = i + 2 + k
  end
  host_count[h] = n
end

-- URLs each host has queued so far, for its cap.
local capped = {}
local safe = total <= avail
if host_cap > 0 then
  for h = 1, n_hosts do
    capped[h] = tonumber(redis.call('HGET', hostn, host_name[h]) or '0')
    if capped[h] + host_count[h] > host_cap then safe = false end
  end
end

local out = {}
local items = {}
local queued = 0
local bits = 0

-- Takes URL u (its bits set, `clear` of them newly): into its host's push.
local function take(u, clear)
  local h = host_of[u]
  local list = items[h]
  if not list then
    list = {}
    items[h] = list
  end
  list[#list + 1] = ARGV[at[u]]
  queued = queued + 1
  bits = bits + clear
  out[u] = 1
end

if safe then
  -- One BITFIELD SET per seen part for all URLs (in chunks: unpack's stack is bounded).
  local per_call = math.max(1, math.floor(4000 / (4 * k)))
  local clear = {}
  local ops, members = {}, {}
  local function flush(p)
    local m = members[p]
    if not m or #m == 0 then return end
    local old = redis.call('BITFIELD', KEYS[parts + p - 1], unpack(ops[p]))
    for b, u in ipairs(m) do
      local c = 0
      for j = (b - 1) * k + 1, b * k do
        if old[j] == 0 then c = c + 1 end
      end
      clear[u] = c
    end
    ops[p], members[p] = {}, {}
  end
  for u = 1, total do
    local a = at[u]
    local p = tonumber(ARGV[a + 1])
    local o, m = ops[p], members[p]
    if not o then
      o, m = {}, {}
      ops[p], members[p] = o, m
    end
    local n = #o
    for j = 1, k do
      o[n + 1] = 'SET'; o[n + 2] = 'u1'; o[n + 3] = ARGV[a + 1 + j]; o[n + 4] = '1'
      n = n + 4
    end
    m[#m + 1] = u
    if #m >= per_call then flush(p) end
  end
  for p = 1, n_parts do flush(p) end
  for u = 1, total do
    if clear[u] == 0 then out[u] = 0 else take(u, clear[u]) end
  end
else
  local get, set = {}, {}
  for j = 1, k do
    get[3 * j - 2] = 'GET'; get[3 * j - 1] = 'u1'
    set[4 * j - 3] = 'SET'; set[4 * j - 2] = 'u1'; set[4 * j] = '1'
  end
  for u = 1, total do
    local a = at[u]
    local h = host_of[u]
    local seen = KEYS[parts + tonumber(ARGV[a + 1]) - 1]
    for j = 1, k do get[3 * j] = ARGV[a + 1 + j] end
    local old = redis.call('BITFIELD', seen, unpack(get))
    local clear = false
    for j = 1, k do
      if old[j] == 0 then clear = true end
    end
    if not clear then
      out[u] = 0
    elseif host_cap > 0 and capped[h] >= host_cap then
      -- Before the budget: a URL its host's cap refuses never asks grant.lua for budget it
      -- would not use.
      out[u] = 3
    elseif queued >= avail then
      out[u] = inline and 2 or 4
    else
      for j = 1, k do set[4 * j - 1] = ARGV[a + 1 + j] end
      -- SET's old values count each bit once (an offset repeated to make up k is not).
      local was = redis.call('BITFIELD', seen, unpack(set))
      local newly = 0
      for j = 1, k do
        if was[j] == 0 then newly = newly + 1 end
      end
      if host_cap > 0 then capped[h] = capped[h] + 1 end
      take(u, newly)
    end
  end
end

-- Per host: one push of its queued URLs, its cap's count, and its schedule.
local now = nil
local first = 1
for h = 1, n_hosts do
  local list = items[h]
  if list then
    local host = host_name[h]
    redis.call('RPUSH', KEYS[queues + h - 1], unpack(list))
    if host_cap > 0 then redis.call('HINCRBY', hostn, host, #list) end
    if redis.call('HEXISTS', leased, host) == 0 then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local at_ms = tonumber(redis.call('HGET', next_at, host) or '0')
      if at_ms < now then at_ms = now end
      if redis.call('ZADD', sched, 'NX', at_ms, host) == 1 then
        -- The host's first URL queued in this call says so.
        for u = first, first + host_count[h] - 1 do
          if out[u] == 1 then
            out[u] = 5
            break
          end
        end
      end
    end
  end
  first = first + host_count[h]
end
if queued > 0 then
  redis.call('HINCRBY', meta, 'accepted', queued)
  redis.call('HINCRBY', meta, 'queued', queued)
  redis.call('HINCRBY', meta, 'bits', bits)
  redis.call('HINCRBY', meta, 'ver', 1)
  if inline then redis.call('HINCRBY', crawl, 'granted', queued) end
end
return out
