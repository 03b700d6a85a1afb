-- Read part of a workflow's steps: the workflow's fields, its count of
-- steps, of those not ended and of those dead, then limit steps from
-- place from in the order kept at create (order; dependency order), each
-- with its state, task id ('' until queued), its first max_parents
-- parents and the count of the rest, and the start of its spec, up to its
-- queue: the cost is the part's, whatever the workflow's size (one
-- step's parents are read as one value, and cut).
-- A workflow created before order was written has none: its count of
-- steps is answered as '' and no step, and the caller reads it whole
-- (wf_state.lua).
-- Returns {} for a workflow unknown (or ended and expired), else
-- {state, created (ms), ended (ms, or ''), steps (or ''), open, dead,
--  then six values per step: name, state, task id, parents (',' between,
--  cut), parents not listed, spec cut}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local from, limit, max_parents = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

local flow = redis.call('HMGET', flow_key, 'state', 'created', 'ended', 'open', 'dead')
if not flow[1] then
  return {}
end
local total = redis.call('ZCARD', order_key)
local out = {flow[1], flow[2] or '', flow[3] or '', total > 0 and tostring(total) or '', flow[4] or '0', flow[5] or '0'}
if total == 0 or limit <= 0 or from >= total then
  return out
end
local names = redis.call('ZRANGE', order_key, from, from + limit - 1)
local states = redis.call('HMGET', steps_key, unpack(names))
local ids = redis.call('HMGET', ids_key, unpack(names))
local parents = redis.call('HMGET', parents_key, unpack(names))
local specs = redis.call('HMGET', spec_key, unpack(names))
for i, name in ipairs(names) do
  local list, more = parents[i] or '', 0
  if list ~= '' then
    -- Cut after max_parents names; the rest counted by their commas.
    local at, n = 0, 0
    while n < max_parents do
      at = string.find(list, ',', at + 1, true)
      if not at then break end
      n = n + 1
    end
    if at and n == max_parents then
      local cut = at
      more = 1
      while true do
        at = string.find(list, ',', at + 1, true)
        if not at then break end
        more = more + 1
      end
      list = string.sub(list, 1, cut - 1)
    end
  end
  -- A spec is {"q":<queue>,"a":...,"p":<payload>} (Go's stepSpec): its
  -- queue is all the caller needs, and its payload may be large. A raw
  -- '","a":' ends the queue: inside a JSON string every '"' is escaped.
  local spec = specs[i] or ''
  local cut = string.find(spec, '","a":', 1, true)
  if cut then
    spec = string.sub(spec, 1, cut) .. '}'
  end
  out[#out + 1] = name
  out[#out + 1] = states[i] or ''
  out[#out + 1] = ids[i] or ''
  out[#out + 1] = list
  out[#out + 1] = tostring(more)
  out[#out + 1] = spec
end
return out
