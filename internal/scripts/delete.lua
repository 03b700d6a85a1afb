-- Delete a queue: drop its waiting and delayed tasks, its dead letters and
-- their errors, its progress reports and stats, its periodic schedules'
-- last ticks and their tasks' ids (a schedule of a deleted queue starts
-- afresh), mark its
-- in-flight processes so that a stop or a reclaim drops them instead of
-- recreating the queue, and publish the delete event. Its groups' waiting
-- tasks, turns and limits go; their counts of slots held stay while
-- processes of them remain, which give them back as they end. The meta hash (the
-- process id counter) goes too, unless processes remain in flight.
-- Returns the number of waiting and delayed tasks dropped.
local waiting_key, procs_key, meta_key, delayed_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local dead_key, errors_key, results_key, retained_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local unique_key, unique_ttl_key, starts_key, high_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local low_key, periodic_key, progress_key, stats_key = KEYS[13], KEYS[14], KEYS[15], KEYS[16]
local ticks_key, gwait_key, gready_key, glimits_key = KEYS[17], KEYS[18], KEYS[19], KEYS[20] -- groups: see GROUPS in common.lua
local channel = ARGV[1]

set_lists(waiting_key, high_key, low_key, gwait_key)
local dropped = waiting_len(waiting_key) + redis.call('ZCARD', delayed_key)
redis.call('DEL', waiting_key, delayed_key, dead_key, errors_key, results_key, retained_key, unique_key, unique_ttl_key, starts_key, high_key, low_key, periodic_key, progress_key, stats_key, ticks_key, gwait_key, gready_key, glimits_key)
local all = redis.call('HGETALL', procs_key)
for i = 1, #all, 2 do
  local v = all[i + 1]
  if proc_state(v) ~= 'd' then
    redis.call('HSET', procs_key, all[i], 'd' .. string.sub(v, 2))
  end
end
local last = last_pid(meta_key)
redis.call('HDEL', meta_key, 'name', 'registered', 'paused', 'limit', 'rate', 'per', 'glimit', 'gp')
drop_meta_if_gone(procs_key, meta_key)
publish(channel, 'd' .. last)
return dropped
