-- Read a workflow's state in one go: the workflow's fields, then, unless
-- brief, per step its name, state, task id ('' until queued), parents
-- and spec. Each of the steps' hashes is read whole, in one call: a
-- workflow of thousands of steps costs a few calls, not a few per step.
-- Returns {} for a workflow unknown (or ended and expired), else
-- {state, created (ms), ended (ms, or ''), then five values per step}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local brief = ARGV[1] == '1' -- '1': the workflow's fields only

local flow = redis.call('HMGET', flow_key, 'state', 'created', 'ended')
if not flow[1] then
  return {}
end
local out = {flow[1], flow[2] or '', flow[3] or ''}
if brief then
  return out
end
-- A hash read whole, as a table by field.
local function whole(key)
  local t, all = {}, redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    t[all[i]] = all[i + 1]
  end
  return t
end
local ids, parents, spec = whole(ids_key), whole(parents_key), whole(spec_key)
local all = redis.call('HGETALL', steps_key)
for i = 1, #all, 2 do
  local step = all[i]
  out[#out + 1] = step
  out[#out + 1] = all[i + 1]
  out[#out + 1] = ids[step] or ''
  out[#out + 1] = parents[step] or ''
  out[#out + 1] = spec[step] or ''
end
return out
