-- Cancel tasks by payload: remove every waiting or delayed task with this
-- payload (and its recorded error), mark every in-flight one cancelled (so
-- a holder that missed the event still finds out), and publish a cancel
-- event naming the in-flight tasks. Retained tasks are unlisted (see
-- outcome_pending), and those removed before they started are announced
-- to waiters with an 'x<id>,<id>...' event, as no outcome will come.
-- Tasks waiting in groups are removed from the group set too (read 1,000
-- members at a time, by rank), and a group none of whose tasks waits any
-- more leaves the ready set (groups_emptied).
-- A workflow's task, removed or marked, leaves a 'cancelled' notice
-- (flow_cancelled in common/workflows.lua): its workflow is told by the
-- client.
-- Returns {removed, marked, then the notices written}.
--
-- A few waiting matches are replaced by a tombstone each (LSET) and removed
-- with one LREM; many are removed by writing the list again without them,
-- since each LSET walks the list: the cost stays linear in its length.
local waiting_key, procs_key, delayed_key, errors_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local unique_key, high_key, low_key, stats_key, retained_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local gwait_key, gready_key = KEYS[10], KEYS[11] -- see GROUPS in common/waiting.lua
local flows_key = KEYS[12] -- workflow tasks' notices (see flow_notice)
local glimits_key = KEYS[13] -- the groups' settings: a group that goes forgets its turns used
local channel, payload = ARGV[1], ARGV[2]

set_lists(waiting_key, high_key, low_key)
local ids = {}
local unlist = {} -- the retained entries removed
local steps = {} -- the workflow tasks (an 'F' field) removed or marked
-- Each level's list in turn.
for _, list in ipairs({waiting_key, high_key, low_key}) do
  local at, found = {}, 0
  local len = redis.call('LLEN', list)
  for start = 0, len - 1, 1000 do
    local chunk = redis.call('LRANGE', list, start, start + 999)
    for j, e in ipairs(chunk) do
      if entry_payload(e) == payload then
        ids[#ids + 1] = entry_id(e)
        found = found + 1
        release_unique(unique_key, e)
        if header_has(e, 'R') then unlist[#unlist + 1] = e end
        if header_has(e, 'F') then steps[#steps + 1] = e end
        if #at <= 16 then
          at[#at + 1] = start + j - 1
        end
      end
    end
  end
  if found > 16 then
    local keep = {}
    for start = 0, len - 1, 1000 do
      for _, e in ipairs(redis.call('LRANGE', list, start, start + 999)) do
        if entry_payload(e) ~= payload then
          keep[#keep + 1] = e
        end
      end
    end
    redis.call('DEL', list)
    for i = 1, #keep, 1000 do
      redis.call('RPUSH', list, unpack(keep, i, math.min(i + 999, #keep)))
    end
  elseif found > 0 then
    for _, i in ipairs(at) do
      redis.call('LSET', list, i, TOMBSTONE)
    end
    redis.call('LREM', list, 0, TOMBSTONE)
  end
end
for _, e in ipairs(redis.call('ZRANGE', delayed_key, 0, -1)) do
  if entry_payload(e) == payload then
    redis.call('ZREM', delayed_key, e)
    ids[#ids + 1] = entry_id(e)
    release_unique(unique_key, e)
    if header_has(e, 'R') then unlist[#unlist + 1] = e end
    if header_has(e, 'F') then steps[#steps + 1] = e end
  end
end
local _, _, _, turned = groups_remove(gwait_key, gready_key, function(e)
  if entry_payload(e) ~= payload then return false end
  ids[#ids + 1] = entry_id(e)
  release_unique(unique_key, e)
  if header_has(e, 'R') then unlist[#unlist + 1] = e end
  if header_has(e, 'F') then steps[#steps + 1] = e end
  return true
end, nil, glimits_key)
if turned > 0 then publish(channel, 'w' .. turned) end
local removed = #ids
for i = 1, #ids, 1000 do
  errors_drop(errors_key, ids, i, math.min(i + 999, #ids))
end
local gone = outcome_unlisted(retained_key, unlist)
for i = 1, #gone, 1000 do
  publish(channel, 'x' .. table.concat(gone, ',', i, math.min(i + 999, #gone)))
end
local marked, held = {}, {}
local all = redis.call('HGETALL', procs_key)
for i = 1, #all, 2 do
  local v = all[i + 1]
  if proc_state(v) == 'a' and entry_payload(proc_task(v)) == payload then
    redis.call('HSET', procs_key, all[i], 'c' .. string.sub(v, 2))
    marked[#marked + 1] = entry_id(proc_task(v))
    if header_has(proc_task(v), 'R') then held[#held + 1] = proc_task(v) end
    if header_has(proc_task(v), 'F') then steps[#steps + 1] = proc_task(v) end
  end
end
outcome_unlisted(retained_key, held)
stat('x', removed + #marked)
stats_flush(stats_key)
if #marked > 0 then
  publish(channel, 'c' .. table.concat(marked, ','))
end
return flow_cancelled(flows_key, steps, {removed, #marked})
