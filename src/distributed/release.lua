-- Acknowledges URLs of leases and ends leases. For each lease still this process's, the
-- acknowledged URLs (their records are written) leave the lease; an ended lease gives its
-- other URLs back to the head of the host's queue, writes the host's next-allowed time and
-- schedules the host again if it has URLs queued.
-- KEYS[1] the meta hash; ARGV[1] prefix, ARGV[2] process id, then per lease: token, ms
-- until the host may be served again, end (1) or not (0), n, and n acknowledged items.
-- Returns the number of leases that were no longer this process's (expired and reclaimed).
if redis.call('HEXISTS', KEYS[1], 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local P = ARGV[1]
local proc = ARGV[2]
local meta = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = 0
local i = 3
while i + 3 <= #ARGV do
  local tok, wait, ending, n = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], tonumber(ARGV[i + 3])
  local lease = P .. 'lease:' .. tok
  local li = P .. 'li:' .. tok
  local host = redis.call('HGET', lease, 'host')
  if host and redis.call('HGET', lease, 'proc') == proc then
    local from = i + 4
    while from <= i + 3 + n do
      local to = math.min(from + 499, i + 3 + n)
      redis.call('SREM', li, unpack(ARGV, from, to))
      from = to + 1
    end
    if ending == '1' then
      local q = P .. 'q:' .. host
      local left = redis.call('SMEMBERS', li)
      for j = #left, 1, -1 do
        redis.call('LPUSH', q, left[j])
      end
      if #left > 0 then redis.call('HINCRBY', meta, 'queued', #left) end
      redis.call('DEL', lease, li)
      redis.call('ZREM', P .. 'leases', tok)
      redis.call('HDEL', P .. 'leased', host)
      local at = now + wait
      redis.call('HSET', P .. 'next', host, at)
      if redis.call('LLEN', q) > 0 then
        redis.call('ZADD', P .. 'sched', 'NX', at, host)
      end
    end
  else
    stale = stale + 1
  end
  i = i + 4 + n
end
return stale
