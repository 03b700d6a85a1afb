-- Move delayed tasks that are due, by the Redis clock, to the back of
-- their queue, in due order, at most ARGV[2] of them, and wake the queue.
-- Any number of workers may run it for the same due time: the first moves
-- the tasks, the others find none. A task never becomes waiting before its
-- due time (in µs, by the clock in µs). The cap keeps one call short
-- however many tasks came due at once: a caller that moved a full cap
-- calls again.
-- KEYS: waiting, delayed, idle, high, low
-- ARGV: channel, most to move
-- Returns {moved, next due (µs; -1 when none), now (µs)}.
set_lists(KEYS[1], KEYS[4], KEYS[5])
local now = now_us()
local moved = 0
local cap = tonumber(ARGV[2])
while moved < cap do
  local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ms(now), 'LIMIT', 0, math.min(1000, cap - moved))
  if #due == 0 then break end
  local plain = true
  for _, e in ipairs(due) do
    if header_has(e, 'p') then plain = false break end
  end
  if plain then
    redis.call('LPUSH', KEYS[1], unpack(due))
  else
    for _, e in ipairs(due) do
      redis.call('LPUSH', list_of(e, KEYS[1]), e)
    end
  end
  redis.call('ZREM', KEYS[2], unpack(due))
  moved = moved + #due
end
if moved > 0 then
  wake(KEYS[3], ARGV[1], moved)
end
local next = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local at = -1
if #next > 0 then
  at = tonumber(next[2])
end
return {moved, ms(at), ms(now)}
