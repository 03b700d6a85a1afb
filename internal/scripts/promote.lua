-- Move delayed tasks that are due, by the Redis clock, to the back of
-- their queue, in due order, at most cap of them, and wake the queue.
-- Any number of workers may run it for the same due time: the first moves
-- the tasks, the others find none. A task never becomes waiting before its
-- due time (in µs, by the clock in µs). The cap keeps one call short
-- however many tasks came due at once: a caller that moved a full cap
-- calls again.
-- Returns {moved, next due (µs; -1 when none), now (µs)}.
local waiting_key, delayed_key, idle_key, high_key, low_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local gwait_key, gready_key = KEYS[6], KEYS[7] -- see GROUPS in common.lua
local channel, cap = ARGV[1], tonumber(ARGV[2]) -- cap: the most tasks to move

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key)
local now = now_us()
local moved = 0
while moved < cap do
  local due = redis.call('ZRANGEBYSCORE', delayed_key, '-inf', ms(now), 'LIMIT', 0, math.min(1000, cap - moved))
  if #due == 0 then break end
  local plain = true
  for _, e in ipairs(due) do
    if header_has(e, 'p') or header_has(e, 'g') then plain = false break end
  end
  if plain then
    redis.call('LPUSH', waiting_key, unpack(due))
  else
    for _, e in ipairs(due) do
      push_waiting(e, waiting_key)
    end
  end
  redis.call('ZREM', delayed_key, unpack(due))
  moved = moved + #due
end
if moved > 0 then
  wake(idle_key, channel, moved)
end
local next = redis.call('ZRANGE', delayed_key, 0, 0, 'WITHSCORES')
local at = -1
if #next > 0 then
  at = tonumber(next[2])
end
return {moved, ms(at), ms(now)}
