-- Read the results of a workflow step's parents: those that succeeded,
-- with the result each set (its end recorded by wf_release.lua).
-- Returns {found ('0'/'1'), then parent, result, ...}: found 0 for a step the
-- workflow does not have (or a workflow gone).
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local step = ARGV[1]

if not redis.call('HGET', steps_key, step) then
  return {'0'}
end
local out = {'1'}
for parent in string.gmatch(redis.call('HGET', parents_key, step) or '', '[^,]+') do
  local r = redis.call('HGET', results_key, parent)
  if r then
    out[#out + 1] = parent
    out[#out + 1] = r
  end
end
return out
