-- Move every delayed task that is due, by the Redis clock, to the back of
-- its queue, in due order, and wake the queue. Any number of workers may
-- run it for the same due time: the first moves the tasks, the others find
-- none. A task never becomes waiting before its due time.
-- KEYS: waiting, delayed, idle
-- ARGV: channel
-- Returns {moved, next due (ms; -1 when none), now (ms)}.
local now = now_ms()
local moved = 0
while true do
  local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ms(now), 'LIMIT', 0, 1000)
  if #due == 0 then break end
  redis.call('LPUSH', KEYS[1], unpack(due))
  redis.call('ZREM', KEYS[2], unpack(due))
  moved = moved + #due
end
if moved > 0 then
  local parked = redis.call('ZPOPMIN', KEYS[3], moved + 1)
  local msg = 'w' .. moved
  if #parked > 0 then
    local ids = {}
    for i = 1, #parked, 2 do
      ids[#ids + 1] = parked[i]
    end
    msg = msg .. ':' .. table.concat(ids, ',')
  end
  publish(ARGV[1], msg)
end
local next = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local at = -1
if #next > 0 then
  at = tonumber(next[2])
end
return {moved, at, now}
