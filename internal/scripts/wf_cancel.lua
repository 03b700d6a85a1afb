-- Cancel a running workflow: every step that has not ended is cancelled
-- ('x') and the workflow ends 'cancelled' (flow_close). Steps whose tasks
-- are queued are answered, so that the caller cancels each task in its
-- queue (its own slot); a step whose enqueue is under way is answered by
-- wf_enqueued.lua instead. A workflow that is not running is left alone.
-- Returns {state} of a workflow not running ('' if none), else
-- {'running' (the state it cancelled), then step, task id, spec per
-- queued step}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local channel = ARGV[1]

local state = redis.call('HGET', flow_key, 'state')
if state ~= 'running' then
  return {state or ''}
end
local out = {'running'}
local all = redis.call('HGETALL', steps_key)
for i = 1, #all, 2 do
  local step, st = all[i], all[i + 1]
  if st == 'q' then
    out[#out + 1] = step
    out[#out + 1] = redis.call('HGET', ids_key, step) or ''
    out[#out + 1] = redis.call('HGET', spec_key, step)
  end
  if st == 'w' or st == 'r' or st == 'q' then
    flow_step_end(flow_key, steps_key, step, 'x')
  end
end
flow_close(KEYS, channel, 'cancelled')
return out
