-- Cancel waiting tasks (not delayed, not in flight) in bulk: those whose ids
-- are given, those of one kind, or all. Each goes as in cancel_id.lua: its
-- recorded error and its unique key with it, and a retained one unlisted and
-- announced with an 'x' event, as no outcome will come. At most limit
-- entries are looked at, in dequeue order (high, normal, low; each from its
-- front, the right end), then the tasks waiting in groups (in group order),
-- so that the script holds Redis up for a bounded time. A group left empty
-- leaves the turns, as cancel.lua's do.
-- A workflow's task leaves a 'cancelled' notice (flow_cancelled in
-- common/workflows.lua): its workflow is told by the client.
-- Returns {removed, more, then the notices written}: more is 1 when
-- entries were left unlooked at.
local waiting_key, errors_key, unique_key, high_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local low_key, stats_key, retained_key = KEYS[5], KEYS[6], KEYS[7]
local gwait_key, gready_key = KEYS[8], KEYS[9] -- see GROUPS in common/waiting.lua
local flows_key = KEYS[10] -- workflow tasks' notices (see flow_notice)
local glimits_key = KEYS[11] -- the groups' settings: a group that goes forgets its turns used
local channel, mode, limit = ARGV[1], ARGV[2], tonumber(ARGV[3]) -- mode: ids | kind | all
local first_arg = 4 -- ARGV[4...]: the ids (mode ids), or the kind (mode kind)

set_lists(waiting_key, high_key, low_key)
local want, wanted = {}, 0
if mode == 'ids' then
  for i = first_arg, #ARGV do
    if not want[ARGV[i]] then wanted = wanted + 1 end
    want[ARGV[i]] = true
  end
end
local kind = ARGV[first_arg]

local function matches(e)
  if mode == 'all' then return true end
  if mode == 'ids' then return want[entry_id(e)] == true end
  return header_get(string.match(e, '^[^:]*'), 'k') == kind -- the header only
end

local looked, found, more = 0, 0, 0
local removed = {}
local function scan(list)
  local hi = redis.call('LLEN', list) - 1
  local hit = false
  while hi >= 0 do
    if looked >= limit then
      more = 1
      break
    end
    if mode == 'ids' and found >= wanted then
      break
    end
    local lo = math.max(0, hi - 999, hi - (limit - looked) + 1)
    local chunk = redis.call('LRANGE', list, lo, hi)
    for j = #chunk, 1, -1 do
      local e = chunk[j]
      looked = looked + 1
      if matches(e) then
        redis.call('LSET', list, lo + j - 1, TOMBSTONE)
        removed[#removed + 1] = e
        found = found + 1
        hit = true
      end
    end
    hi = lo - 1
  end
  if hit then
    redis.call('LREM', list, 0, TOMBSTONE)
  end
end
if mode == 'ids' or mode == 'kind' or mode == 'all' then
  for _, list in ipairs({high_key, waiting_key, low_key}) do
    scan(list)
  end
  if more == 0 and not (mode == 'ids' and found >= wanted) then
    local taken, n, left, turned = groups_remove(gwait_key, gready_key, function(e)
      if not matches(e) then return false end
      found = found + 1
      if mode == 'ids' and found >= wanted then return 'stop' end
      return true
    end, limit - looked, glimits_key)
    for _, e in ipairs(taken) do removed[#removed + 1] = e end
    looked = looked + n
    if left then more = 1 end
    if turned > 0 then publish(channel, 'w' .. turned) end
  end
end
if #removed == 0 then
  return {0, more}
end
local ids = {}
for i, e in ipairs(removed) do
  ids[i] = entry_id(e)
  release_unique(unique_key, e)
end
for i = 1, #ids, 1000 do
  errors_drop(errors_key, ids, i, math.min(i + 999, #ids))
end
local unlisted = outcome_unlisted(retained_key, removed)
for i = 1, #unlisted, 1000 do
  publish(channel, 'x' .. table.concat(unlisted, ',', i, math.min(i + 999, #unlisted)))
end
stat('x', #removed)
stats_flush(stats_key)
return flow_cancelled(flows_key, removed, {#removed, more})
