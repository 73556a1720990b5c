-- Heartbeat: records that this process is alive, by Redis's clock.
-- KEYS[1] the crawl's meta hash, [2] procs; ARGV[1] process id.
if redis.call('HEXISTS', KEYS[1], 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local t = redis.call('TIME')
redis.call('HSET', KEYS[2], ARGV[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
