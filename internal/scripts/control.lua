-- Change a queue's controls, for the whole fleet: pause it (dequeues hand
-- out nothing; in-flight tasks finish), resume it, or set its concurrency
-- limit (the most tasks in flight across all workers; 0 removes it).
-- Resuming, or raising or removing the limit, wakes every runtime if tasks
-- wait. A rate limit (op "rate": limit starts in any per ms; 0 removes it)
-- is set the same way, and so are a group's concurrency limit (op
-- "glimit") and rate limit (op "grate"), or with group '' every group's
-- default (see GROUPS and GROUP_RATE_BASE in common/). Op "ghold"
-- (value 1 or 0) makes the queue hold its sequences on a dead task, or
-- stop: every group so held goes on but those held by a setting of their
-- own (see sequence_died in common/groups.lua); with a group, it sets that
-- group's own setting: value 1 on, 2 off, 0 as the queue's. Op "gturns"
-- sets a group's turns, or with group '' every group's default (see
-- "Turns per group" in common/groups.lua). Op "gsize" sets the most
-- tasks one turn of a group starts, for every group of the queue (1 or 0:
-- one, the field removed; see take_turns in dequeue.lua).
-- Op "agg" sets the aggregation settings (see AGG in
-- common/aggregation.lua): the value is the most tasks per aggregated task,
-- per the longest wait in ms from a gathering's first task; 0 for either
-- puts back its default. Gatherings already open keep their deadlines.
-- A queue that does not exist (its meta hash holds no name: never made, or
-- deleted) is made only when asked to (create "1"); otherwise nothing
-- changes, so a misspelt name makes no queue.
-- The value and per are whole numbers in 0..2^53 - 1 (the client checks;
-- see control_value), stored as given.
-- Returns -1, changing nothing, for a queue that does not exist and create
-- "0"; else 1 while the queue is not yet confirmed in the registry (see
-- registered.lua): the caller then registers it; else 0.
local meta_key, waiting_key, high_key, low_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8] -- see GROUPS in common/waiting.lua
local gstarts_key = KEYS[9] -- the groups' starts in their rate windows (see GROUP_RATE_BASE)
local channel, queue = ARGV[1], ARGV[2] -- queue: its name
local op = ARGV[3] -- pause | resume | limit | rate | glimit | grate | ghold | gturns | gsize | agg
local group = ARGV[7] -- glimit, grate, ghold, gturns: the group, escaped ('' for every group's default, or the queue's setting)
local value, per = ARGV[4], ARGV[5] -- the limit (or the rate; 0 removes it), per (ms)
local create = ARGV[6] -- "1" | "0"

if create ~= '1' and redis.call('HEXISTS', meta_key, 'name') == 0 then
  return -1
end
set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
local wake_all = false
local set = value ~= '0'
if set and not control_value(value) then
  return redis.error_reply('ERR worqr control ' .. op .. ': ' .. value .. ' is not a whole number in 0..9007199254740991')
end
if op == 'pause' then
  redis.call('HSET', meta_key, 'paused', 1)
elseif op == 'resume' then
  wake_all = redis.call('HDEL', meta_key, 'paused') == 1
elseif op == 'rate' then
  if set then
    redis.call('HSET', meta_key, 'rate', value, 'per', per)
  else
    redis.call('HDEL', meta_key, 'rate', 'per')
  end
  wake_all = true
elseif op == 'agg' then
  if per ~= '0' and not control_value(per) then
    return redis.error_reply('ERR worqr control agg: ' .. per .. ' is not a whole number in 0..9007199254740991')
  end
  for _, fv in ipairs({{'amax', value}, {'adelay', per}}) do
    if fv[2] ~= '0' then
      redis.call('HSET', meta_key, fv[1], fv[2])
    else
      redis.call('HDEL', meta_key, fv[1])
    end
  end
elseif op == 'ghold' and group ~= '' then
  -- A group's own setting ('<group>:h': '1' on, '0' off; 'ghx' marks that
  -- one exists): a group no longer held by it lets its hold go.
  if value == '0' then
    redis.call('HDEL', glimits_key, group .. ':h')
  else
    redis.call('HSET', glimits_key, group .. ':h', value == '1' and '1' or '0')
    redis.call('HSET', meta_key, 'ghx', 1)
  end
  if value == '2' or (value == '0' and not redis.call('HGET', meta_key, 'ghold')) then
    wake_all = dead_holds_released(meta_key, {group}) > 0
  end
elseif op == 'ghold' then
  if set then
    redis.call('HSET', meta_key, 'ghold', 1)
  else
    redis.call('HDEL', meta_key, 'ghold')
    wake_all = dead_holds_released(meta_key, nil, nil, true) > 0
  end
elseif op == 'gturns' then
  -- Turns: the default ('gturns') or a group's own ('<group>:t'; 'gtx'
  -- marks that one exists, and goes with the last, so that the dequeues
  -- of a queue left without turns read nothing more). They hold nothing
  -- back, so nothing wakes: the next dequeue reads them. A queue left
  -- without turns forgets the turns its groups used.
  local key, field = meta_key, 'gturns'
  if group ~= '' then key, field = glimits_key, group .. ':t' end
  -- The fields of the limits hash that match pattern, each passed to
  -- each until it returns true (then this does too).
  local function scan(pattern, each)
    local cursor = '0'
    repeat
      local page = redis.call('HSCAN', glimits_key, cursor, 'MATCH', pattern, 'COUNT', 1000)
      cursor = page[1]
      for i = 1, #page[2], 2 do
        if each(page[2][i]) then return true end
      end
    until cursor == '0'
    return false
  end
  if set then
    redis.call('HSET', key, field, value)
    if group ~= '' then redis.call('HSET', meta_key, 'gtx', 1) end
  elseif redis.call('HDEL', key, field) == 1 then
    local m = redis.call('HMGET', meta_key, 'gturns', 'gtx')
    local own = m[2] ~= false
    if own and group ~= '' and not scan('*:t', function() return true end) then
      redis.call('HDEL', meta_key, 'gtx')
      own = false
    end
    if not own and (control_value(m[1]) or 1) <= 1 then
      scan('*:u', function(f) redis.call('HDEL', glimits_key, f) end)
    end
  end
elseif op == 'gsize' then
  -- It holds nothing back, so nothing wakes: the next dequeue reads it.
  if set and value ~= '1' then
    redis.call('HSET', meta_key, 'gsize', value)
  else
    redis.call('HDEL', meta_key, 'gsize')
  end
elseif op == 'glimit' then
  -- A group limit: the default ('glimit') or a group's own. A group
  -- held back (it has processes in flight and tasks waiting: held in the
  -- ready set, see dequeue.lua, or out of it) gets its turn again: the
  -- next dequeue holds it again if it is still at its limit.
  local key, field = meta_key, 'glimit'
  if group ~= '' then key, field = glimits_key, group end
  if set then
    redis.call('HSET', key, field, value)
  else
    redis.call('HDEL', key, field)
  end
  local now = ms(now_us())
  local names = {group}
  if group == '' then
    names = {}
    local running = redis.call('HGETALL', grunning_key)
    for i = 1, #running, 2 do names[#names + 1] = running[i] end
  end
  for _, g in ipairs(names) do
    local score = redis.call('ZSCORE', gready_key, g)
    if group_held(score) or (not score and #group_lib().front(g, 1) > 0) then
      redis.call('ZADD', gready_key, now, g)
      wake_all = true
    end
  end
elseif op == 'grate' then
  -- A group rate: the default ('grate') or a group's own ('<group>:r' in
  -- the limits hash; 'grx' marks that one exists). The groups it holds
  -- back by their rate get a turn now: the next dequeue holds them again
  -- if the new rate is used up too. A group left with no rate forgets its
  -- starts.
  local key, field = meta_key, 'grate'
  if group ~= '' then key, field = glimits_key, group .. ':r' end
  if set then
    redis.call('HSET', key, field, value .. '/' .. per)
    if group ~= '' then redis.call('HSET', meta_key, 'grx', 1) end
  else
    redis.call('HDEL', key, field)
  end
  local r = redis.call('HMGET', meta_key, 'grate', 'grx')
  if not r[1] and not r[2] then
    redis.call('DEL', gstarts_key)
  elseif group ~= '' and not set and not r[1] then
    redis.call('ZREMRANGEBYLEX', gstarts_key, '[' .. group .. '\0', '(' .. group .. '\1')
  end
  local now = ms(now_us())
  local held = {}
  if group == '' then
    local scored = redis.call('ZRANGEBYSCORE', gready_key, '(' .. ms(GROUP_RATE_BASE), '+inf', 'WITHSCORES')
    for i = 1, #scored, 2 do
      if group_held_until(scored[i + 1]) then held[#held + 1] = scored[i] end
    end
  elseif group_held_until(redis.call('ZSCORE', gready_key, group)) then
    held = {group}
  end
  groups_turn(gready_key, held, now)
  wake_all = true
else
  local old = control_value(redis.call('HGET', meta_key, 'limit'))
  if set then
    redis.call('HSET', meta_key, 'limit', value)
  else
    redis.call('HDEL', meta_key, 'limit')
  end
  wake_all = old ~= nil and (not set or tonumber(value) > old)
end
if wake_all then
  local waiting = waiting_len(waiting_key)
  if waiting > 0 then
    publish(channel, 'w' .. waiting)
  end
end
name_queue(meta_key, queue)
return 1 - redis.call('HEXISTS', meta_key, 'registered')
