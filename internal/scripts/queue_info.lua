-- Read a queue's counts and controls at one instant (a pipeline of reads
-- could see the weight counter and the processes at different times).
-- Returns {waiting (every level), delayed, in flight, dead, paused (0/1),
--          limit, rate, per (ms), extra weight in flight ('wx'),
--          oldest}: 0 for a control that is not set; oldest is when the
--          task waiting longest became due (Unix µs, Redis clock; 0 when
--          none waits): of the next task of each level and of each of the
--          first MAX_GROUPS groups to be served, the earliest;
--          groups (ready or running), groups ready, the default group
--          limit (0: none), whether it holds its sequences on a dead
--          task (0/1), the groups so held (see sequence_died), the
--          open gatherings, the tasks they hold, the aggregation
--          settings set (see AGG in common/aggregation.lua; 0 for one
--          not set, which the default is), and the groups' default turns
--          (0: none; see "Turns per group" in common/groups.lua), and
--          the most tasks a group's turn starts (0: not set, one; see
--          take_turns in dequeue.lua).
local waiting_key, delayed_key, procs_key, dead_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local meta_key, high_key, low_key, gwait_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local gready_key, grunning_key = KEYS[9], KEYS[10] -- see GROUPS in common/waiting.lua
local gather_key, gather_due_key = KEYS[11], KEYS[12] -- see AGG in common/aggregation.lua

-- Groups whose next task is read for oldest: those next to be served, a
-- bound so that the read does not grow with the number of groups (as
-- groups_list.lua's).
local MAX_GROUPS = 1000

-- When an entry (or its header) became due (µs): its 'd' field, else its
-- id (its enqueue time).
local function due_of(e)
  local h = string.match(e, '^[^:]*')
  return tonumber(header_get(h, 'd') or entry_id(h), 16)
end

-- When the task next out of a list became due (µs), or nil. Only the
-- header is copied.
local function next_due(key)
  local e = redis.call('LINDEX', key, -1)
  if not e then return nil end
  return due_of(e)
end

set_lists(waiting_key, high_key, low_key, gwait_key)
local paused, limit, rate, per, extra = queue_controls(meta_key)
local oldest = 0
for _, key in ipairs({waiting_key, high_key, low_key}) do
  local due = next_due(key)
  if due and (oldest == 0 or due < oldest) then oldest = due end
end
-- A group's tasks wait in GROUPS.wait, each group's next first (see
-- group_lib().member: '<group>\0<class><rank>' and then the entry); a group
-- with tasks waiting is in the ready set, held or not.
if redis.call('EXISTS', gwait_key) == 1 then
  for _, g in ipairs(redis.call('ZRANGE', gready_key, 0, MAX_GROUPS - 1)) do
    local m = redis.call('ZRANGEBYLEX', gwait_key, '[' .. g .. '\0', '(' .. g .. '\1', 'LIMIT', 0, 1)[1]
    if m then
      local due = due_of(string.sub(m, #g + 19))
      if due and (oldest == 0 or due < oldest) then oldest = due end
    end
  end
end
-- The groups: those in the ready set, and those with processes in flight
-- (a group with tasks waiting is one or both, see GROUPS), counted once.
local groups = redis.call('ZCARD', gready_key)
-- Those held at their limit or by their rate stay in the ready set,
-- scored +inf or past GROUP_RATE_BASE (see dequeue.lua): they are not
-- ready.
local ready = redis.call('ZCOUNT', gready_key, '-inf', '(' .. ms(GROUP_RATE_BASE))
local gm = redis.call('HMGET', meta_key, 'glimit', 'ghold', 'gdead', 'gturns', 'amax', 'adelay', 'gsize')
local running = redis.call('HGETALL', grunning_key)
for i = 1, #running, 2 do
  if not redis.call('ZSCORE', gready_key, running[i]) then groups = groups + 1 end
end
return {waiting_len(waiting_key), redis.call('ZCARD', delayed_key), redis.call('HLEN', procs_key),
  redis.call('ZCARD', dead_key), paused and 1 or 0, limit or 0, rate or 0, per or 0, extra, oldest,
  groups, ready, control_value(gm[1]) or 0, gm[2] and 1 or 0, tonumber(gm[3] or nil) or 0,
  redis.call('ZCARD', gather_due_key), redis.call('ZCARD', gather_key), tonumber(gm[5] or '') or 0, tonumber(gm[6] or '') or 0,
  control_value(gm[4]) or 0, control_value(gm[7]) or 0}
