-- Extends the expiry of the leases this process still holds in one shard.
-- KEYS[1] the shard's meta hash, [2] leases, [3] lease; ARGV[1] process id, [2] lease ms,
-- then the tokens. Returns the tokens that are no longer this process's.
if redis.call('HEXISTS', KEYS[1], 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local proc = ARGV[1]
local lease_ms = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lost = {}
for i = 3, #ARGV do
  local tok = ARGV[i]
  if redis.call('HGET', KEYS[3], tok) == proc then
    redis.call('ZADD', KEYS[2], 'XX', now + lease_ms, tok)
  else
    lost[#lost + 1] = tok
  end
end
return lost
