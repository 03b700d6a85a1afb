-- Look at one workflow for Client.Check, changing nothing: its state (''
-- when its flow hash is gone, '?' when that has none), how many of its keys exist, and how many of
-- them do not expire (an ended workflow's keys all expire: flow_close);
-- and, while it runs, each step that is ready (being enqueued) or queued,
-- with its task's id ('' if not known yet), its spec and the steps whose
-- end made it ready (its parents whose freed lists it: none for a step
-- that had no parents), with the specs of those, so that the caller can
-- ask their queues whether a notice still carries it.
-- Returns {state, keys that exist, keys that exist and do not expire,
--          {step, state, task id, spec, freed by (',' between), ...},
--          {step, spec, ...} per step named in a freed by}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]

local state = ''
if redis.call('EXISTS', flow_key) == 1 then
  state = redis.call('HGET', flow_key, 'state') or '?' -- '?': written by hand
end
local present, lasting = 0, 0
for _, k in ipairs(KEYS) do
  local ttl = redis.call('PTTL', k)
  if ttl ~= -2 then present = present + 1 end
  if ttl == -1 then lasting = lasting + 1 end
end
local steps, specs = {}, {}
if state == 'running' then
  local by = {} -- step -> the steps whose end freed it
  local freed = redis.call('HGETALL', freed_key)
  for i = 1, #freed, 2 do
    for kid in string.gmatch(freed[i + 1], '[^,]+') do
      by[kid] = by[kid] and (by[kid] .. ',' .. freed[i]) or freed[i]
    end
  end
  local all = redis.call('HGETALL', steps_key)
  for i = 1, #all, 2 do
    local step, st = all[i], all[i + 1]
    if st == 'r' or st == 'q' then
      steps[#steps + 1] = step
      steps[#steps + 1] = st
      steps[#steps + 1] = redis.call('HGET', ids_key, step) or ''
      steps[#steps + 1] = redis.call('HGET', spec_key, step) or ''
      steps[#steps + 1] = by[step] or ''
      for p in string.gmatch(by[step] or '', '[^,]+') do
        specs[p] = true
      end
    end
  end
end
local named = {}
for p in pairs(specs) do
  named[#named + 1] = p
  named[#named + 1] = redis.call('HGET', spec_key, p) or ''
end
return {state, present, lasting, steps, named}
