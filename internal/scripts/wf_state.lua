-- Read a workflow's state in one go: the workflow's fields, then per step
-- its name, state, task id ('' until queued), parents and spec.
-- Returns {} for a workflow unknown (or ended and expired), else
-- {state, created (ms), ended (ms, or ''), then five values per step}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key = KEYS[9], KEYS[10]

local flow = redis.call('HMGET', flow_key, 'state', 'created', 'ended')
if not flow[1] then
  return {}
end
local out = {flow[1], flow[2] or '', flow[3] or ''}
local all = redis.call('HGETALL', steps_key)
for i = 1, #all, 2 do
  local step = all[i]
  out[#out + 1] = step
  out[#out + 1] = all[i + 1]
  out[#out + 1] = redis.call('HGET', ids_key, step) or ''
  out[#out + 1] = redis.call('HGET', parents_key, step) or ''
  out[#out + 1] = redis.call('HGET', spec_key, step) or ''
end
return out
