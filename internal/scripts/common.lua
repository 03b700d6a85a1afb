-- Prepended to every worqr script (see scripts.go).
--
-- Time comes from the Redis server so that every lease is judged by one
-- clock per slot, never by a client's. Scores and ids are formatted with
-- %.0f / %x because Lua numbers are doubles and tostring() may print them
-- in exponent form.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Events go out on the queue's channel, which shares its hash tag: with
-- SPUBLISH on Redis Cluster (a shard channel, heard only on the queue's own
-- shard) and PUBLISH elsewhere. scripts.go sets PUBLISH_COMMAND above.
local function publish(channel, message)
  redis.call(PUBLISH_COMMAND, channel, message)
end

local function ms(n)
  return string.format('%.0f', n)
end

-- A lease is live while its expiry score lies in the future.
local function lease_live(leases, worker, now)
  local score = redis.call('ZSCORE', leases, worker)
  return score and tonumber(score) > now
end

-- What a reclaimer needs from the worker registry (see reclaim.go): its
-- first two live leases, as {worker, expiry (ms), ...} (the first that is
-- not a caller's own is the next to run out), and up to limit workers
-- other than self whose lease expired and that no peer has claimed (claims
-- in reclaiming, see expired.lua; those run out go here), and whether
-- such a worker waits (1, else 0), self included (limit 0 asks only
-- that). Only the front of the registry is read: while nobody has
-- expired, which is the usual case, that is one ZRANGE of its first two
-- entries.
local function registry_front(workers, reclaiming, self, now, limit)
  local front = redis.call('ZRANGE', workers, 0, 1, 'WITHSCORES')
  local dead, unclaimed = {}, 0
  if front[2] and tonumber(front[2]) <= now then
    local claimed = redis.call('ZCARD', reclaiming)
    if claimed > 0 then
      redis.call('ZREMRANGEBYSCORE', reclaiming, '-inf', ms(now))
      claimed = redis.call('ZCARD', reclaiming)
    end
    -- A claim is made only on an expired lease, which is never renewed,
    -- and goes with its worker: every claim is of an expired worker, so
    -- one waits unclaimed exactly when more have expired than are
    -- claimed, that is when an expired entry lies past the first claimed
    -- ones. One call however many are claimed (a call per claim here once
    -- made every renewal of a starved fleet cost hundreds); not ZCOUNT,
    -- which a restricted ACL user (see the README) is not granted.
    if #redis.call('ZRANGEBYSCORE', workers, '-inf', ms(now), 'LIMIT', claimed, 1) > 0 then
      unclaimed = 1
    end
    if unclaimed > 0 and limit > 0 then
      local taken = {}
      if claimed > 0 then
        for _, w in ipairs(redis.call('ZRANGE', reclaiming, 0, -1)) do
          taken[w] = true
        end
      end
      -- Enough expired workers for limit unclaimed ones besides self.
      local expired = redis.call('ZRANGEBYSCORE', workers, '-inf', ms(now), 'LIMIT', 0, limit + claimed + 1)
      for _, w in ipairs(expired) do
        if #dead == limit then break end
        if w ~= self and not taken[w] then
          dead[#dead + 1] = w
        end
      end
    end
    front = redis.call('ZRANGEBYSCORE', workers, '(' .. ms(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
  end
  return front, dead, unclaimed
end

-- Task entries: a header, ':', then the payload. The header is the task id
-- in hex, then optional fields ',<letter><value>', values free of ',' and
-- ':'. internal/store/records.go lays out every field, and every other
-- value the scripts store: a letter the scripts use is listed there
-- (HeaderFields; a test holds them to it).
local function entry_id(e) return string.match(e, '^[^,:]*') end
local function entry_payload(e)
  local c = string.find(e, ':', 1, true)
  if not c then return e end
  return string.sub(e, c + 1)
end

-- Whether an entry is task id's: its header starts with the id, then ','
-- or ':'. Unlike entry_id it copies nothing, however long the entry.
local function entry_is(e, id)
  local n = #id
  local b = string.byte(e, n + 1)
  return (b == 44 or b == 58) and string.sub(e, 1, n) == id -- ',' or ':'
end

-- An entry with its payload cut to its first n bytes (n < 0: whole), and
-- the payload's whole size: listings answer with these, so that a reply
-- grows with n, not with the payloads. at (default 1) is where the entry
-- starts in e: a process record is cut in place, without a copy of its
-- entry. (A value without a header is all payload.)
local function entry_cut(e, n, at)
  at = at or 1
  local c = string.find(e, ':', at, true) or (at - 1)
  local size = #e - c
  if n >= 0 and size > n then
    e = string.sub(e, 1, c + n)
  end
  return e, size
end

-- How many entries a scan reads with its next call, so that one call holds
-- about a megabyte of them (or room bytes, if less), judged by those read
-- so far (read bytes in seen entries); the first call reads one. From 1
-- to 256: a script that reads large entries holds about one at a time.
local function chunk_size(seen, read, room)
  if seen == 0 or read <= 0 then return 1 end
  local k = math.floor(math.min(1048576, room) * seen / read)
  return math.max(1, math.min(256, k))
end

-- Split an entry into header and payload. (A value without a header,
-- queued by a worqr before task ids, is given the header '0'.)
local function entry_split(e)
  local c = string.find(e, ':', 1, true)
  if not c then return '0', e end
  return string.sub(e, 1, c - 1), string.sub(e, c + 1)
end

-- The value of a header field, or nil.
local function header_get(h, letter)
  local v = string.match(h, ',' .. letter .. '([^,]*)')
  return v
end

-- The header with a field set to value (removed when value is nil).
local function header_set(h, letter, value)
  local s, f = string.find(h, ',' .. letter .. '[^,]*')
  if s then
    h = string.sub(h, 1, s - 1) .. string.sub(h, f + 1)
  end
  if value == nil then return h end
  return h .. ',' .. letter .. value
end

-- Whether an entry's header has a field: two plain finds, no copy (for the
-- hot paths).
local function header_has(e, letter)
  local f = string.find(e, ',' .. letter, 1, true)
  return f ~= nil and f < (string.find(e, ':', 1, true) or 0)
end

-- The number of starts an entry counts (see entry_ran).
local function entry_attempts(e)
  local h = entry_split(e)
  local a = header_get(h, 'a')
  if not a then return 0 end
  return tonumber(a) or 0
end

-- The entry of a task whose process ended and that goes back to waiting
-- (or to the dead letters): its count of starts one higher. A process
-- record keeps the entry as it was when the task was dequeued, so a
-- dequeue rewrites nothing; the count is raised only on the way back.
local function entry_ran(e)
  local h, payload = entry_split(e)
  return header_set(h, 'a', entry_attempts(e) + 1) .. ':' .. payload
end

-- Task ids count up from the Redis clock in microseconds: the first of n
-- new ids is the clock, or one past the last id given if that is later, so
-- ids are unique in their queue even after it is deleted and made again,
-- and each tells when its task was enqueued. now is the clock (µs), if the
-- caller has it. Returns the first (a number).
local function next_task_ids(meta, n, now)
  local last = tonumber(redis.call('HGET', meta, 'tid') or '0')
  local first = math.max(now or now_us(), last + 1)
  redis.call('HSET', meta, 'tid', string.format('%.0f', first + n - 1))
  return first
end

-- procs hash values: one state byte, the 36-byte owner id, then the task
-- entry.
local OWNER_LEN = 36
local function proc_state(v) return string.sub(v, 1, 1) end
local function proc_owner(v) return string.sub(v, 2, 1 + OWNER_LEN) end
local function proc_task(v) return string.sub(v, 2 + OWNER_LEN) end

-- Replaces list elements that are to be removed, before one LREM of it.
local TOMBSTONE = '\0worqr:removed'

-- What finish and stop report about the process they removed.
local STATE_CODE = {a = 1, c = 2, d = 3}

-- A deleted queue keeps its meta hash, which holds the process id counter,
-- only while processes of it remain in flight: ids must stay unique among
-- the processes that exist. Called after removing processes.
--
-- Its task id and process id counters may run ahead of the clock (a
-- batch takes many ids at once), and a queue made again restarts them from
-- the clock: until the clock has passed them, the counters alone stay,
-- expiring then, so that no id is given out twice.
local function drop_meta_if_gone(procs, meta)
  if redis.call('HEXISTS', meta, 'name') == 0 and redis.call('HLEN', procs) == 0 then
    local ahead = math.max(tonumber(redis.call('HGET', meta, 'tid') or '0') or 0,
      tonumber(redis.call('HGET', meta, 'seq') or '0') or 0)
    local now = now_us()
    if ahead < now then
      redis.call('DEL', meta)
    else
      redis.call('PEXPIRE', meta, math.floor((ahead - now) / 1000) + 1)
    end
  end
end

-- A queue made (again) keeps its meta hash for good.
local function name_queue(meta, name)
  if redis.call('HSETNX', meta, 'name', name) == 1 then
    redis.call('PERSIST', meta)
  end
end

-- The last process id given out in a queue (hex), "0" if none: cancel and
-- delete events carry it, so a worker applies them only to processes that
-- existed when the script ran.
local function last_pid(meta)
  local seq = redis.call('HGET', meta, 'seq')
  if not seq then return '0' end
  return string.format('%x', tonumber(seq))
end

-- Priorities: a task enqueued with a priority other than normal carries a
-- 'p' field ('h' high, 'l' low) and waits in its level's own list; dequeues
-- take from high, then normal, then low. A script that puts tasks back or
-- counts what waits names the lists first (set_lists): then list_of and
-- waiting_len see all three.
local PRIO = {}
-- Groups (docs/flow-control.md): a task enqueued with a group key carries
-- a 'g' field, the key as the client escaped it (free of ',', ':', '%'
-- and bytes up to ' ', so free of the '\0' below), and waits, not in a
-- list, but in GROUPS.wait: one sorted set for all the queue's groups, its
-- members all scored 0 and so sorted by their bytes,
-- '<group>\0<class><rank><entry>' (see group_lib().member): one group's tasks lie
-- together, in the order they are to start, and ZRANGEBYLEX finds a
-- group's front in O(log N) without a key per group (a key computed in a
-- script is not allowed on Redis Cluster). GROUPS.ready holds the groups
-- whose front may start, scored by their turn (the Redis clock, µs, when
-- they last started a task or became ready): dequeue.lua serves the lowest
-- first, one task each. GROUPS.running counts the slots each group's
-- processes hold (absent at 0), and GROUPS.limits holds the groups' own
-- concurrency limits (the meta field 'glimit' is the default). A script
-- that puts tasks back or ends processes names these keys with set_lists;
-- one that does not sees grouped entries as plain ones (they then wait in
-- the lists, still carrying their group).
local GROUPS = {}
local function set_lists(normal, high, low, gwait, gready, grunning, glimits)
  PRIO.n, PRIO.h, PRIO.l = normal, high, low
  GROUPS.wait, GROUPS.ready, GROUPS.running, GROUPS.limits = gwait, gready, grunning, glimits
end

-- The list an entry waits in: its level's, else normal.
local function list_of(e, normal)
  if PRIO.h and header_has(e, 'p') then
    local p = header_get(entry_split(e), 'p')
    if p == 'h' then return PRIO.h end
    if p == 'l' then return PRIO.l end
  end
  return normal
end

-- How many tasks wait, at every level.
local function waiting_len(normal)
  local n = redis.call('LLEN', normal)
  if PRIO.h then
    n = n + redis.call('LLEN', PRIO.h) + redis.call('LLEN', PRIO.l)
  end
  if GROUPS.wait then
    n = n + redis.call('ZCARD', GROUPS.wait)
  end
  return n
end

-- Whether any task waits, at any level or in any group: one call.
local function any_waiting(normal)
  if not PRIO.h then return redis.call('LLEN', normal) > 0 end
  if GROUPS.wait then
    return redis.call('EXISTS', normal, PRIO.h, PRIO.l, GROUPS.wait) > 0
  end
  return redis.call('EXISTS', normal, PRIO.h, PRIO.l) > 0
end

-- A control's stored value (the meta fields 'limit', 'rate' and 'per') as a
-- number, or nil unless it is a whole number in 1..2^53 - 1: the scripts
-- write no other (a control of 0 is removed), and a Lua number (a double)
-- holds no larger one exactly. A value written otherwise (by hand, or by a
-- worqr that stored large limits as doubles) is not enforced, reads as
-- unset, and Client.Check reports it (check_queue.lua).
local function control_value(v)
  if not v or #v > 16 or not string.find(v, '^[1-9]%d*$') then return nil end
  local n = tonumber(v)
  if n > 9007199254740991 then return nil end
  return n
end

-- The queue controls kept in its meta hash: 'paused' (any value), 'limit'
-- (the most weight in flight across the fleet: see entry_weight), and
-- 'rate' and 'per' (at most rate starts in any per ms).
-- Returns paused, limit, rate, per (nil when none), the extra weight in
-- flight ('wx', see entry_weight; 0 when none), and, since a dequeue that
-- reads the controls goes on to start processes, the process id counter
-- ('seq', see start_procs; false when none), read in the same call.
local function queue_controls(meta)
  local c = redis.call('HMGET', meta, 'paused', 'limit', 'rate', 'per', 'wx', 'seq')
  return c[1] ~= false and c[1] ~= nil, control_value(c[2]), control_value(c[3]), control_value(c[4]),
    tonumber(c[5] or nil) or 0, c[6]
end

-- Slots freed in a queue with a concurrency limit: wake up to n runtimes
-- parked in the idle set (a runtime the limit held back parks there), if
-- tasks wait. Without a limit nobody waits for a slot: busy runtimes come
-- back by themselves.
-- Wake up to n + 1 runtimes parked in the idle set, if any: nobody else
-- waits for a slot.
local function wake_parked(idle, channel, n)
  local parked = redis.call('ZPOPMIN', idle, n + 1)
  if #parked == 0 then return end
  local ids = {}
  for i = 1, #parked, 2 do ids[#ids + 1] = parked[i] end
  publish(channel, 'w' .. n .. ':' .. table.concat(ids, ','))
end

local function slots_freed(meta, waiting, idle, channel, n)
  if n <= 0 or not redis.call('HGET', meta, 'limit') then return end
  if not any_waiting(waiting) then return end
  wake_parked(idle, channel, n)
end

-- Task weights: a task enqueued with a weight w of 2 or more carries a 'w'
-- field and holds w of its queue's concurrency slots while in flight. The
-- meta field 'wx' keeps the sum of w - 1 over the queue's processes (absent
-- when 0), so that HLEN(procs) + wx is the weight in flight: tasks without
-- a weight cost one header_has when they start and end, nothing more.
-- Every script that adds or removes processes calls weight_moved.
local function entry_weight(e)
  if not header_has(e, 'w') then return 1 end
  local w = tonumber(header_get(entry_split(e), 'w'))
  if not w or w < 1 then return 1 end
  return math.floor(w)
end

-- Processes whose extra weight (the sum of w - 1) is x were added (x > 0)
-- or removed (x < 0).
local function weight_moved(meta, x)
  if x == 0 then return end
  if redis.call('HINCRBY', meta, 'wx', x) <= 0 then
    redis.call('HDEL', meta, 'wx')
  end
end

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

-- The member of the group waiting set gwait that holds task id, found by
-- ZSCAN: Redis matches the members ('<id>' then ',' or ':', glob
-- characters escaped), and the script reads only those that match, so
-- the search copies no payload it does not return. max bounds the members
-- looked at (ZSCAN's COUNT, a hint; nil: no bound). Returns the member or
-- nil, and whether the bound stopped the search before the end.
local function group_find(gwait, id, max)
  local pattern = '*' .. (string.gsub(id, '[%*%?%[%]\\]', '\\%0')) .. '[,:]*'
  local cursor, looked = '0', 0
  repeat
    if max and looked >= max then return nil, true end
    local page = redis.call('ZSCAN', gwait, cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor, looked = page[1], looked + 1000
    local found = page[2]
    for i = 1, #found, 2 do
      if entry_is(group_member_split(found[i]), id) then return found[i], false end
    end
  until cursor == '0'
  return nil, false
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
  -- ZMSCORE of the turns). look (Check's repair) looks at the front of
  -- each group not in the ready set too, and makes one with tasks waiting
  -- ready: a repair must not trust what it repairs.
  function G.settle(idle, channel, look)
    if next(G.freed) == nil then return end
    local names = {}
    for g in pairs(G.freed) do names[#names + 1] = g end
    local held = redis.call('HMGET', GROUPS.running, unpack(names))
    local turns = redis.call('ZMSCORE', GROUPS.ready, unpack(names))
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

-- Aggregation (the Aggregate enqueue option): a queue's gathering tasks
-- wait in one sorted set, all scored 0, as '<key>\0<entry>', so that each
-- key's tasks lie together in id order; an open gathering's deadline (µs,
-- Redis clock) is in another, key -> deadline, which promote.lua reads as
-- it reads the delayed set; and its size in a hash, key -> the bytes its
-- tasks take in the aggregated task's payload (see AGG.size), so that a
-- flush keeps that payload within the client's task size bound without
-- reading the tasks. A key holds no NUL byte (the client checks).
-- The queue's meta hash may hold its settings: 'amax' tasks at most per
-- aggregated task, 'adelay' ms at most from a gathering's first task to
-- its flush; AGG.max and AGG.delay when not set (as the client's
-- DefaultAggregateMaxSize and DefaultAggregateMaxDelay say). One table,
-- so that the helpers cost a script's top level one local.
local AGG = {max = 100, delay = 60000}

-- The queue's settings: max, delay (ms).
function AGG.settings(meta)
  local v = redis.call('HMGET', meta, 'amax', 'adelay')
  return tonumber(v[1] or '') or AGG.max, tonumber(v[2] or '') or AGG.delay
end

-- The tasks gathered under key so far.
function AGG.count(gather, key)
  return redis.call('ZLEXCOUNT', gather, '[' .. key .. '\0', '(' .. key .. '\1')
end

-- The bytes entry e takes in an aggregated task's payload:
-- '<id>,<payload length>:<payload>', counted without copying the payload.
function AGG.size(e)
  local c = string.find(e, ':', 1, true)
  local p = #e - c
  return #string.match(e, '^[^,:]*') + 2 + #tostring(p) + p
end

-- The bytes key's gathered tasks take as members, as the size hash
-- holds them; measured when it holds none (a gathering from before it
-- was kept, or one Check repaired).
function AGG.bytes(gather, sizes, key)
  local v = redis.call('HGET', sizes, key)
  if v then return tonumber(v) or 0 end
  local b = 0
  for _, m in ipairs(redis.call('ZRANGEBYLEX', gather, '[' .. key .. '\0', '(' .. key .. '\1')) do
    b = b + AGG.size(string.sub(m, #key + 2))
  end
  return b
end

-- The keys whose gathering holds tasks but has no deadline, which would
-- never be flushed by time: one ZRANGEBYLEX per key (O(K log N) for K
-- keys), each reading one of its tasks.
function AGG.undue(gather, due)
  local out, from = {}, '-'
  while true do
    local m = redis.call('ZRANGEBYLEX', gather, from, '+', 'LIMIT', 0, 1)[1]
    if not m then return out end
    local key = string.match(m, '^[^%z]*')
    if not redis.call('ZSCORE', due, key) then out[#out + 1] = key end
    from = '[' .. key .. '\1'
  end
end

-- Flush key's gathering: its first tasks (in id order), max at most and
-- limit bytes at most in the payload (at least one, however large), become
-- one task of id id (hex), with the header fields of the first of them and
-- 'A<count>', whose payload is each member, in order, as
-- '<id>,<payload length>:<payload>'; it goes to wait as push_waiting puts
-- it (set_lists first). The members go; so does the deadline, when none
-- is left. more, when given, are entries of tasks newer than every one
-- gathered, not stored (an enqueue's own), from its index from (1 when
-- nil) on: they come after the stored ones, in their order, and count
-- among the max and the limit (none when nil or 0). Returns the members
-- flushed (0: the gathering was empty), how many of more they took, and
-- their bytes.
function AGG.flush(gather, due, key, max, id, normal, more, limit, from)
  more = more or {}
  if not limit or limit <= 0 then limit = math.huge end
  local parts, fields, bytes, stored, used = {}, nil, 0, 0, 0
  local function take(e)
    local c = string.find(e, ':', 1, true)
    local h = string.sub(e, 1, c - 1)
    local size = AGG.size(e)
    if #parts >= max or (#parts > 0 and bytes + size > limit) then return false end
    if #parts == 0 then fields = string.match(h, '^[^,]*(.*)$') end
    parts[#parts + 1] = entry_id(h) .. ',' .. (#e - c) .. ':' .. string.sub(e, c + 1)
    bytes = bytes + size
    return true
  end
  -- The stored tasks are read a few at a time: the bound may take far
  -- fewer than max of them, and each may be large.
  local lo, first, last, full = '[' .. key .. '\0', nil, nil, false
  while not full and #parts < max do
    local got = redis.call('ZRANGEBYLEX', gather, lo, '(' .. key .. '\1', 'LIMIT', 0, math.min(max - #parts, 16))
    if #got == 0 then break end
    for _, m in ipairs(got) do
      if not take(string.sub(m, #key + 2)) then full = true break end
      stored = stored + 1
      first, last = first or m, m
    end
    lo = '(' .. last
  end
  if not full then
    for j = from or 1, #more do
      if not take(more[j]) then break end
      used = used + 1
    end
  end
  if #parts == 0 then
    redis.call('ZREM', due, key)
    return 0, 0, 0
  end
  if stored > 0 then
    redis.call('ZREMRANGEBYLEX', gather, '[' .. first, '[' .. last)
  end
  if AGG.count(gather, key) == 0 then redis.call('ZREM', due, key) end
  push_waiting(id .. fields .. ',A' .. #parts .. ':' .. table.concat(parts), normal)
  return #parts, used, bytes
end

-- A process of entry e ended in this script: the slots it held in its
-- group, if it has one (and the script named the group keys), are given
-- back by groups_settle.
local function group_released(e)
  if GROUPS.running and header_has(e, 'g') then
    local freed = group_lib().freed
    -- The first ',g' is the header's: it has one.
    local g = string.match(e, ',g([^,:]*)')
    freed[g] = (freed[g] or 0) + entry_weight(e)
  end
end

-- Give back what the processes ended in this script held in their groups
-- (see G.settle); nothing ended in a group costs one compare.
local function groups_settle(idle, channel, look)
  if GROUP_LIB then GROUP_LIB.settle(idle, channel, look) end
end


-- New processes of worker for tasks (entries in list order, the first out
-- last, as dequeue takes them): each gets an id and a record in procs, and
-- the weight they add is counted. Process ids are the Redis clock in
-- microseconds, bumped by one to stay unique, as task ids are: so a
-- process tells when it started (the poison-pill guard reads it, and the
-- client the wait and run for the stats), and a queue deleted and made
-- again never reuses an id (see drop_meta_if_gone).
-- One HGET and one HSET of the id counter and one HSET per 500 processes
-- however many there are. start_us is the time (µs), if the caller has it;
-- last the counter's value ('seq'), if the caller read it (false when it
-- has none; nil: not read, so read here); and sets, if given, a list of
-- meta fields and values the caller writes in one HSET of its own, which
-- the counter joins instead of being written here.
-- Returns their ids in start order (the first out first) and the time.
local function start_procs(procs, meta, worker, tasks, start_us, last, sets)
  local n = #tasks
  start_us = start_us or now_us()
  if last == nil then
    last = redis.call('HGET', meta, 'seq')
  end
  local seq = math.max(start_us, (tonumber(last or '0') or 0) + 1) - 1
  if sets then
    sets[#sets + 1] = 'seq'
    sets[#sets + 1] = ms(seq + n)
  else
    redis.call('HSET', meta, 'seq', ms(seq + n))
  end
  local pids, fields = {}, {}
  local added = 0 -- the extra weight of the new processes
  -- Per task: only an entry with a ',' can have a weight (see
  -- entry_weight); the usual one costs no call of it.
  local format, find, head = string.format, string.find, 'a' .. worker
  -- The ids count up by one: up to 16 in a row share every hex digit but
  -- the last, so one string.format serves them all (what
  -- string.format('%x', seq) gives, at half the cost).
  local high -- seq's hex digits but the last ('' below 16)
  for i = n, 1, -1 do
    seq = seq + 1
    local d = seq % 16
    if d == 0 or not high then
      high = seq >= 16 and format('%x', (seq - d) / 16) or ''
    end
    local pid, t = high .. string.sub('0123456789abcdef', d + 1, d + 1), tasks[i]
    local j = n - i + 1
    pids[j] = pid
    fields[2 * j - 1] = pid
    fields[2 * j] = head .. t
    if find(t, ',', 1, true) then
      added = added + entry_weight(t) - 1
    end
  end
  -- unpack puts every value on the Lua stack, which holds a few thousand.
  for i = 1, #fields, 1000 do
    redis.call('HSET', procs, unpack(fields, i, math.min(i + 999, #fields)))
  end
  weight_moved(meta, added)
  return pids, start_us
end

-- A task that held a unique key while alive ('u' field: the key's sha1)
-- gives it up when it ends.
local function release_unique(unique, entry)
  if header_has(entry, 'u') then
    local sha = header_get(entry_split(entry), 'u')
    if redis.call('HGET', unique, sha) == entry_id(entry) then
      redis.call('HDEL', unique, sha)
    end
  end
end

-- A task that goes back to waiting (a retry, a requeue, a reclaim, a dead
-- letter requeued) or waits delayed carries a 'd' field: when it became
-- (or becomes) due, in µs, hex; the stats measure its wait from then
-- rather than from its enqueue (its id): see Task.Since in
-- internal/store/records.go, which reads it from the dequeue reply.
local function entry_due(e, due_us)
  local h, payload = entry_split(e)
  return header_set(h, 'd', string.format('%x', due_us)) .. ':' .. payload
end
local function entry_due_now(e) return entry_due(e, now_us()) end

-- Stats (README, "Stats"): a queue's stats hash holds the current minute
-- and two rings of time slots: minute slots 'm0'..'m359' (6 h) and hour
-- slots 'h0'..'h167' (7 d). A slot's stamp field ('m17') is the minute
-- (hour) since the epoch it holds, by the Redis clock, and its values are
-- fields '<slot>:<name>': a counter (e enqueued, s started, f finished, r
-- retried, q requeued, d dead, k reclaimed, x cancelled: the stats hash's
-- own names, unrelated to the header letters), a histogram
-- bucket ('w<k>' wait, 'u<k>' run: values v µs with 2^(k-1) < v <= 2^k, k
-- in 0..36, the last one open) or a sum ('ws', 'us', µs); or a count of
-- one kind of task ('f/<kind>' finished, 'r/<kind>' retried, 'd/<kind>'
-- dead: see stats_kinds_map).
--
-- Scripts write the current minute only: its values are the fields
-- 'c:<name>', and 'cur' is the minute they hold. The first write of a new
-- minute moves them to minute cur's slot of the minute ring and adds them
-- to its hour's slot (stats_roll). A reader takes 'c' as minute cur.
-- STATS (set by scripts.go) false makes all of it a no-op.
--
-- Who counts what: the hot path (enqueued, from the enqueue reply;
-- started and the waits, counted from the dequeue reply; finished,
-- retried and the runs, from the finish and retry replies, which carry the
-- Redis clock) is counted by the client, which adds it here about once a
-- second per queue, in an argument of an enqueue, dequeue, finish or retry
-- call it makes anyway (stats_add; see internal/store/statsbuf.go): a
-- script call costs about 0.75 µs per number it passes to Redis, too much
-- to spend on every call. The rarer events (periodic ticks' enqueues,
-- requeued, dead, reclaimed, cancelled, and the runs of
-- processes buried or requeued) are counted by their scripts (stat,
-- stat_run) and written once, at the end (stats_flush): one HMGET and one
-- HSET however many tasks a call handled.
local STATS_MINUTES, STATS_HOURS, STATS_TOP = 360, 168, 36
local stats_acc = {} -- value name -> count to add to the current minute
-- Count n under a value name; with entry (the task counted), under
-- '<name>/<kind>' too if the task has a kind.
local function stat(name, n, entry)
  if STATS and n ~= 0 then
    stats_acc[name] = (stats_acc[name] or 0) + n
    if entry then
      local kind = header_get(entry_split(entry), 'k')
      if kind and kind ~= '' then
        name = name .. '/' .. kind
        stats_acc[name] = (stats_acc[name] or 0) + n
      end
    end
  end
end

-- The histogram bucket of a duration of us µs. internal/store/statsbuf.go
-- has the same function in Go (statsBucket): change both or neither.
local function stats_bucket(us)
  if us <= 1 then return 0 end
  local m, e = math.frexp(us)
  if m == 0.5 then e = e - 1 end
  if e > STATS_TOP then return STATS_TOP end
  return e
end

-- Count a run of us µs (a process that its holder buried or requeued).
local function stat_run(us)
  if not STATS then return end
  if us < 0 then us = 0 end
  stat('u' .. stats_bucket(us), 1)
  stat('us', us)
end

-- The rest of the stats (reading a client's counts, writing the current
-- minute, rolling the slots) is needed about once a second per queue,
-- far less often than the scripts run: a script makes a closure for every
-- helper it carries on every call, so these are made by stats_writer on
-- first use, in one table, and a call with nothing to count makes none.
local STATS_WRITER = nil -- until stats_writer() makes it
local function stats_writer()
  if STATS_WRITER then return STATS_WRITER end
  local W = {}
  -- Every value name a slot can have.
  local function stats_value_names()
    local all = {'e', 's', 'f', 'r', 'q', 'd', 'k', 'x', 'ws', 'us'}
    for k = 0, STATS_TOP do
      all[#all + 1] = 'w' .. k
      all[#all + 1] = 'u' .. k
    end
    return all
  end

  -- Count what a client counted (internal/store/statsbuf.go): counts is
  -- space-separated '<name>=<n>', each name a value name and n a whole
  -- number. Names it does not know are skipped.
  local function stats_known(name)
    if #name == 1 then return string.find('esfrqdkx', name, 1, true) ~= nil end
    if name == 'ws' or name == 'us' then return true end
    if string.sub(name, 2, 2) == '/' then
      return string.find('frd', string.sub(name, 1, 1), 1, true) ~= nil and #name > 2
    end
    local k = string.match(name, '^[wu](%d%d?)$')
    return k ~= nil and tonumber(k) <= STATS_TOP
  end
  function W.add(counts)
    for name, n in string.gmatch(counts, '([^ =]+)=(%d+)') do
      if stats_known(name) then stat(name, tonumber(n)) end
    end
  end

  -- The kinds of tasks a queue counts apart (stats_acc's names
  -- '<letter>/<kind>') are bounded: the field 'kinds' of its stats hash
  -- lists those kept apart, at most STATS_KINDS, each with the hour it
  -- was last counted in ('<kind>=<hour> ...', in the order admitted).
  -- A kind not listed is admitted while there is room, else counted as
  -- '(other)', which takes no place; a kind not counted for STATS_HOURS
  -- (so in no slot's window) gives its place up, and its values are
  -- deleted from every slot then, so a slot reused later holds none. A
  -- kind that is not one the Kind option accepts is '(other)' too.
  local OTHER, STATS_KINDS = '(other)', 10
  W.KINDS = STATS_KINDS
  local function stats_kinds_read(key)
    local list, at = {}, {}
    local rec = redis.call('HGET', key, 'kinds')
    if rec then
      for kind, hour in string.gmatch(rec, '([^ =]+)=(%d+)') do
        list[#list + 1] = kind
        at[kind] = tonumber(hour)
      end
    end
    return list, at
  end
  local function stats_kind_valid(kind)
    return #kind <= 64 and string.find(kind, '^[%w%-_%./]+$') ~= nil
  end
  -- Every field of a kind's values, in every slot.
  local function stats_kind_fields(kind)
    local f = {}
    for _, l in ipairs({'f', 'r', 'd'}) do
      local name = ':' .. l .. '/' .. kind
      f[#f + 1] = 'c' .. name
      for i = 0, STATS_MINUTES - 1 do f[#f + 1] = 'm' .. i .. name end
      for i = 0, STATS_HOURS - 1 do f[#f + 1] = 'h' .. i .. name end
    end
    return f
  end
  -- Map stats_acc's kinds to those kept apart (admitting new ones) or
  -- '(other)'. Returns the 'kinds' field's new value if it changed.
  local function stats_kinds_map(key, hour)
    local kinded = {}
    for name in pairs(stats_acc) do
      if string.sub(name, 2, 2) == '/' then kinded[#kinded + 1] = name end
    end
    if #kinded == 0 then return nil end
    table.sort(kinded) -- the same admissions on a replica
    local list, at = stats_kinds_read(key)
    local changed = false
    for _, name in ipairs(kinded) do
      local n = stats_acc[name]
      local letter, kind = string.sub(name, 1, 1), string.sub(name, 3)
      if kind ~= OTHER and not at[kind] then
        if not stats_kind_valid(kind) then
          kind = OTHER
        else
          if #list >= STATS_KINDS then
            -- Places of kinds gone from every window are given up.
            local kept = {}
            for _, k in ipairs(list) do
              if hour - at[k] >= STATS_HOURS then
                redis.call('HDEL', key, unpack(stats_kind_fields(k)))
                at[k] = nil
              else
                kept[#kept + 1] = k
              end
            end
            list = kept
          end
          if #list < STATS_KINDS then
            list[#list + 1] = kind
            at[kind] = hour
            changed = true
          else
            kind = OTHER
          end
        end
      end
      if at[kind] and at[kind] ~= hour then
        at[kind] = hour
        changed = true
      end
      local to = letter .. '/' .. kind
      if to ~= name then
        stats_acc[name] = nil
        stats_acc[to] = (stats_acc[to] or 0) + n
      end
    end
    if not changed then return nil end
    local rec = {}
    for i, k in ipairs(list) do rec[i] = k .. '=' .. at[k] end
    return table.concat(rec, ' ')
  end

  -- The fields of a slot's values.
  local function stats_fields(slot, names)
    local f = {}
    for i, name in ipairs(names) do
      f[i] = slot .. ':' .. name
    end
    return f
  end

  -- A new minute (once a minute per queue at most): the values of minute
  -- cur (nil if none) go to its slot in the minute ring, which is cleared
  -- first, and are added to its hour's slot, cleared first if it held an
  -- older hour; then they are deleted. Either ring is skipped when cur is
  -- past its window.
  local function stats_roll(key, cur, minute)
    local names = stats_value_names()
    local kinds = stats_kinds_read(key)
    kinds[#kinds + 1] = OTHER
    for _, kind in ipairs(kinds) do
      names[#names + 1] = 'f/' .. kind
      names[#names + 1] = 'r/' .. kind
      names[#names + 1] = 'd/' .. kind
    end
    local cf = stats_fields('c', names)
    if cur then
      local v = redis.call('HMGET', key, unpack(cf))
      local have = {}
      for i = 1, #names do
        if v[i] then have[#have + 1] = i end
      end
      if #have > 0 and minute - cur < STATS_MINUTES then
        local mslot = 'm' .. (cur % STATS_MINUTES)
        local mf = stats_fields(mslot, names)
        redis.call('HDEL', key, unpack(mf))
        local set = {mslot, cur}
        for _, i in ipairs(have) do
          set[#set + 1] = mf[i]
          set[#set + 1] = v[i]
        end
        redis.call('HSET', key, unpack(set))
      end
      local hour = math.floor(cur / 60)
      if #have > 0 and math.floor(minute / 60) - hour < STATS_HOURS then
        local hslot = 'h' .. (hour % STATS_HOURS)
        local hf = stats_fields(hslot, names)
        local get = {hslot}
        for _, i in ipairs(have) do get[#get + 1] = hf[i] end
        local hv = redis.call('HMGET', key, unpack(get))
        local fresh = tonumber(hv[1]) == hour
        if not fresh then redis.call('HDEL', key, unpack(hf)) end
        local set = {hslot, hour}
        for j, i in ipairs(have) do
          set[#set + 1] = hf[i]
          set[#set + 1] = (tonumber(v[i]) or 0) + (fresh and tonumber(hv[j + 1]) or 0)
        end
        redis.call('HSET', key, unpack(set))
      end
    end
    redis.call('HDEL', key, unpack(cf))
  end

  -- Add what was counted to the current minute of key. now is the Redis
  -- clock in ms, if the caller has it.
  function W.flush(key, now)
    local minute = math.floor((now or now_ms()) / 60000)
    local kinds = stats_kinds_map(key, math.floor(minute / 60))
    local fields, incs = {'cur'}, {}
    for name, n in pairs(stats_acc) do
      fields[#fields + 1] = 'c:' .. name
      incs[#incs + 1] = n
    end
    stats_acc = {}
    local vals = redis.call('HMGET', key, unpack(fields))
    local set
    if tonumber(vals[1]) == minute then
      set = {}
      for i, n in ipairs(incs) do
        set[2 * i - 1] = fields[i + 1]
        set[2 * i] = n + (tonumber(vals[i + 1]) or 0)
      end
    else
      stats_roll(key, tonumber(vals[1]), minute)
      set = {'cur', minute}
      for i, n in ipairs(incs) do
        set[#set + 1] = fields[i + 1]
        set[#set + 1] = n
      end
    end
    if kinds then
      set[#set + 1] = 'kinds'
      set[#set + 1] = kinds
    end
    redis.call('HSET', key, unpack(set))
  end
  STATS_WRITER = W
  return W
end

-- Count what a client counted: counts is '' (nothing, the usual case: one
-- compare), else see W.add above.
local function stats_add(counts)
  if not STATS or counts == nil or counts == '' then return end
  stats_writer().add(counts)
end

-- Add what was counted to the current minute of key: see W.flush above.
-- Once per script run, at most; nothing counted costs one compare.
local function stats_flush(key, now)
  if not STATS or next(stats_acc) == nil then return end
  stats_writer().flush(key, now)
end

-- What a client counted (stats_add), written to key at once (before
-- anything the script may refuse or fail at), so that it is counted
-- exactly when the call ran; dropped if the queue (its meta hash) no
-- longer exists: a deleted queue's stats are gone with it, and counts
-- held across its deletion must not make the hash again.
local function stats_client(key, meta, counts, now)
  if counts == nil or counts == '' then return end
  if redis.call('HEXISTS', meta, 'name') == 0 then return end
  stats_add(counts)
  stats_flush(key, now)
end

-- Batches of processes settled in one call (finish.lua, retry.lua): ARGV
-- holds the channel, the client's counts (see stats_client), then stride
-- values per process, the pid second.
--
-- batch_open reads the Redis clock (one TIME), writes the client's counts
-- with it, and reads the processes' records (one HMGET). Returns the clock
-- in µs and in ms, the pids (read from the tail of ARGV), and their
-- records (false where none).
local function batch_open(procs, stats, meta, counts, stride)
  local now_u = now_us()
  local now = math.floor(now_u / 1000)
  stats_client(stats, meta, counts, now)
  local pids = {}
  for i = 4, #ARGV, stride do
    pids[#pids + 1] = ARGV[i]
  end
  return now_u, now, pids, redis.call('HMGET', procs, unpack(pids))
end

-- batch_refusal: why process pid (record v, of worker) cannot be settled,
-- as its code: -1 the worker's lease is gone, 0 it is not that worker's or
-- was named twice; nil when it can, and it is then marked taken. live
-- caches the lease checks per worker.
-- (The owner is compared in place, with no copy of it made: this runs
-- for every process.)
local function batch_refusal(leases, now, live, taken, worker, pid, v)
  local ok = live[worker]
  if ok == nil then
    ok = lease_live(leases, worker, now) and true or false
    live[worker] = ok
  end
  if not ok then return -1 end
  if not v or taken[pid] then return 0 end
  if #worker == OWNER_LEN then
    if string.find(v, worker, 2, true) ~= 2 then return 0 end
  elseif proc_owner(v) ~= worker then
    return 0
  end
  taken[pid] = true
  return nil
end

-- ATTEMPTS: a task's attempt history, the failed attempts it made, kept in
-- the errors hash beside its last error under the field '<id>:a' (ids are
-- hex, so no id is such a field): its last ATTEMPTS_KEPT records, oldest
-- first, each '<ended ms>,<how>,<worker bytes>,<error bytes>:<worker><error>'
-- with how r (retried), d (dead) or k (reclaimed: its worker was lost),
-- the error cut to ATTEMPT_ERROR_MAX bytes. Written only when an attempt
-- fails, and removed with the task's error (errors_drop), so a task that
-- never failed costs nothing.
local ATTEMPTS_KEPT, ATTEMPT_ERROR_MAX = 10, 1024

-- A failed attempt of task id added to its history, which keeps the last
-- ATTEMPTS_KEPT: returns the history's field in the errors hash and its
-- new value, for a script that writes many fields at once (retry.lua).
-- fresh says the task has no history yet (its header counts no attempt:
-- every attempt noted counts one first), so there is none to read.
local function attempt_added(errors, id, ended, how, worker, err, fresh)
  local field = id .. ':a'
  err = string.sub(err or '', 1, ATTEMPT_ERROR_MAX)
  local v = ms(ended) .. ',' .. how .. ',' .. #worker .. ',' .. #err .. ':' .. worker .. err
  if fresh then
    return field, v
  end
  v = (redis.call('HGET', errors, field) or '') .. v
  local starts, p = {}, 1
  while p <= #v do
    local colon = string.find(v, ':', p, true)
    local wl, el = string.match(string.sub(v, p, (colon or p) - 1), '^%d+,%a,(%d+),(%d+)$')
    if not wl then break end
    starts[#starts + 1] = p
    p = colon + 1 + tonumber(wl) + tonumber(el)
  end
  if #starts > ATTEMPTS_KEPT then
    v = string.sub(v, starts[#starts - ATTEMPTS_KEPT + 1])
  end
  return field, v
end

-- Note a failed attempt of task id in its history (see attempt_added).
local function attempt_note(errors, id, ended, how, worker, err)
  redis.call('HSET', errors, attempt_added(errors, id, ended, how, worker, err))
end

-- Remove the errors, and attempt histories, of the tasks ids[i..j] (1,000
-- at most: unpack puts every value on the Lua stack).
local function errors_drop(errors, ids, i, j)
  local fields = {}
  for k = i or 1, j or #ids do
    fields[#fields + 1] = ids[k]
    fields[#fields + 1] = ids[k] .. ':a'
  end
  if #fields > 0 then
    redis.call('HDEL', errors, unpack(fields))
  end
end

-- Give processes back to their queue: each is removed from procs, and an
-- active one's task goes to the FRONT of the queue, the oldest frontmost
-- (process ids count up in dequeue order). Cancelled processes and those
-- of a deleted queue are dropped: a retry must not bring them back.
-- list holds {pid = ..., v = ...} records. Their tasks' progress reports
-- (in the progress hash) go with them. Returns requeued, dropped, and the
-- weight the removed processes held (see entry_weight), which is taken off
-- the queue's count in meta.
--
-- poison, when given (the reclaim of a dead worker), is the poison-pill
-- guard. A death is counted in an active process's task ('r' field) only
-- when it tells something about the task:
--   - its holder died soon after starting it (before poison.window ms had
--     passed since its start, which its pid tells): a task held longer did
--     not kill its holder;
--   - the holder had been up for a window before it started the task
--     (poison.born, the ms it joined; 0 if unknown), or the task already
--     counts a death: a worker that dies young (a restart, a crash loop, a
--     bad deploy) may die of its own, but once a worker that had been up
--     for long died of the task, its restarted successors dying of it
--     count too (else a fleet of one worker, restarted each time, would
--     run a pill for ever);
--   - the task was never held for a window ('h' field, set when a task
--     held longer comes back): a task that once ran healthy, such as a
--     persistent one, is not a pill that kills its holder at once.
-- A task whose count reaches poison.limit is handed to poison.bury
-- instead of requeued. A task held for a window clears its count and is
-- marked 'h'. poison.count false (a worker giving its own work back) only
-- marks and clears.
-- lost, when given (a reclaim: when, in ms), notes each active task's
-- attempt in its history as reclaimed (see attempt_note).
local function return_to_front(waiting, procs, meta, errors, unique, progress, list, poison, lost)
  for _, p in ipairs(list) do p.seq = tonumber(p.pid, 16) or 0 end
  -- Newest first, so the oldest ends up at the very front.
  table.sort(list, function(a, b) return a.seq > b.seq end)
  local requeued, dropped, freed = 0, 0, 0
  local ids = {}
  for _, p in ipairs(list) do
    redis.call('HDEL', procs, p.pid)
    freed = freed + entry_weight(proc_task(p.v))
    group_released(proc_task(p.v))
    ids[#ids + 1] = entry_id(proc_task(p.v))
    local entry = proc_state(p.v) == 'a' and entry_ran(proc_task(p.v))
    local started = p.seq / 1000
    local young = poison and poison.now - started < poison.window
    if entry and young and poison.count and not header_has(entry, 'h')
        and (started - poison.born >= poison.window or header_has(entry, 'r')) then
      local h, payload = entry_split(entry)
      local deaths = (tonumber(header_get(h, 'r') or '0') or 0) + 1
      entry = header_set(h, 'r', deaths) .. ':' .. payload
      if deaths >= poison.limit then
        poison.bury(entry, proc_owner(p.v), deaths, p.pid)
        release_unique(unique, entry)
        entry = nil
        dropped = dropped + 1
      end
    elseif entry and poison and not young and not header_has(entry, 'h') then
      local h, payload = entry_split(entry)
      entry = header_set(header_set(h, 'r', nil), 'h', 1) .. ':' .. payload
    end
    if entry then
      if lost then
        attempt_note(errors, entry_id(entry), lost, 'k', proc_owner(p.v), '')
      end
      entry = entry_due_now(entry)
      push_waiting(entry, waiting, true)
      requeued = requeued + 1
    elseif proc_state(p.v) ~= 'a' then
      errors_drop(errors, {entry_id(proc_task(p.v))})
      release_unique(unique, proc_task(p.v))
      dropped = dropped + 1
    end
  end
  for i = 1, #ids, 1000 do
    redis.call('HDEL', progress, unpack(ids, i, math.min(i + 999, #ids)))
  end
  weight_moved(meta, #list - freed)
  return requeued, dropped, freed
end

-- Remove a process that belongs to worker, while its lease on the queue is
-- live, with its task's progress report. Returns the process record, or nil
-- and -1 (lease gone) or 0 (not this worker's: lost).
local function take_own_process(procs, leases, meta, progress, worker, pid)
  if not lease_live(leases, worker, now_ms()) then
    return nil, -1
  end
  local v = redis.call('HGET', procs, pid)
  if not v or proc_owner(v) ~= worker then
    return nil, 0
  end
  redis.call('HDEL', procs, pid)
  weight_moved(meta, 1 - entry_weight(proc_task(v)))
  group_released(proc_task(v))
  redis.call('HDEL', progress, entry_id(proc_task(v)))
  -- Only a deleted queue can have lost its name: an active or cancelled
  -- process means the queue still exists.
  if proc_state(v) == 'd' then
    drop_meta_if_gone(procs, meta)
  end
  return v
end

-- Trim a queue's dead letters to at most max, none dead before oldest (ms),
-- dropping the errors of those removed.
-- The holds of sequences on the dead letters trimmed are released (see
-- dead_letters_gone), when meta is given. Returns how many holds were
-- released: the caller wakes the runtimes for them (nobody polls).
local function trim_dead(dead, errors, max, oldest, meta)
  local gone = redis.call('ZRANGEBYSCORE', dead, '-inf', '(' .. ms(oldest))
  local over = redis.call('ZCARD', dead) - #gone - max
  local released = 0
  if over > 0 then
    local more = redis.call('ZRANGE', dead, #gone, #gone + over - 1)
    for _, r in ipairs(more) do gone[#gone + 1] = r end
  end
  for i = 1, #gone, 1000 do
    local chunk = {unpack(gone, i, math.min(i + 999, #gone))}
    redis.call('ZREM', dead, unpack(chunk))
    local ids = {}
    for j, r in ipairs(chunk) do ids[j] = entry_id(r) end
    errors_drop(errors, ids)
    if meta then released = released + dead_letters_gone(meta, chunk) end
  end
  return released
end

-- Tell a queue's runtimes of n tasks that just became waiting: the work
-- event names up to n + 1 of the runtimes parked in the idle set, longest
-- idle first (see enqueue.lua), or, with none parked, nobody, which wakes
-- every runtime. first, when given, is what a ZPOPMIN of one from the idle
-- set just returned: the runtime it took is named first, and an empty
-- answer means none is parked.
local function wake(idle, channel, n, first)
  local parked = first or {}
  if not first or #first > 0 then
    local more = redis.call('ZPOPMIN', idle, n + 1 - #parked / 2)
    for _, v in ipairs(more) do parked[#parked + 1] = v end
  end
  local msg = 'w' .. n
  if #parked > 0 then
    local ids = {}
    for i = 1, #parked, 2 do
      ids[#ids + 1] = parked[i]
    end
    msg = msg .. ':' .. table.concat(ids, ',')
  end
  publish(channel, msg)
end

-- A dead letter made a waiting entry again: its counts of starts, of
-- failures and of deaths, its mark of a healthy hold and its D, W and K
-- fields removed; its id, budget, other fields and payload kept.
local function dead_revived(e)
  local h, payload = entry_split(e)
  for _, letter in ipairs({'a', 'f', 'r', 'h', 'u', 'D', 'W', 'K'}) do
    h = header_set(h, letter, nil)
  end
  return entry_due_now(h .. ':' .. payload)
end

-- A retained task (an 'R' field) that has not ended is listed in the
-- retained set with the score +inf (which ZSCORE answers as 'inf'), until
-- retain replaces it with its outcome's expiry: so Wait learns with one
-- ZSCORE that an outcome will come (see outcome.lua), without looking for
-- the task. The scripts that put a retained task in the queue list it
-- (enqueue, tick, a dead letter requeued); those that end it without an
-- outcome unlist it (a cancel: outcome_unlisted), and deleting the queue
-- drops the set. ids are the tasks' ids.
local function outcome_pending(retained, ids)
  local args = {}
  for i, id in ipairs(ids) do
    args[2 * i - 1] = '+inf'
    args[2 * i] = id
  end
  for i = 1, #args, 1000 do
    redis.call('ZADD', retained, unpack(args, i, math.min(i + 999, #args)))
  end
end

-- Tasks (entries) cancelled: those retained are unlisted (no outcome will
-- come). Returns their ids.
local function outcome_unlisted(retained, entries)
  local ids = {}
  for _, e in ipairs(entries) do
    if header_has(e, 'R') then ids[#ids + 1] = entry_id(e) end
  end
  for i = 1, #ids, 1000 do
    redis.call('ZREM', retained, unpack(ids, i, math.min(i + 999, #ids)))
  end
  return ids
end

-- Dead letters (entries) going back to the queue lose the outcome their
-- death left, if they are retained ones: a requeued task is as if it had
-- never run, and TaskResult and Wait must not answer with the old outcome
-- while it waits to run again. They are listed as pending again.
local function dead_outcome_cleared(results, retained, entries)
  local ids = {}
  for _, e in ipairs(entries) do
    if header_has(e, 'R') then ids[#ids + 1] = entry_id(e) end
  end
  if #ids > 0 then
    redis.call('HDEL', results, unpack(ids))
    outcome_pending(retained, ids)
  end
end

-- The dead letter of task id, or nil. The members are whole entries, so
-- they are scanned (ZSCAN, matched by Redis against pattern: the id,
-- glob-escaped, then '[,:]*') and the id of each match compared.
local function find_dead(dead, id, pattern)
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', dead, cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = page[1]
    local found = page[2]
    for i = 1, #found, 2 do
      if entry_id(found[i]) == id then
        return found[i]
      end
    end
  until cursor == '0'
  return nil
end

-- Make sure a queue just given tasks (other than by enqueue) exists, as
-- enqueue.lua does: returns 0 when it is confirmed in the registry, else
-- sets its name if it had lost it and returns 1: the caller must register
-- it (see registered.lua).
local function ensure_queue(meta, queue)
  if redis.call('HEXISTS', meta, 'registered') == 1 then
    return 0
  end
  name_queue(meta, queue)
  return 1
end

-- Keep the outcome of a task that asked for it (its 'R' field: how long,
-- in ms) in the results hash, under its id: a record '<id>,s<status>,
-- S<started ms>,E<ended ms>,a<attempts>[,K<kind>]:<result or error>',
-- listed in retained by when it expires (in place of its +inf while it
-- was pending: see outcome_pending; expired ones are dropped as new ones
-- come), and announce it with an outcome event 'o<id>' for waiters.
-- status is 'ok' or 'dead'; started comes from the process id; attempts
-- is the entry's count of starts plus ran (1 when the entry is a process
-- record's, which does not count its own start yet). The count is read
-- only for a task that asked to be kept: finish runs this for every task.
local function retain(results, retained, channel, entry, status, pid, ran, body, kind)
  if not header_has(entry, 'R') then return end
  local attempts = entry_attempts(entry) + ran
  local keep = tonumber(header_get(entry_split(entry), 'R')) or 0
  local now = now_ms()
  local id = entry_id(entry)
  local rec = id .. ',s' .. status .. ',S' .. ms(math.floor((tonumber(pid, 16) or 0) / 1000)) ..
    ',E' .. ms(now) .. ',a' .. attempts
  if kind then rec = rec .. ',K' .. kind end
  redis.call('HSET', results, id, rec .. ':' .. body)
  redis.call('ZADD', retained, ms(now + keep), id)
  local old = redis.call('ZRANGEBYSCORE', retained, '-inf', '(' .. ms(now), 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('HDEL', results, unpack(old))
    redis.call('ZREM', retained, unpack(old))
  end
  publish(channel, 'o' .. id)
end

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
-- the last it recorded of the step.
-- Returns the notice, or nil for a task of no workflow.
local function flow_notice(flows, entry, status)
  if not header_has(entry, 'F') then return end
  local f = header_get(entry_split(entry), 'F')
  local notice = f .. ',' .. entry_id(entry) .. ',' .. status
  redis.call('ZADD', flows, ms(now_us()), notice)
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
