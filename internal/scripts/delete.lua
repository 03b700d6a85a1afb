-- Delete a queue: drop its waiting and delayed tasks, those gathering
-- under an aggregation key (and the gatherings' deadlines and sizes), its dead letters and
-- their errors, its progress reports and stats, its periodic schedules'
-- last ticks and their tasks' ids (a schedule of a deleted queue starts
-- afresh), mark its
-- in-flight processes so that a stop or a reclaim drops them instead of
-- recreating the queue, and publish the delete event. Its groups' waiting
-- tasks, turns, limits and rate windows go; their counts of slots held stay while
-- processes of them remain, which give them back as they end. The meta hash (the
-- process id counter) goes too, unless processes remain in flight.
-- Its workflow tasks (waiting, delayed or in flight) leave 'cancelled'
-- notices (flow_cancelled in common/workflows.lua) in its flows set, which
-- stays, unlike the rest, until they are carried: the client carries them
-- at once, and a sweep of the queue's name, if that fails.
-- Returns {the number of waiting and delayed tasks dropped, then the
-- notices written}.
local waiting_key, procs_key, meta_key, delayed_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local dead_key, errors_key, results_key, retained_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local unique_key, unique_ttl_key, starts_key, high_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local low_key, periodic_key, progress_key, stats_key = KEYS[13], KEYS[14], KEYS[15], KEYS[16]
local ticks_key, gwait_key, gready_key, glimits_key = KEYS[17], KEYS[18], KEYS[19], KEYS[20] -- groups: see GROUPS in common/waiting.lua
local flows_key, gstarts_key = KEYS[21], KEYS[22] -- workflow tasks' notices (see flow_notice), the groups' rate windows
local gather_key, gather_due_key, gather_size_key = KEYS[23], KEYS[24], KEYS[25] -- the gatherings (see AGG in common/aggregation.lua)
local channel = ARGV[1]

set_lists(waiting_key, high_key, low_key, gwait_key)
local dropped = waiting_len(waiting_key) + redis.call('ZCARD', delayed_key) + redis.call('ZCARD', gather_key)
-- The workflow tasks, read a thousand at a time before they go.
local steps = {}
local function look(e)
  if string.find(e, ',F', 1, true) then steps[#steps + 1] = e end
end
for _, list in ipairs({waiting_key, high_key, low_key}) do
  for start = 0, redis.call('LLEN', list) - 1, 1000 do
    for _, e in ipairs(redis.call('LRANGE', list, start, start + 999)) do look(e) end
  end
end
for start = 0, redis.call('ZCARD', delayed_key) - 1, 1000 do
  for _, e in ipairs(redis.call('ZRANGE', delayed_key, start, start + 999)) do look(e) end
end
for start = 0, redis.call('ZCARD', gwait_key) - 1, 1000 do
  for _, m in ipairs(redis.call('ZRANGE', gwait_key, start, start + 999)) do
    if string.find(m, ',F', 1, true) then look((group_member_split(m))) end
  end
end
redis.call('DEL', waiting_key, delayed_key, dead_key, errors_key, results_key, retained_key, unique_key, unique_ttl_key, starts_key, high_key, low_key, periodic_key, progress_key, stats_key, ticks_key, gwait_key, gready_key, glimits_key, gstarts_key, gather_key, gather_due_key, gather_size_key)
local all = redis.call('HGETALL', procs_key)
for i = 1, #all, 2 do
  local v = all[i + 1]
  if proc_state(v) ~= 'd' then
    redis.call('HSET', procs_key, all[i], 'd' .. string.sub(v, 2))
    -- A cancelled one told its workflow when it was marked.
    if proc_state(v) == 'a' then look(proc_task(v)) end
  end
end
local last = last_pid(meta_key)
redis.call('HDEL', meta_key, 'name', 'registered', 'paused', 'limit', 'rate', 'per', 'glimit', 'gp', 'grate', 'grx', 'ghold', 'gdead', 'ghx', 'gturns', 'gtx', 'gsize', 'amax', 'adelay')
drop_meta_if_gone(procs_key, meta_key)
publish(channel, 'd' .. last)
return flow_cancelled(flows_key, steps, {dropped})
