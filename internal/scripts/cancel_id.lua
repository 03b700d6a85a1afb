-- Cancel one task by id: remove it (and its recorded error) if it waits or
-- is delayed, or mark it cancelled if it is in flight (so a holder that
-- missed the event still finds out) and publish a cancel event naming it.
-- A retained task is unlisted (see outcome_pending); one removed before it
-- started is announced to waiters with an 'x<id>' event, as no outcome
-- will come (an in-flight one's cancel event tells them).
-- A task waiting in a group is found in the group set by its id (see
-- group_find); its group leaves the ready set if no task of it waits any
-- more (groups_emptied).
-- A workflow's task leaves a 'cancelled' notice (flow_cancelled in
-- common/workflows.lua): its workflow is told by the client.
-- Returns {removed, marked}: each 0 or 1, then the notice written, if any.
local waiting_key, procs_key, delayed_key, errors_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local unique_key, high_key, low_key, stats_key, retained_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local gwait_key, gready_key = KEYS[10], KEYS[11] -- see GROUPS in common/waiting.lua
local flows_key = KEYS[12] -- workflow tasks' notices (see flow_notice)
local glimits_key = KEYS[13] -- the groups' settings: a group that goes forgets its turns used
local channel, id = ARGV[1], ARGV[2] -- id: the task to cancel

set_lists(waiting_key, high_key, low_key)
local function removed(e)
  if #outcome_unlisted(retained_key, {e}) > 0 then
    publish(channel, 'x' .. id)
  end
end
for _, list in ipairs({waiting_key, high_key, low_key}) do
  local len = redis.call('LLEN', list)
  for start = 0, len - 1, 1000 do
    local chunk = redis.call('LRANGE', list, start, start + 999)
    for j, e in ipairs(chunk) do
      if entry_id(e) == id then
        redis.call('LSET', list, start + j - 1, TOMBSTONE)
        redis.call('LREM', list, 1, TOMBSTONE)
        errors_drop(errors_key, {id})
        release_unique(unique_key, e)
        removed(e)
        stat('x', 1)
        stats_flush(stats_key)
        return flow_cancelled(flows_key, {e}, {1, 0})
      end
    end
  end
end
local m = group_find(gwait_key, id)
if m then
  local e, g = group_member_split(m)
  redis.call('ZREM', gwait_key, m)
  local turned = groups_emptied(gwait_key, gready_key, {[g] = true}, glimits_key)
  if turned > 0 then publish(channel, 'w' .. turned) end
  errors_drop(errors_key, {id})
  release_unique(unique_key, e)
  removed(e)
  stat('x', 1)
  stats_flush(stats_key)
  return flow_cancelled(flows_key, {e}, {1, 0})
end
for _, e in ipairs(redis.call('ZRANGE', delayed_key, 0, -1)) do
  if entry_id(e) == id then
    redis.call('ZREM', delayed_key, e)
    errors_drop(errors_key, {id})
    release_unique(unique_key, e)
    removed(e)
    stat('x', 1)
    stats_flush(stats_key)
    return flow_cancelled(flows_key, {e}, {1, 0})
  end
end
local all = redis.call('HGETALL', procs_key)
for i = 1, #all, 2 do
  local v = all[i + 1]
  if entry_id(proc_task(v)) == id then
    if proc_state(v) ~= 'a' then
      return {0, 0} -- already cancelled, or its queue deleted
    end
    redis.call('HSET', procs_key, all[i], 'c' .. string.sub(v, 2))
    outcome_unlisted(retained_key, {proc_task(v)})
    publish(channel, 'c' .. id)
    stat('x', 1)
    stats_flush(stats_key)
    return flow_cancelled(flows_key, {proc_task(v)}, {0, 1})
  end
end
return {0, 0}
