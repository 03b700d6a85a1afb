-- Read what carrying a workflow notice needs, in the queue's slot: when
-- the notice was written (µs), or '' if it is gone (carried already), and
-- the outcome record of its task, or '' if none is kept.
-- Returns {when, record}.
local flows_key, results_key = KEYS[1], KEYS[2]
local notice, id = ARGV[1], ARGV[2]

local at = redis.call('ZSCORE', flows_key, notice)
if not at then
  return {'', ''}
end
return {ms(tonumber(at)), redis.call('HGET', results_key, id) or ''}
