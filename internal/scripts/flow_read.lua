-- Read what carrying workflow notices needs, in the queue's slot, for
-- several at once (a batch of carries): when each notice was written
-- (µs), or '' if it is gone (carried already), and the outcome record of
-- its task, or '' if none is kept.
-- Returns {when, record} per notice, in ARGV's order.
local flows_key, results_key = KEYS[1], KEYS[2]
-- ARGV: notice, task id, ... per notice.

local out = {}
for i = 1, #ARGV, 2 do
  local notice, id = ARGV[i], ARGV[i + 1]
  local at = redis.call('ZSCORE', flows_key, notice)
  if at then
    out[#out + 1] = ms(tonumber(at))
    out[#out + 1] = redis.call('HGET', results_key, id) or ''
  else
    out[#out + 1] = ''
    out[#out + 1] = ''
  end
end
return out
