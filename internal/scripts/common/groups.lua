-- Groups (docs/flow-control.md): their waiting set, rates, turns, the
-- slots their processes hold and sequences held on a dead task; and
-- push_waiting, which puts any task back to wait, in its group or in its
-- list.

-- The group of an entry (its 'g' field), or nil.
local function entry_group(e)
  if not header_has(e, 'g') then return nil end
  return header_get(entry_split(e), 'g')
end

-- The entry of a member of a group waiting set, and its group (the bytes
-- before the '\0', see group_lib().member), for a script that does not know the
-- group.
local function group_member_split(m)
  local at = string.find(m, '\0', 1, true) or 0
  return string.sub(m, at + 18), string.sub(m, 1, at - 1)
end

-- Rate limits per group (docs/flow-control.md): at most n starts in any
-- window of per ms, a group's own (the field '<group>:r' of GROUPS.limits:
-- a group key holds no ':') else the default (the meta field 'grate'),
-- each stored as '<n>/<per>'; the meta field 'grx' is set once a group's
-- own rate was, so that a queue without rates reads nothing more. A
-- group's starts of its window are members '<group>\0<start µs, 16 hex
-- digits><task id>' of one sorted set scored 0 (the dequeue's gstarts key):
-- one group's lie together, oldest first. A group that used up its rate
-- waits in the ready set scored GROUP_RATE_BASE + when its next start is
-- allowed (µs, Redis clock): past every turn (a clock reading, below 2^52
-- until the year 2112) and below +inf (held at its concurrency limit). A
-- sequence whose front task waits for its retry delay is held the same
-- way, until that task is due (see retry.lua).
local GROUP_RATE_BASE = 4503599627370496
-- The score of a group held on its sequence's dead task (see sequence_died).
local GROUP_DEAD_HOLD = 9007199254740992
-- A rate as stored ('<n>/<per>'), as n and per (ms), or nil.
local function group_rate(v)
  if not v then return nil end
  local n, per = string.match(v, '^(%d+)/(%d+)$')
  n, per = control_value(n), control_value(per)
  if not n or not per then return nil end
  return n, per
end
-- Turns per group (docs/flow-control.md): a group of w turns keeps its
-- place in the ready set for w turns in a row (a turn is one task: a
-- dequeue of many gives each group whole runs of its turns, see
-- dequeue.lua) before it moves behind the others, so while groups have
-- work each takes turns in proportion to its w. w is a group's own (the field
-- '<group>:t' of GROUPS.limits) else the default (the meta field
-- 'gturns'), else 1; the meta field 'gtx' is set once a group's own was,
-- so that a queue without turns reads nothing more. A group in the
-- middle of its run keeps the turns it used in '<group>:u' as
-- '<used>/<its score>': counted only while the group still holds that
-- score (a group given a new turn since, by a limit's release or a task
-- joining it after it left the ready set, starts a new run), and dropped
-- when its run ends.
-- (dequeue.lua's group_turns reads them.)

-- When a group held back until a time (by its rate, or its front task's
-- retry delay) may start again (µs), from its score in the ready set (a
-- reply's text), or nil when it is not so held.
local function group_held_until(score)
  local v = tonumber(score or nil)
  if not v or v <= GROUP_RATE_BASE or v >= GROUP_DEAD_HOLD then return nil end
  return v - GROUP_RATE_BASE
end

-- Groups some of whose waiting tasks were removed (a set of their names)
-- leave the ready set if none waits any more, so that no dequeue spends a
-- turn on them; a group with processes in flight comes back when one
-- ends and a task waits (groups_settle), or when a task joins it. One
-- with tasks left that was held until a time (a sequence whose front
-- task waits for its retry delay, or a rate) takes a turn now: the task
-- removed may have been that front one, and the dequeue judges the rate
-- again. Returns how many groups took a turn so: the caller wakes the
-- runtimes for them (a work event naming none wakes every one), since
-- nobody polls. A group that leaves forgets the turns it used of its run
-- ('<group>:u' in glimits, when given: see "Turns per group"), as one
-- that a dequeue finds empty does.
local function groups_emptied(gwait, gready, names, glimits)
  local gone, now, turned = {}, nil, 0
  for g in pairs(names) do
    if #redis.call('ZRANGEBYLEX', gwait, '[' .. g .. '\0', '(' .. g .. '\1', 'LIMIT', 0, 1) == 0 then
      gone[#gone + 1] = g
    elseif group_held_until(redis.call('ZSCORE', gready, g)) then
      now = now or ms(now_us())
      redis.call('ZADD', gready, 'XX', now, g)
      turned = turned + 1
    end
  end
  for i = 1, #gone, 1000 do
    redis.call('ZREM', gready, unpack(gone, i, math.min(i + 999, #gone)))
    if glimits then
      local used = {}
      for j = i, math.min(i + 999, #gone) do used[#used + 1] = gone[j] .. ':u' end
      redis.call('HDEL', glimits, unpack(used))
    end
  end
  return turned
end

-- Remove the tasks waiting in groups whose entry take(e) accepts: the
-- members of gwait are looked at by rank, a page at a time, at most max of
-- them (nil: all), until take returns 'stop'; a group left empty leaves
-- the turns (groups_emptied). Returns the entries removed, the members
-- looked at, whether members were left unlooked at, and how many groups
-- groups_emptied gave a turn.
local function groups_remove(gwait, gready, take, max, glimits)
  local at, gone, groups, removed = 0, {}, {}, {}
  local left = false
  while true do
    if max and at >= max then
      left = redis.call('ZCARD', gwait) > at
      break
    end
    local n = max and math.min(1000, max - at) or 1000
    local page = redis.call('ZRANGE', gwait, at, at + n - 1)
    local stop = false
    for _, m in ipairs(page) do
      at = at + 1
      local e, g = group_member_split(m)
      local verdict = take(e)
      if verdict then
        gone[#gone + 1] = m
        groups[g] = true
        removed[#removed + 1] = e
      end
      if verdict == 'stop' then
        stop = true
        break
      end
    end
    if stop or #page < n then break end
  end
  for i = 1, #gone, 1000 do
    redis.call('ZREM', gwait, unpack(gone, i, math.min(i + 999, #gone)))
  end
  local turned = groups_emptied(gwait, gready, groups, glimits)
  return removed, at, left, turned
end

-- Whether a group's score in the ready set (a reply's text, false when
-- it has none) is that of a group held at its limit: +inf ('inf' as
-- Redis writes it).
local function group_held(score)
  return score and string.find(string.lower(score), 'inf', 1, true) ~= nil
end

-- A sequence held on a dead task (docs/flow-control.md): when the queue
-- asks for it (the meta field 'ghold'), a task of a sequence (a group
-- with a limit of 1) that dies holds its group until its dead letter is
-- requeued or deleted (by hand, by a purge, or trimmed by the dead
-- letters' bounds), or the queue stops asking. The hold is the field
-- '<group>:d' of GROUPS.limits (a group key holds no ':'), the dead
-- task's id; the meta field 'gdead' counts the holds, so that a dequeue
-- of a queue without any reads nothing more. A held group with tasks
-- waiting waits in the ready set scored GROUP_DEAD_HOLD (2^53): past every time
-- a rate or a retry delay holds a group until (below 2^53 - 2^52) and
-- below +inf; a dequeue that meets a held group with another score (a
-- task joined it after it was emptied) scores it so.

-- The task of entry e, of a group, died: if the queue holds its sequences
-- on a dead task and e's group is one, the group is held by it (the
-- first dead task holds it while it is held). Needs the group keys named
-- (set_lists). Call it before groups_settle, which would give the group
-- a turn.
local function sequence_died(meta, e)
  if not GROUPS.limits or not header_has(e, 'g') then return end
  local m = redis.call('HMGET', meta, 'ghold', 'glimit', 'ghx')
  if not m[1] and not m[3] then return end
  local g = entry_group(e)
  local own = redis.call('HMGET', GROUPS.limits, g, g .. ':h')
  -- The group's own setting ('<group>:h': '1' on, '0' off) over the
  -- queue's.
  if own[2] then
    if own[2] ~= '1' then return end
  elseif not m[1] then
    return
  end
  local limit = control_value(own[1]) or control_value(m[2])
  if limit ~= 1 then return end
  if redis.call('HSETNX', GROUPS.limits, g .. ':d', entry_id(e)) == 1 then
    redis.call('HINCRBY', meta, 'gdead', 1)
  end
  redis.call('ZADD', GROUPS.ready, 'XX', ms(GROUP_DEAD_HOLD), g)
end

-- The holds of groups (a list of names, nil: every hold) are released
-- when they are those of the dead tasks named (ids: a set of ids; nil:
-- whatever task holds them): each held group with tasks waiting gets a
-- turn now; with own, not those whose own setting holds them ('<group>:h'
-- '1': the queue's setting went off). Needs the ready set and the limits
-- hash named (set_lists). Returns how many were released. Reads nothing
-- when no group is held.
local function dead_holds_released(meta, names, ids, own)
  if not GROUPS.limits then return 0 end
  local m = redis.call('HMGET', meta, 'gdead', 'ghx')
  if not tonumber(m[1] or nil) then return 0 end
  if not names then
    names = {}
    local cursor = '0'
    repeat
      local page = redis.call('HSCAN', GROUPS.limits, cursor, 'MATCH', '*:d', 'COUNT', 1000)
      cursor = page[1]
      for i = 1, #page[2], 2 do
        local f = page[2][i]
        names[#names + 1] = string.sub(f, 1, #f - 2)
      end
    until cursor == '0'
  end
  local released = 0
  local now
  for _, g in ipairs(names) do
    local held = redis.call('HGET', GROUPS.limits, g .. ':d')
    if held and own and m[2] and redis.call('HGET', GROUPS.limits, g .. ':h') == '1' then
      held = nil
    end
    if held and (not ids or ids[held]) then
      redis.call('HDEL', GROUPS.limits, g .. ':d')
      released = released + 1
      if tonumber(redis.call('ZSCORE', GROUPS.ready, g) or nil) == GROUP_DEAD_HOLD then
        now = now or ms(now_us())
        redis.call('ZADD', GROUPS.ready, now, g)
      end
    end
  end
  if released > 0 and redis.call('HINCRBY', meta, 'gdead', -released) <= 0 then
    redis.call('HDEL', meta, 'gdead')
  end
  return released
end

-- The holds of the dead letters (entries) that left the dead letters are
-- released (see dead_holds_released). Returns how many.
local function dead_letters_gone(meta, entries)
  local names, ids = {}, {}
  for _, e in ipairs(entries) do
    if header_has(e, 'g') then
      names[#names + 1] = entry_group(e)
      ids[entry_id(e)] = true
    end
  end
  if #names == 0 then return 0 end
  return dead_holds_released(meta, names, ids)
end

-- Give the groups named a turn at score (ms() text): one ZADD per 1000.
local function groups_turn(gready, names, score)
  local args = {}
  for _, g in ipairs(names) do
    args[#args + 1] = score
    args[#args + 1] = g
  end
  for i = 1, #args, 2000 do
    redis.call('ZADD', gready, unpack(args, i, math.min(i + 1999, #args)))
  end
end

-- The group helpers of the scripts that take, put back or end tasks
-- (member, entry, front, push, freed, settle and turns_stale, below): a script
-- makes a closure for every helper it carries on every call, so these are
-- made by group_lib() on first use, in one table, and a script that meets no
-- grouped task makes none of them.
local GROUP_LIB = nil -- until group_lib() makes it
local function group_lib()
  if GROUP_LIB then return GROUP_LIB end
  local G = {}
  -- An entry's member in GROUPS.wait: its group, '\0', its class ('0'
  -- enqueued at the front, '1' high priority, '2' normal, '3' low) and its
  -- rank (16 hex digits: the task id, so that a task sent back, by a retry,
  -- a reclaim or its due time, takes its place by its enqueue; at the front
  -- the complement of front, a number, so that the last put there goes
  -- first), then the entry. G.entry cuts the entry back out.
  local CLASS = {h = '1', l = '3'}
  function G.member(g, e, front)
    if front then
      return g .. '\0' .. '0' .. string.format('%016x', 9007199254740991 - front) .. e
    end
    local id = entry_id(e)
    local class = '2'
    if header_has(e, 'p') then
      class = CLASS[header_get(entry_split(e), 'p')] or '2'
    end
    return g .. '\0' .. class .. string.rep('0', 16 - #id) .. id .. e
  end
  function G.entry(g, m) return string.sub(m, #g + 19) end

  -- The first (up to) n members of group g in GROUPS.wait.
  function G.front(g, n)
    return redis.call('ZRANGEBYLEX', GROUPS.wait, '[' .. g .. '\0', '(' .. g .. '\1', 'LIMIT', 0, n)
  end

  -- Entries of groups go to wait in their groups, and their groups become
  -- ready, each keeping its turn if it was (NX); one at its limit is let go
  -- again by the next dequeue. front: enqueued at the front, the entries
  -- listed as enqueue.lua lists them for a list's front, last task first
  -- (ids counting down): the first task is given the highest rank.
  function G.push(entries, front)
    local members, ready, seen = {}, {}, {}
    local now = ms(now_us())
    local low = front and tonumber(entry_id(entries[#entries]), 16)
    for i, e in ipairs(entries) do
      local g = header_get(entry_split(e), 'g')
      members[#members + 1] = '0'
      members[#members + 1] = G.member(g, e, front and low + i - 1)
      if not seen[g] then
        seen[g] = true
        ready[#ready + 1] = now
        ready[#ready + 1] = g
      end
    end
    for i = 1, #members, 1000 do
      redis.call('ZADD', GROUPS.wait, unpack(members, i, math.min(i + 999, #members)))
    end
    for i = 1, #ready, 1000 do
      redis.call('ZADD', GROUPS.ready, 'NX', unpack(ready, i, math.min(i + 999, #ready)))
    end
  end

  -- The slots freed, per group, by the processes ended in this script
  -- (group_released), which G.settle gives back.
  G.freed = {}

  -- Give back what the processes ended in this script held in their
  -- groups: each group's count goes down (its field goes at 0), and a
  -- group held at its limit (scored +inf in the ready set, see
  -- dequeue.lua) gets a turn again, and the runtimes parked in the idle
  -- set are woken for it. A group not in the ready set has no task
  -- waiting (one found empty leaves it, and a task that joins a group puts
  -- it back), so no group's tasks are looked at: a fixed number of calls
  -- however many groups (one HMGET, HSET and HDEL of the counts, one
  -- ZCOUNT of the groups held and, when some are, one ZMSCORE of the
  -- turns). look (Check's repair) looks at the front of
  -- each group not in the ready set too, and makes one with tasks waiting
  -- ready: a repair must not trust what it repairs.
  function G.settle(idle, channel, look)
    if next(G.freed) == nil then return end
    local names = {}
    for g in pairs(G.freed) do names[#names + 1] = g end
    local held = redis.call('HMGET', GROUPS.running, unpack(names))
    -- Their scores, read only when a group is held at its limit (or for
    -- look): Redis writes each score for Lua as text, which costs it more
    -- than a count of the held.
    local turns = {}
    if look or redis.call('ZCOUNT', GROUPS.ready, '+inf', '+inf') > 0 then
      turns = redis.call('ZMSCORE', GROUPS.ready, unpack(names))
    end
    local set, gone, ready = {}, {}, {}
    local now
    for i, g in ipairs(names) do
      local r = (tonumber(held[i] or '0') or 0) - G.freed[g]
      if r > 0 then
        set[#set + 1] = g
        set[#set + 1] = r
      elseif held[i] then
        gone[#gone + 1] = g
      end
      if group_held(turns[i]) or (look and not turns[i] and #G.front(g, 1) > 0) then
        now = now or ms(now_us())
        ready[#ready + 1] = now
        ready[#ready + 1] = g
      end
    end
    G.freed = {}
    if #set > 0 then redis.call('HSET', GROUPS.running, unpack(set)) end
    if #gone > 0 then redis.call('HDEL', GROUPS.running, unpack(gone)) end
    if #ready > 0 then
      redis.call('ZADD', GROUPS.ready, unpack(ready))
      if idle then wake_parked(idle, channel, #ready / 2) end
    end
  end

  -- The turn fields of a queue that no dequeue would read, or that one
  -- would read for nothing (Client.Check): 'gtx' with no group's own turns
  -- left, and a '<group>:u' of a queue without turns, or of a group that
  -- no longer holds the score it was counted at (out of the ready set, or
  -- given a new turn since). Every script drops them, so only a key edited
  -- by hand, or a bug, leaves one. With fix they are removed. Returns how
  -- many there were.
  function G.turns_stale(meta, glimits, gready, fix)
    local m = redis.call('HMGET', meta, 'gturns', 'gtx')
    local stale = 0
    local own = false
    local fields = {}
    local cursor = '0'
    repeat
      local page = redis.call('HSCAN', glimits, cursor, 'MATCH', '*:[tu]', 'COUNT', 1000)
      cursor = page[1]
      for i = 1, #page[2], 2 do
        local f, v = page[2][i], page[2][i + 1]
        if string.sub(f, -2) == ':t' then
          own = true
        else
          fields[#fields + 1] = f
          fields[#fields + 1] = v
        end
      end
    until cursor == '0'
    if m[2] and not own then
      stale = stale + 1
      if fix then redis.call('HDEL', meta, 'gtx') end
    end
    local turned = own or (control_value(m[1]) or 1) > 1
    for i = 1, #fields, 2 do
      local f = fields[i]
      local g = string.sub(f, 1, -3)
      local at = string.match(fields[i + 1], '^%d+/(.+)$')
      local score = redis.call('ZSCORE', gready, g)
      if not turned or not at or not score or tonumber(at) ~= tonumber(score) then
        stale = stale + 1
        if fix then redis.call('HDEL', glimits, f) end
      end
    end
    return stale
  end
  GROUP_LIB = G
  return G
end

-- Put an entry back to wait: in its group if it has one (and the script
-- named the group keys), where it takes its place by its id, else at the
-- back of its level's list (front: at its front).
local function push_waiting(e, normal, front)
  if GROUPS.wait and header_has(e, 'g') then
    group_lib().push({e}, false)
  elseif front then
    redis.call('RPUSH', list_of(e, normal), e)
  else
    redis.call('LPUSH', list_of(e, normal), e)
  end
end

-- A process of group g that held w slots ended in this script: they are
-- given back by groups_settle (if the script named the group keys).
local function group_freed(g, w)
  if GROUPS.running then
    local freed = group_lib().freed
    freed[g] = (freed[g] or 0) + w
  end
end

-- A process of entry e ended in this script: the slots it held in its
-- group, if it has one, are given back (group_freed).
local function group_released(e)
  if GROUPS.running and header_has(e, 'g') then
    -- The first ',g' is the header's: it has one.
    group_freed(string.match(e, ',g([^,:]*)'), entry_weight(e))
  end
end

-- Give back what the processes ended in this script held in their groups
-- (see G.settle); nothing ended in a group costs one compare.
local function groups_settle(idle, channel, look)
  if GROUP_LIB then GROUP_LIB.settle(idle, channel, look) end
end
