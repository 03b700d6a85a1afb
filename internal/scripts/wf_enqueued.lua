-- Mark workflow steps queued once their tasks were enqueued ('r' to 'q'),
-- with their task ids, dropping the note '^<step>' in freed of a step a
-- death's cascade made ready (wf_release.lua): Check reads it only while
-- the step is ready, and a step is ready once, so freed keeps no note of
-- a step past its enqueue. A step that has ended meanwhile (its task ran
-- already) keeps its state; one cancelled meanwhile (CancelWorkflow while
-- its enqueue was under way) is answered, so that the caller cancels its
-- task in its queue.
-- Returns {step, task id, spec, ...} per cancelled step.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
-- ARGV: step, task id, ... per step enqueued.

-- The steps' states are read, and the marks written, a thousand a call.
local out, marks, notes, noted = {}, {}, {}, false
for from = 1, #ARGV, 2000 do
  local to = math.min(from + 1999, #ARGV)
  local names = {}
  for i = from, to, 2 do
    names[#names + 1] = ARGV[i]
  end
  local states = redis.call('HMGET', steps_key, unpack(names))
  local had = redis.call('HMGET', ids_key, unpack(names))
  local ids, noting = {}, {} -- the ids not yet noted, written in one call
  for j, st in ipairs(states) do
    local step, id = ARGV[from + 2 * (j - 1)], ARGV[from + 2 * (j - 1) + 1]
    if st then
      if not had[j] and not noting[step] then
        noting[step] = true
        ids[#ids + 1] = step
        ids[#ids + 1] = id
      end
      if st == 'r' then
        marks[#marks + 1] = step
        marks[#marks + 1] = 'q'
        notes[#notes + 1] = '^' .. step
      elseif st == 'x' then
        out[#out + 1] = step
        out[#out + 1] = id
        out[#out + 1] = redis.call('HGET', spec_key, step)
      end
    end
  end
  if #ids > 0 then
    redis.call('HSET', ids_key, unpack(ids))
    noted = true
  end
end
for i = 1, #marks, 2000 do
  redis.call('HSET', steps_key, unpack(marks, i, math.min(i + 1999, #marks)))
end
for i = 1, #notes, 1000 do
  redis.call('HDEL', freed_key, unpack(notes, i, math.min(i + 999, #notes)))
end
-- A workflow that ended (cancelled while an enqueue was under way) has
-- its keys set to expire (flow_close): an ids hash made only now expires
-- with them.
if noted then
  local ttl = redis.call('PTTL', flow_key)
  if ttl > 0 and redis.call('PTTL', ids_key) == -1 then
    redis.call('PEXPIRE', ids_key, ttl)
  end
end
return out
