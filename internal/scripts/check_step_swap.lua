-- Give a queued step of a running workflow, for Client.Check, the id of
-- the task that replaced its gone one (check_step_requeue.lua): only
-- while the workflow still names the old task, so a second run, or a
-- step that has ended meanwhile, changes nothing.
-- Returns 1 if it changed the id, else 0.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local step, old, new = ARGV[1], ARGV[2], ARGV[3]

if redis.call('HGET', flow_key, 'state') ~= 'running' or redis.call('HGET', steps_key, step) ~= 'q' or
    redis.call('HGET', ids_key, step) ~= old then
  return 0
end
redis.call('HSET', ids_key, step, new)
return 1
