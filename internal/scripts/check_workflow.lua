-- Look at one workflow for Client.Check, changing nothing: its state (''
-- when its flow hash is gone, '?' when that has none), how many of its
-- keys exist, and how many of them do not expire (an ended workflow's
-- keys all expire: flow_close); and, while it runs, those of the steps
-- named that are ready (being enqueued) or queued, with their task's id
-- ('' if not known yet), their spec and the steps whose end made them
-- ready (their parents whose freed lists them; for a step a death's
-- cascade freed, whose parent the cascade cancelled, the step that died,
-- which freed names under '^<step>' (wf_release.lua); none for a step
-- that had no parents), with the specs of those, so that the caller can
-- ask their queues whether a notice still carries them.
-- The caller names the steps, a page at a time (it pages the workflow's
-- order with wf_steps.lua): the cost is the page's and the named steps'
-- parents', whatever the workflow's size. '*' names every step, for a
-- workflow created before its order was kept (read whole, as wf_state.lua
-- does). The specs of the steps named are answered whole when full is
-- '1', for their repair; else cut after their queue, as the specs of the
-- steps in a freed by always are (only their queue is asked about).
-- A look that names no step (a workflow's first, and the look that
-- confirms a release under way) answers, while the workflow runs, the
-- releases under way: the steps whose end has children left to settle
-- (a mark '@<step>' in freed, wf_release.lua), each with where its
-- release stands, its state, its task's id, when the workflow saw its
-- end (the stamp of the notice it recorded) and its spec cut after its
-- queue, so that the caller can ask its queue whether a notice still
-- carries it. They are found among freed's fields (one per step that
-- freed a child, one per step under way, and one per step a cascade
-- freed that is still ready): a look that names steps, a page at a time,
-- does not read them.
-- Returns {state, keys that exist, keys that exist and do not expire,
--          {step, state, task id, spec, freed by (',' between), ...},
--          {step, spec, ...} per step named in a freed by,
--          {step, mark, state, task id, stamp, spec, ...} per release
--          under way}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local full, first = ARGV[1] == '1', ARGV[2]
-- ARGV[2 ...]: the steps to look at (first is the first of them), or '*'.

-- A spec is {"q":<queue>,"a":...,"p":<payload>} (Go's stepSpec): cut
-- after its queue, as wf_steps.lua does, since its payload may be large.
local function queue_of(spec)
  local cut = string.find(spec, '","a":', 1, true)
  if cut then
    return string.sub(spec, 1, cut) .. '}'
  end
  return spec
end

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
if state == 'running' then
  -- Every look reads the hashes a running workflow's judgement may: one
  -- that is not a hash makes the workflow broken at its first look, not
  -- only at a page's whose step happens to read it.
  redis.call('HLEN', steps_key)
  redis.call('HLEN', freed_key)
end
local steps, specs = {}, {}
if state == 'running' and first then
  local names = {}
  if first == '*' then
    local all = redis.call('HKEYS', steps_key)
    for i = 1, #all do names[i] = all[i] end
  else
    for i = 2, #ARGV do names[#names + 1] = ARGV[i] end
  end
  -- Each parent's freed list read once, as a set: a parent of many
  -- children lists them all, and a page may name them all.
  local freed = {}
  local function freed_by(p)
    if not freed[p] then
      freed[p] = {}
      for kid in string.gmatch(redis.call('HGET', freed_key, p) or '', '[^,]+') do
        freed[p][kid] = true
      end
    end
    return freed[p]
  end
  for _, step in ipairs(names) do
    local st = redis.call('HGET', steps_key, step)
    if st == 'r' or st == 'q' then
      local by = {} -- the parents whose end freed step
      if st == 'r' then
        for p in string.gmatch(redis.call('HGET', parents_key, step) or '', '[^,]+') do
          if freed_by(p)[step] then
            by[#by + 1] = p
            specs[p] = true
          end
        end
        -- The step that died, whose notice carries a step its cascade
        -- freed: none of its parents lists it.
        local carried_by = #by == 0 and redis.call('HGET', freed_key, '^' .. step)
        if carried_by then
          by[1] = carried_by
          specs[carried_by] = true
        end
      end
      local spec = redis.call('HGET', spec_key, step) or ''
      steps[#steps + 1] = step
      steps[#steps + 1] = st
      steps[#steps + 1] = redis.call('HGET', ids_key, step) or ''
      steps[#steps + 1] = full and spec or queue_of(spec)
      steps[#steps + 1] = table.concat(by, ',')
    end
  end
end
local named = {}
for p in pairs(specs) do
  named[#named + 1] = p
  named[#named + 1] = queue_of(redis.call('HGET', spec_key, p) or '')
end
local marks = {}
if state == 'running' and not first then
  for _, f in ipairs(redis.call('HKEYS', freed_key)) do
    if string.sub(f, 1, 1) == '@' then
      local step = string.sub(f, 2)
      marks[#marks + 1] = step
      marks[#marks + 1] = redis.call('HGET', freed_key, f) or ''
      marks[#marks + 1] = redis.call('HGET', steps_key, step) or ''
      marks[#marks + 1] = redis.call('HGET', ids_key, step) or ''
      marks[#marks + 1] = redis.call('HGET', seen_key, step) or ''
      marks[#marks + 1] = queue_of(redis.call('HGET', spec_key, step) or '')
    end
  end
end
return {state, present, lasting, steps, named, marks}
