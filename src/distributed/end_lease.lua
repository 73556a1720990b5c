-- Prepended to claim.lua and release.lua when they are loaded (client.rs): ending a lease,
-- which both do (release.lua when the process says so, claim.lua when a drained lease's
-- host has nothing queued), written once so the two cannot drift.
-- Ends lease `tok` of `host` in the shard whose keys are given: the URLs still in its
-- lease set `li` (not acknowledged) go back to the head of the host's queue `q`, the lease
-- is forgotten, the host may be served again at `at` (ms) and is scheduled then if its
-- queue has URLs. Returns whether it was scheduled.
local function end_lease(meta, sched, next_at, leased, leases, lease, q, li, tok, host, at)
  local left = redis.call('SMEMBERS', li)
  for j = #left, 1, -1 do
    redis.call('LPUSH', q, left[j])
  end
  if #left > 0 then redis.call('HINCRBY', meta, 'queued', #left) end
  redis.call('DEL', li)
  redis.call('ZREM', leases, tok)
  redis.call('HDEL', lease, tok)
  redis.call('HDEL', leased, host)
  redis.call('HSET', next_at, host, at)
  if redis.call('LLEN', q) > 0 then
    redis.call('ZADD', sched, 'NX', at, host)
    return true
  end
  return false
end
