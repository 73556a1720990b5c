-- Acknowledges URLs of leases and ends leases, in one or more shards: a section per shard.
-- For each lease still this process's, the acknowledged URLs (their records are written)
-- leave the lease; an ended lease gives its other URLs back to the head of the host's
-- queue, writes the host's next-allowed time and schedules the host again if it has URLs
-- queued. One call may carry several shards' sections on a single server (one script call
-- per sync instead of one per shard touched); on a cluster every call carries one section,
-- since a call's keys must share a slot.
-- KEYS per section: the shard's meta hash, sched, next, leased, leases, lease, then per
-- lease its host's queue and lease set.
-- ARGV[1] process id, then per section: its number of leases, then per lease: token, host,
-- ms until the host may be served again, end (1) or not (0), n, and n acknowledged items.
-- Returns {the number of leases that were no longer this process's (expired and reclaimed),
-- then the hosts of the ended leases that went back on the schedule} (the process hints its
-- next claims with them: see shard_views.rs).
local proc = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = 0
local scheduled = {}
local key = 1
local i = 2
while i <= #ARGV do
  local meta, sched, next_at, leased, leases, lease =
    KEYS[key], KEYS[key + 1], KEYS[key + 2], KEYS[key + 3], KEYS[key + 4], KEYS[key + 5]
  key = key + 6
  if redis.call('HEXISTS', meta, 'plan') == 0 then
    return redis.error_reply('CRAWLGONE the crawl is not in Redis')
  end
  local m = tonumber(ARGV[i])
  i = i + 1
  local changed = false
  for _ = 1, m do
    local tok, host, wait, ending, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], tonumber(ARGV[i + 4])
    local q, li = KEYS[key], KEYS[key + 1]
    key = key + 2
    if redis.call('HGET', lease, tok) == proc then
      local from = i + 5
      while from <= i + 4 + n do
        local to = math.min(from + 499, i + 4 + n)
        redis.call('SREM', li, unpack(ARGV, from, to))
        from = to + 1
      end
      if ending == '1' then
        if end_lease(meta, sched, next_at, leased, leases, lease, q, li, tok, host, now + wait) then
          scheduled[#scheduled + 1] = host
        end
        changed = true
      end
    else
      stale = stale + 1
    end
    i = i + 5 + n
  end
  if changed then redis.call('HINCRBY', meta, 'ver', 1) end
end
table.insert(scheduled, 1, stale)
return scheduled
