-- Workflows, as the scripts of their tasks' queues see them (the notices
-- of their tasks' ends), and as their own slot's scripts do (ending steps
-- and workflows).

-- A workflow's task (one with an 'F' field: '<workflow id>.<step>') that
-- ended, finished (status 'ok'), dead ('dead') or cancelled ('cancelled':
-- removed while waiting, marked in flight, or of a queue deleted), or a
-- dead one requeued ('revived'), leaves a notice in the queue's flows set,
-- written in the
-- same script as its end: the workflow's state lives in a slot of its
-- own, which this script cannot reach, so the worker (or, after a crash,
-- a sweep) carries the notice there (wf_release.lua) and then removes it
-- (flow_forget.lua). Scored by when it was written (µs, Redis clock), for
-- the sweep's age and for the workflow, which records no end older than
-- the last it recorded of the step. A script that answers its clock
-- passes it as at, so that the worker that carries the notice knows
-- when it was written without reading it back.
-- Returns the notice, or nil for a task of no workflow.
local function flow_notice(flows, entry, status, at)
  if not header_has(entry, 'F') then return end
  local f = header_get(entry_split(entry), 'F')
  local notice = f .. ',' .. entry_id(entry) .. ',' .. status
  redis.call('ZADD', flows, ms(at or now_us()), notice)
  return notice
end

-- Write the 'cancelled' notice of each workflow task of entries (see
-- flow_notice) and append it to out, which the script returns so that
-- the client carries the notices at once. A plain task costs one plain
-- find.
local function flow_cancelled(flows, entries, out)
  for _, e in ipairs(entries) do
    if string.find(e, ',F', 1, true) then
      out[#out + 1] = flow_notice(flows, e, 'cancelled')
    end
  end
  return out
end

-- Workflows. A workflow's keys share the tag {wf:<id>} (WorkflowKeys in
-- internal/store/keys.go); its scripts take them all, in this order:
-- flow, steps, ids, left, kids, parents, spec, results, freed, seen.

-- The most children of ended steps one call settles (wf_release.lua):
-- a fan-out's thousands of children are settled over several calls, so
-- that none holds Redis long. finish.lua records in a call only ends
-- whose children are no more than these, leaving the others notices.
local FLOW_RELEASE_MAX = 1000

-- The children of a batch of steps that end (names, each a key of mine),
-- each once, in the order first met in their kids hash (kids_key), and
-- how many of the batch are each one's parents (down: its count of
-- parents left goes down by that). A child's '+' (it runs whatever its
-- parent's end) is dropped. With by, by[kid] is set to its last parent
-- in the batch, which frees it when the batch's ends are recorded one
-- after another. Returns nil if a child is itself in the batch (a chain
-- inside it): its end and its parent's cannot be recorded in bulk; or if
-- the children are more than FLOW_RELEASE_MAX, told once that many are
-- met, so a fan-out's parent is declined without reading all of them.
local function flow_kids_down(kids_key, names, mine, by)
  local kidss = hmget(kids_key, names)
  local kids, down = {}, {}
  for i, step in ipairs(names) do
    for kid in string.gmatch(kidss[i] or '', '[^,]+') do
      if string.sub(kid, 1, 1) == '+' then kid = string.sub(kid, 2) end
      if mine[kid] then
        return nil
      end
      if not down[kid] then
        if #kids == FLOW_RELEASE_MAX then
          return nil
        end
        kids[#kids + 1] = kid
        down[kid] = 0
      end
      down[kid] = down[kid] + 1
      if by then by[kid] = step end
    end
  end
  return kids, down
end

-- End a workflow step: its state set to st ('ok', 'dead' or 'x'), the
-- workflow's count of open steps one lower, and its deaths counted.
-- Returns the steps still open.
local function flow_step_end(flow, steps, name, st)
  redis.call('HSET', steps, name, st)
  if st == 'dead' then redis.call('HINCRBY', flow, 'dead', 1) end
  return redis.call('HINCRBY', flow, 'open', -1)
end

-- End a workflow as state ('succeeded', 'failed', 'cancelled'): its keys
-- expire once its keep has passed, and an 'e<state>' event on its channel
-- tells its waiters.
local function flow_close(keys, channel, state)
  local keep = tonumber(redis.call('HGET', keys[1], 'keep')) or 0
  redis.call('HSET', keys[1], 'state', state, 'ended', ms(now_ms()))
  for _, k in ipairs(keys) do
    redis.call('PEXPIRE', k, math.max(keep, 1))
  end
  publish(channel, 'e' .. state)
end
