-- Create a workflow in its own slot: its state ('running'), and each
-- step's: its spec (what its task is enqueued with), parents, children
-- and count of parents left. A step without parents is ready ('r') at
-- once; the others wait ('w') outside their queues until wf_release.lua
-- frees them. The caller enqueues the ready steps and then marks them
-- queued (wf_enqueued.lua).
-- A workflow of that id that exists is left as it is: one with the same
-- checksum (a retried call whose reply was lost, or that failed half way)
-- answers 'same' with its steps still ready, which the caller enqueues
-- again, idempotently; one with another answers 'taken'.
-- Each step's place in the order the caller lists them in (dependency
-- order) is kept in order, so that a part of the steps can be read at
-- the cost of that part (wf_steps.lua).
-- Returns {'new' | 'same' | 'taken', then step, spec per ready step}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local sum, keep = ARGV[1], ARGV[2] -- the workflow's checksum; how long it is kept once ended (ms)
-- Then per step, ARGV[3 + 6(i - 1) ...]: its name, spec, parents and
-- children (',' between; see kids in keys.go), its count of parents and
-- its place in the order listed (from 0).

local out = {'new'}
if redis.call('EXISTS', flow_key) == 1 then
  if redis.call('HGET', flow_key, 'sum') ~= sum then
    return {'taken'}
  end
  out[1] = 'same'
  local all = redis.call('HGETALL', steps_key)
  for i = 1, #all, 2 do
    if all[i + 1] == 'r' then
      out[#out + 1] = all[i]
      out[#out + 1] = redis.call('HGET', spec_key, all[i])
    end
  end
  return out
end
local n = (#ARGV - 2) / 6
redis.call('HSET', flow_key, 'state', 'running', 'open', n, 'keep', keep, 'sum', sum, 'created', ms(now_ms()))
-- Each hash's fields are gathered, then written a thousand a call: a
-- workflow of thousands of steps costs a few calls per hash, not per step.
local specs, lefts, parentss, states, kidss, places = {}, {}, {}, {}, {}, {}
local function put(t, field, value)
  t[#t + 1] = field
  t[#t + 1] = value
end
for i = 0, n - 1 do
  local at = 3 + 6 * i
  local name, spec, parents, kids, count = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], tonumber(ARGV[at + 4])
  local place = ARGV[at + 5]
  put(specs, name, spec)
  put(places, place, name)
  if count > 0 then
    put(lefts, name, count)
    put(parentss, name, parents)
    put(states, name, 'w')
  else
    put(states, name, 'r')
    out[#out + 1] = name
    out[#out + 1] = spec
  end
  if kids ~= '' then
    put(kidss, name, kids)
  end
end
for _, w in ipairs({{spec_key, specs}, {left_key, lefts}, {parents_key, parentss}, {steps_key, states}, {kids_key, kidss}, {order_key, places}}) do
  local key, t = w[1], w[2]
  local cmd = key == order_key and 'ZADD' or 'HSET'
  for i = 1, #t, 2000 do
    redis.call(cmd, key, unpack(t, i, math.min(i + 1999, #t)))
  end
end
return out
