-- The max_urls budget handed to shards (Redis Cluster, where one script cannot reach both
-- the crawl's counter and a shard's keys): each shard asking for `need` gets what is left
-- of max_urls, up to `need`, added to its running total.
-- KEYS[1] the crawl's meta hash; ARGV[1] max_urls, then per shard: shard number, need.
-- Returns per shard its running total granted: admit.lua takes the largest total it is
-- given, so a grant whose answer was lost is handed over with the next one.
local meta = KEYS[1]
if redis.call('HEXISTS', meta, 'plan') == 0 then
  return redis.error_reply('CRAWLGONE the crawl is not in Redis')
end
local max_urls = tonumber(ARGV[1])
local granted = tonumber(redis.call('HGET', meta, 'granted') or '0')
local out = {}
for i = 2, #ARGV - 1, 2 do
  local field = 'g:' .. ARGV[i]
  local take = math.min(tonumber(ARGV[i + 1]), max_urls - granted)
  if take > 0 then
    granted = granted + take
    redis.call('HINCRBY', meta, field, take)
  end
  out[#out + 1] = tonumber(redis.call('HGET', meta, field) or '0')
end
redis.call('HSET', meta, 'granted', granted)
return out
