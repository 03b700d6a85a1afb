-- Read a queue's groups for operators (see GROUPS in common/waiting.lua):
-- the groups with processes in flight (those of GROUPS.running) and the
-- first scan groups whose turn may come (GROUPS.ready, next served first),
-- each once, with its tasks waiting (a ZLEXCOUNT of its part of
-- GROUPS.wait: O(log N)), the slots its processes hold, its own concurrency
-- limit, and whether it is ready: a group with tasks waiting that is not
-- ready is held back at its limit (scored +inf in the ready set, or not in
-- it) or by its rate (scored past GROUP_RATE_BASE: see common/groups.lua)
-- or on its sequence's dead task (see sequence_died: those are read too, up
-- to scan of them, from the limits hash).
-- At most scan groups of each set are read, so the call is O(scan log N)
-- whatever the number of groups.
-- Returns {partial (1 when either set held more than scan), ready groups,
-- groups with processes, the default group limit (0: none), the default
-- group rate and its window (ms; 0 0: none), the default turns (0: none,
-- see "Turns per group" in common/groups.lua), the turn size (0: not
-- set, one; see take_turns in dequeue.lua), then per group: key,
-- waiting, running, own limit (0: none), ready (0/1), own rate and window
-- (0 0: none), when its rate allows its next start (µs, Redis clock; 0
-- unless held back by its rate), the id of the dead task that holds it (''
-- for none), its own turns (0: none), its own sequence-hold setting ('1'
-- on, '0' off, '' the queue's)}.
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local meta_key = KEYS[5]
local scan = tonumber(ARGV[1]) -- groups read of each set, at most

local partial = 0
local running, order = {}, {}
local cursor, seen = '0', 0
repeat
  local page = redis.call('HSCAN', grunning_key, cursor, 'COUNT', 100)
  cursor = page[1]
  for i = 1, #page[2], 2 do
    local g = page[2][i]
    if seen < scan and not running[g] then
      running[g] = tonumber(page[2][i + 1]) or 0
      order[#order + 1] = g
      seen = seen + 1
    elseif not running[g] then
      partial = 1
    end
  end
until cursor == '0' or seen >= scan
if cursor ~= '0' then partial = 1 end
-- Groups held at their limit stay in the ready set, scored +inf (see
-- group_held), so they come last in it and are not counted as ready.
if redis.call('ZCARD', gready_key) > scan then partial = 1 end
local nready = redis.call('ZCOUNT', gready_key, '-inf', '(' .. ms(GROUP_RATE_BASE))
local ready, rate_until = {}, {}
local first = redis.call('ZRANGE', gready_key, 0, scan - 1, 'WITHSCORES')
for i = 1, #first, 2 do
  local g = first[i]
  rate_until[g] = group_held_until(first[i + 1])
  ready[g] = (tonumber(first[i + 1]) or math.huge) < GROUP_RATE_BASE
  if not running[g] then order[#order + 1] = g end
end
local m = redis.call('HMGET', meta_key, 'glimit', 'grate', 'gdead', 'gturns', 'gsize')
-- Groups held on a dead task, with no task waiting or running, are read
-- from their holds.
if tonumber(m[3] or nil) then
  local listed = {}
  for _, g in ipairs(order) do listed[g] = true end
  local found = 0
  cursor = '0'
  repeat
    local page = redis.call('HSCAN', glimits_key, cursor, 'MATCH', '*:d', 'COUNT', 100)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      local g = string.sub(page[2][i], 1, -3)
      if found >= scan then
        partial = 1
      elseif not listed[g] then
        listed[g] = true
        order[#order + 1] = g
        found = found + 1
      end
    end
  until cursor == '0' or found >= scan
end
local rate_n, rate_per = group_rate(m[2])
local out = {partial, nready, redis.call('HLEN', grunning_key), control_value(m[1]) or 0, rate_n or 0, rate_per or 0,
  control_value(m[4]) or 0, control_value(m[5]) or 0}
for i = 1, #order, 1000 do
  local chunk = {unpack(order, i, math.min(i + 999, #order))}
  local limits = redis.call('HMGET', glimits_key, unpack(chunk))
  local fields = {}
  for j, g in ipairs(chunk) do fields[j] = g .. ':r' end
  local rates = redis.call('HMGET', glimits_key, unpack(fields))
  for j, g in ipairs(chunk) do fields[j] = g .. ':d' end
  local dead = redis.call('HMGET', glimits_key, unpack(fields))
  local more = {}
  for j, g in ipairs(chunk) do
    more[2 * j - 1], more[2 * j] = g .. ':t', g .. ':h'
  end
  more = redis.call('HMGET', glimits_key, unpack(more))
  for j, g in ipairs(chunk) do
    local n, per = group_rate(rates[j])
    out[#out + 1] = g
    out[#out + 1] = redis.call('ZLEXCOUNT', gwait_key, '[' .. g .. '\0', '(' .. g .. '\1')
    out[#out + 1] = running[g] or 0
    out[#out + 1] = control_value(limits[j]) or 0
    out[#out + 1] = ready[g] and 1 or 0
    out[#out + 1] = n or 0
    out[#out + 1] = per or 0
    out[#out + 1] = rate_until[g] or 0
    out[#out + 1] = dead[j] or ''
    out[#out + 1] = control_value(more[2 * j - 1]) or 0
    out[#out + 1] = more[2 * j] or ''
  end
end
return out
