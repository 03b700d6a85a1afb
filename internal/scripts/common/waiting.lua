-- Where a queue's tasks wait (the list of each priority and the groups'
-- waiting set, named with set_lists), and waking the runtimes for them.

-- Replaces list elements that are to be removed, before one LREM of it.
local TOMBSTONE = '\0worqr:removed'

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

-- Wake up to n + 1 runtimes parked in the idle set, if any: nobody else
-- waits for a slot.
local function wake_parked(idle, channel, n)
  local parked = redis.call('ZPOPMIN', idle, n + 1)
  if #parked == 0 then return end
  local ids = {}
  for i = 1, #parked, 2 do ids[#ids + 1] = parked[i] end
  publish(channel, 'w' .. n .. ':' .. table.concat(ids, ','))
end

-- Slots freed in a queue with a concurrency limit: wake up to n runtimes
-- parked in the idle set (a runtime the limit held back parks there), if
-- tasks wait. Without a limit nobody waits for a slot: busy runtimes come
-- back by themselves.
local function slots_freed(meta, waiting, idle, channel, n)
  if n <= 0 or not redis.call('HGET', meta, 'limit') then return end
  if not any_waiting(waiting) then return end
  wake_parked(idle, channel, n)
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
