-- Mark workflow steps queued once their tasks were enqueued ('r' to 'q'),
-- with their task ids. A step that has ended meanwhile (its task ran
-- already) keeps its state; one cancelled meanwhile (CancelWorkflow while
-- its enqueue was under way) is answered, so that the caller cancels its
-- task in its queue.
-- Returns {step, task id, spec, ...} per cancelled step.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key = KEYS[9], KEYS[10]
-- ARGV: step, task id, ... per step enqueued.

local out = {}
for i = 1, #ARGV, 2 do
  local step, id = ARGV[i], ARGV[i + 1]
  local st = redis.call('HGET', steps_key, step)
  if st then
    redis.call('HSETNX', ids_key, step, id)
    if st == 'r' then
      redis.call('HSET', steps_key, step, 'q')
    elseif st == 'x' then
      out[#out + 1] = step
      out[#out + 1] = id
      out[#out + 1] = redis.call('HGET', spec_key, step)
    end
  end
end
return out
