-- Read a page of a workflow's state: the workflow's fields, then, unless
-- brief, per step of the page its name, state, task id ('' until queued),
-- parents and spec. The caller reads every page, passing each call the
-- cursor the one before answered, so that a workflow of ten thousand
-- steps holds Redis for a page's time a call, not for the whole read.
-- A page is count steps of the order kept at create (order), read from
-- its end: every step before its parents, so that a step that ends
-- between two pages is read after the children its end released. Only a
-- revival moves a step back (and a workflow created anew under its id
-- starts over): the flow's count of revivals, answered with its fields,
-- tells the caller to read again. A workflow created before order was
-- kept is paged with HSCAN of its steps (the cursor is HSCAN's, which may
-- answer a step twice). A count of 0 reads every step in this call.
-- Returns {} for a workflow unknown (or ended and expired), else
-- {state, created (ms), ended (ms, or ''), revivals, next cursor ('' once
-- the page is the last), then five values per step}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local brief = ARGV[1] == '1' -- '1': the workflow's fields only
local cursor, count = ARGV[2] or '0', tonumber(ARGV[3] or '500') -- count 0: all

local flow = redis.call('HMGET', flow_key, 'state', 'created', 'ended', 'revived')
if not flow[1] then
  return {}
end
local out = {flow[1], flow[2] or '', flow[3] or '', flow[4] or '0', ''}
if brief then
  return out
end
local names, next_ = {}, ''
local total = redis.call('ZCARD', order_key)
if total > 0 then
  -- The from-th page from the end (ZRANGE, which the ACL of
  -- docs/security.md allows, not ZREVRANGE; a page is read in one call,
  -- so its own order does not matter).
  -- A cursor past the end (a workflow of that id made anew between two
  -- pages, with fewer steps) reads nothing, not the whole order.
  local from = tonumber(cursor) or total
  if count == 0 then
    from, count = 0, total
  end
  if from < total then
    names = redis.call('ZRANGE', order_key, math.max(total - from - count, 0), total - from - 1)
  end
  if from + count < total then
    next_ = tostring(from + count)
  end
elseif count == 0 then
  names = redis.call('HKEYS', steps_key)
else
  local page = redis.call('HSCAN', steps_key, cursor, 'COUNT', count)
  for i = 1, #page[2], 2 do
    names[#names + 1] = page[2][i]
  end
  if page[1] ~= '0' then
    next_ = page[1]
  end
end
out[5] = next_
if #names == 0 then
  return out
end
-- A thousand a call (hmget): a whole read names every step.
local states, ids = hmget(steps_key, names), hmget(ids_key, names)
local parents, specs = hmget(parents_key, names), hmget(spec_key, names)
-- Only the steps the steps hash holds: an order, or an HSCAN page, may
-- name a step it no longer has (a workflow created anew under the id).
for i, step in ipairs(names) do
  if states[i] then
    out[#out + 1] = step
    out[#out + 1] = states[i]
    out[#out + 1] = ids[i] or ''
    out[#out + 1] = parents[i] or ''
    out[#out + 1] = specs[i] or ''
  end
end
return out
