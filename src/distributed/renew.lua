-- Heartbeat: records that this process is alive and extends the expiry of the leases it
-- still holds. KEYS[1] the meta hash; ARGV[1] prefix, ARGV[2] process id, ARGV[3] lease ms,
-- then the tokens. Returns the tokens that are no longer this process's.
if redis.call('HEXISTS', KEYS[1], 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local P = ARGV[1]
local proc = ARGV[2]
local lease_ms = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', P .. 'procs', proc, now)
local lost = {}
for i = 4, #ARGV do
  local tok = ARGV[i]
  if redis.call('HGET', P .. 'lease:' .. tok, 'proc') == proc then
    redis.call('ZADD', P .. 'leases', 'XX', now + lease_ms, tok)
  else
    lost[#lost + 1] = tok
  end
end
return lost
