-- Move delayed tasks that are due, by the Redis clock, to the back of
-- their queue, in due order, at most cap of them, and wake the queue.
-- Any number of workers may run it for the same due time: the first moves
-- the tasks, the others find none. A task never becomes waiting before its
-- due time (in µs, by the clock in µs). The cap keeps one call short
-- however many tasks came due at once: a caller that moved a full cap
-- calls again.
-- It flushes, the same way, each gathering of tasks (see AGG.flush in
-- common/aggregation.lua) whose deadline has passed into one task at the
-- back of the queue: the first caller flushes it, the others find no
-- deadline due. Each aggregated task made counts as one task moved; a
-- gathering whose tasks take more than limit bytes in one payload makes
-- several. Returns {moved, next due (µs; -1 when none): of the delayed
-- tasks and the gatherings' deadlines, the earliest, now (µs)}.
local waiting_key, delayed_key, idle_key, high_key, low_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local gwait_key, gready_key = KEYS[6], KEYS[7] -- see GROUPS in common/waiting.lua
local meta_key, gather_key, gather_due_key, gather_size_key = KEYS[8], KEYS[9], KEYS[10], KEYS[11] -- see AGG in common/aggregation.lua
local channel, cap = ARGV[1], tonumber(ARGV[2]) -- cap: the most tasks to move
-- limit: the most bytes an aggregated task's payload takes (the client's
-- task size bound; 0: none).
local limit = tonumber(ARGV[3] or '0')

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key)
local now = now_us()
local moved = 0
local find = string.find
while moved < cap do
  local want = math.min(1000, cap - moved)
  local due = redis.call('ZRANGEBYSCORE', delayed_key, '-inf', ms(now), 'LIMIT', 0, want)
  if #due == 0 then break end
  -- Only a header with a level ('p') or a group ('g') goes through
  -- push_waiting: each entry is looked at with plain finds (see
  -- header_has), as a retried one has other fields.
  local plain = true
  for _, e in ipairs(due) do
    local c = find(e, ':', 1, true) or 0
    local p, g = find(e, ',p', 1, true), find(e, ',g', 1, true)
    if (p and p < c) or (g and g < c) then plain = false break end
  end
  if plain then
    redis.call('LPUSH', waiting_key, unpack(due))
  else
    for _, e in ipairs(due) do
      push_waiting(e, waiting_key)
    end
  end
  if #due < want then
    -- Every task due was read: removed by their scores, with no member
    -- sent back.
    redis.call('ZREMRANGEBYSCORE', delayed_key, '-inf', ms(now))
  else
    -- More may be due, some due when the last read is (the same score):
    -- only those read go.
    redis.call('ZREM', delayed_key, unpack(due))
  end
  moved = moved + #due
end
-- Each gathering due is flushed whole, max tasks and limit bytes at most
-- an aggregated task.
if moved < cap and redis.call('EXISTS', gather_due_key) == 1 then
  local keys = redis.call('ZRANGEBYSCORE', gather_due_key, '-inf', ms(now), 'LIMIT', 0, cap - moved)
  if #keys > 0 then
    local max = math.max(agg_lib().settings(meta_key), 1)
    for _, key in ipairs(keys) do
      while agg_lib().count(gather_key, key) > 0 do
        agg_lib().flush(gather_key, gather_due_key, key, max, string.format('%x', next_task_ids(meta_key, 1, now)), waiting_key, nil, limit)
        moved = moved + 1
      end
      redis.call('ZREM', gather_due_key, key)
      redis.call('HDEL', gather_size_key, key)
    end
  end
end
if moved > 0 then
  wake(idle_key, channel, moved)
end
local at = -1
for _, key in ipairs({delayed_key, gather_due_key}) do
  local next = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #next > 0 and (at == -1 or tonumber(next[2]) < at) then
    at = tonumber(next[2])
  end
end
return {moved, ms(at), ms(now)}
