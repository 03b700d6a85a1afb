-- Delete a queue: drop its waiting and delayed tasks, its dead letters and
-- their errors, its progress reports and stats, mark its in-flight processes so
-- that a stop or a reclaim drops them instead of recreating the queue, and
-- publish the delete event. The meta hash (the process id counter) goes
-- too, unless processes remain in flight.
-- KEYS: waiting, procs, meta, delayed, dead, errors, results, retained,
--       unique, unique TTLs, starts, high, low, periodic (the periodic
--       schedules' last ticks: a schedule of a deleted queue starts afresh),
--       progress, stats
-- ARGV: channel
-- Returns the number of waiting and delayed tasks dropped.
set_lists(KEYS[1], KEYS[12], KEYS[13])
local dropped = waiting_len(KEYS[1]) + redis.call('ZCARD', KEYS[4])
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16])
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local v = all[i + 1]
  if proc_state(v) ~= 'd' then
    redis.call('HSET', KEYS[2], all[i], 'd' .. string.sub(v, 2))
  end
end
local last = last_pid(KEYS[3])
redis.call('HDEL', KEYS[3], 'name', 'registered', 'paused', 'limit', 'rate', 'per')
drop_meta_if_gone(KEYS[2], KEYS[3])
publish(ARGV[1], 'd' .. last)
return dropped
