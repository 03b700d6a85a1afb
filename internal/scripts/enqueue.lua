-- Enqueue tasks at the back of a queue (or, with front set, at its front)
-- and wake its workers; or, when they are due later, into the queue's
-- delayed set. Each task gets an id (as next_task_ids gives them) and is
-- stored as an entry '<id><fields>:<payload>'.
--
-- The caller may send the entries whole instead of the payloads, with ids
-- of its choosing counting up from given (hex, all of one length): that
-- spares the script building a string per task, most of its cost for a
-- batch. The ids are taken as they are when they are ones next_task_ids
-- could have given: past the last id given, and within a second of the
-- clock (or of the last id, when bulk loads have run it ahead of the
-- clock), so that each still tells when its task was enqueued. Otherwise
-- the script gives the tasks ids of its own, as for payloads, and the
-- caller learns them from the reply. The caller sends whole entries only
-- for tasks due now and not for the front.
--
-- A task may have a unique key (its sha1): the task is added only if no
-- task holds the key: while alive (ttl 0: the key is given up when the
-- task ends, finished, dead or cancelled; the entry carries ',u<sha1>') or
-- for ttl ms from now. If one does (or an earlier task of the same call
-- takes it), the task is left out, its id unused, and the holder's id is
-- reported; the other tasks are added. When every task is left out,
-- nothing else changes but the client's counts the call carries, which
-- are written all the same.
-- Returns {unregistered, first id (hex), duplicates, {index, holder id}
-- for each duplicate...}: unregistered is 1 while the queue is not yet
-- confirmed in the registry (see registered.lua), and the caller then
-- registers it; the tasks' ids count up by one from the first, in order.
--
-- The work event names the handler runtimes that should wake: up to n + 1
-- of those parked in the idle set (see dequeue.lua), longest idle first,
-- one more than the tasks in case one of them has just died. Every other
-- runtime is busy and will come back for more by itself, so it need not
-- hear of the tasks. With none parked the event names nobody and wakes all.
-- Delayed tasks raise a schedule event 's<due>' instead, which every worker
-- serving the queue uses to arm its timer (see promote.lua).
--
-- A hand-off saves the named runtime its dequeue, a round trip: a single
-- task (the caller allows it only for one small enough to go in an event
-- every subscriber of the channel hears) due now, on a queue where nothing
-- waits, that no control holds back (paused, a concurrency or rate limit:
-- those are the dequeue's to apply), goes straight into a process of the
-- longest-idle runtime, as a dequeue of its own would have made it, if
-- that runtime's worker has a live lease on the queue. The runtime leaves
-- the idle set (its next dequeue parks it again) and the event
-- 'h<worker>,<pid>,<entry>' carries the process to it. It starts the task,
-- or gives it back to the front if it cannot (stop.lua); if its worker dies
-- first, its lease covers the process as it covers every other.
local list_key, meta_key, idle_key, delayed_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4] -- list: the tasks' level's
local unique_key, unique_ttl_key, stats_key, leases_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local procs_key, waiting_key, high_key, low_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12] -- every level's list
local retained_key, gwait_key, gready_key = KEYS[13], KEYS[14], KEYS[15] -- the groups' waiting tasks and turns
-- The gatherings' keys: their tasks, deadlines and sizes (see AGG in
-- common/aggregation.lua), in one local: the script's top level holds
-- many.
local gather_keys = {KEYS[16], KEYS[17], KEYS[18]}
local channel, queue, front = ARGV[1], ARGV[2], ARGV[3] == '1' -- queue: its name; front: "1" | "0"
local due_at, delay = tonumber(ARGV[4]), tonumber(ARGV[5]) -- µs, Redis clock (0: now); µs from now (0: none)
local fields = ARGV[6] -- the header fields every task gets ('' for none; see records.go)
-- The tasks' unique keys: one 40-byte sha1 per task ('-' * 40 for a task
-- without one), or '' when no task has one; and their ttls, ms (0: while
-- alive), one per task, comma-separated.
local shas, unique_ttls = ARGV[7], ARGV[8]
local hand = ARGV[9] -- "1": the task may be handed to an idle runtime (see below); "0"
-- The client's stats counts (see stats_add; its own count of enqueued
-- tasks among them: this script counts none).
local counts = ARGV[10]
-- given: the first id of whole entries in ARGV[14...] (hex), or '' when
-- those are the payloads.
local given = ARGV[11]
-- agg: the aggregation key the tasks gather under ('' for none; see
-- below); agg_limit: the most bytes an aggregated task's payload takes
-- (the client's task size bound; 0: none).
local agg, agg_limit = ARGV[12], tonumber(ARGV[13])
local n = #ARGV - 13
local NO_KEY = string.rep('-', 40)

-- Tasks of a group (a 'g' field) wait in it (see group_lib().push), and are
-- never handed off: their group's limit is the dequeue's to apply.
local grouped = string.find(fields, ',g', 1, true) ~= nil
set_lists(waiting_key, high_key, low_key, gwait_key, gready_key)
-- Due times are kept in µs (exact in a score until the year 2255).
local now = now_us()
-- The queue's meta hash is read once, and written once at the end (sets):
-- the task id counter (see next_task_ids), whether the queue is confirmed,
-- the controls a hand-off must not pass (see queue_controls) and the
-- process id counter a hand-off counts on (see start_procs). On an idle
-- queue the script's cost is mostly its number of calls.
local meta = redis.call('HMGET', meta_key, 'tid', 'registered', 'paused', 'limit', 'rate', 'seq')
local last = tonumber(meta[1] or '0') or 0
local first = math.max(now, last + 1)
-- Whole entries whose ids are taken as given (see above).
local whole = false
if given ~= '' then
  local g = tonumber(given, 16)
  if g and g > last and g >= now - 1000000 and g <= first + 1000000 then
    first, whole = g, true
  end
end
local function id_of(i)
  return string.format('%x', first + i - 1)
end

-- Tasks left out, their unique key held: skip[i] for each, and {index,
-- holder id, ...} for the reply.
local skip, dups = {}, {}
local keyed = {} -- {sha, ttl, index} of each task that takes a key
if shas ~= '' then
  -- Keys held for a time are dropped once it has passed (a hundred a call).
  local stale = redis.call('ZRANGEBYSCORE', unique_ttl_key, '-inf', ms(now_ms()), 'LIMIT', 0, 100)
  if #stale > 0 then
    redis.call('HDEL', unique_key, unpack(stale))
    redis.call('ZREM', unique_ttl_key, unpack(stale))
  end
  local timed = redis.call('EXISTS', unique_ttl_key) == 1
  local ttls, taken = {}, {}
  for t in string.gmatch(unique_ttls, '[^,]+') do
    ttls[#ttls + 1] = tonumber(t)
  end
  -- The keys, and their holders read in one call once those held past
  -- their time are dropped.
  local sha_of, asked = {}, {}
  for i = 1, n do
    local sha = string.sub(shas, 40 * i - 39, 40 * i)
    if sha ~= NO_KEY then
      sha_of[i] = sha
      asked[#asked + 1] = sha
      if timed then
        local exp = redis.call('ZSCORE', unique_ttl_key, sha)
        if exp and tonumber(exp) <= now_ms() then
          redis.call('HDEL', unique_key, sha)
          redis.call('ZREM', unique_ttl_key, sha)
        end
      end
    end
  end
  local holders = {}
  for i = 1, #asked, 1000 do
    local got = redis.call('HMGET', unique_key, unpack(asked, i, math.min(i + 999, #asked)))
    for j = 1, #got do
      if got[j] then holders[asked[i + j - 1]] = got[j] end
    end
  end
  for i = 1, n do
    local sha = sha_of[i]
    if sha then
      local holder = taken[sha] and id_of(taken[sha]) or holders[sha]
      if holder then
        skip[i] = true
        dups[#dups + 1] = i
        dups[#dups + 1] = holder
      else
        taken[sha] = i
        keyed[#keyed + 1] = {sha, ttls[i] or 0, i}
      end
    end
  end
  if #dups / 2 == n then
    -- Nothing is added, but the counts this call carries are written
    -- (the client takes them as written once the script ran).
    stats_client(stats_key, meta_key, counts)
    local reply = {0, id_of(1), n}
    for _, v in ipairs(dups) do reply[#reply + 1] = v end
    return reply
  end
end
local sets = {'tid', ms(first + n - 1)}
-- The header each task gets past the call's fields: its unique key, when
-- held while it lives (whole entries carry it already).
local own = {}
if #keyed > 0 then
  local held, timed = {}, {}
  for _, k in ipairs(keyed) do
    local id = id_of(k[3])
    held[#held + 1] = k[1]
    held[#held + 1] = id
    if k[2] > 0 then
      timed[#timed + 1] = ms(now_ms() + k[2])
      timed[#timed + 1] = k[1]
    else
      own[k[3]] = ',u' .. k[1]
    end
  end
  for i = 1, #held, 1000 do
    redis.call('HSET', unique_key, unpack(held, i, math.min(i + 999, #held)))
  end
  for i = 1, #timed, 1000 do
    redis.call('ZADD', unique_ttl_key, unpack(timed, i, math.min(i + 999, #timed)))
  end
end
local added = n - #dups / 2
-- Retained tasks are listed as pending an outcome (see outcome_pending).
if string.find(fields, ',R', 1, true) then
  local ids = {}
  for i = 1, n do
    if not skip[i] then ids[#ids + 1] = id_of(i) end
  end
  outcome_pending(retained_key, ids)
end
-- Task i's entry: as given when its id is, else with the id given
-- replaced (ids given are all of one length), else made from its payload.
local id_len = #given
local function entry(i, header)
  local arg = ARGV[13 + i]
  if whole then return arg end
  if given ~= '' then return id_of(i) .. string.sub(arg, id_len + 1) end
  return id_of(i) .. header .. (own[i] or '') .. ':' .. arg
end
local due = math.max(due_at, now + delay)
local entries = {}
if agg ~= '' then
  -- Gathering tasks wait under their key (see AGG.flush in
  -- common/aggregation.lua) rather than in the queue; the first opens the
  -- gathering, with its deadline, which every worker serving the queue arms
  -- its timer for (the schedule event, as for a delayed task); the max-th
  -- flushes it into one task, whose id is the next after the call's own,
  -- and so does a task that would take the aggregated task's payload past
  -- agg_limit bytes: the gathering goes without it, and it opens the next.
  -- The call's tasks are stored only when their gathering is still open at
  -- its end: those a flush of this call takes go from the arguments
  -- straight into the aggregated task.
  local gather_key, gather_due_key, gather_size_key = unpack(gather_keys)
  local max, wait = agg_lib().settings(meta_key)
  max = math.max(max, 1)
  local limit = (agg_limit and agg_limit > 0) and agg_limit or math.huge
  local count = agg_lib().count(gather_key, agg)
  local bytes = count > 0 and agg_lib().bytes(gather_key, gather_size_key, agg) or 0
  local open = count > 0
  local extra, flushed = 0, 0
  -- The call's entries; those from held[from] on are not yet flushed
  -- nor stored.
  local held, from = {}, 1
  for i = 1, n do
    if not skip[i] then
      local e = entry(i, fields)
      held[#held + 1] = e
      count, bytes = count + 1, bytes + agg_lib().size(e)
      -- The gathering's stored tasks are older than the call's, and go
      -- first: with max of them or more (the setting lowered), alone.
      while count >= max or (count > 1 and bytes > limit) do
        extra = extra + 1
        local took, used, size = agg_lib().flush(gather_key, gather_due_key, agg, max, id_of(n + extra), waiting_key, held, limit, from)
        from = from + used
        if took > 0 then
          count, bytes = count - took, math.max(bytes - size, 0)
        else
          count, bytes = 0, 0
        end
        flushed = flushed + 1
        open = false
      end
    end
  end
  for i = from, #held, 500 do
    local args = {}
    for j = i, math.min(i + 499, #held) do
      args[#args + 1] = 0
      args[#args + 1] = agg .. '\0' .. held[j]
    end
    redis.call('ZADD', gather_key, unpack(args))
  end
  if count > 0 then
    redis.call('HSET', gather_size_key, agg, bytes)
  else
    redis.call('HDEL', gather_size_key, agg)
  end
  if extra > 0 then
    sets[2] = ms(first + n + extra - 1)
    wake(idle_key, channel, flushed)
  end
  -- A gathering its flushes left stored tasks in keeps their deadline
  -- (AGG.flush drops it only with the last): only one opened here gets one.
  if count > 0 and not open and not redis.call('ZSCORE', gather_due_key, agg) then
    local deadline = now + wait * 1000
    redis.call('ZADD', gather_due_key, ms(deadline), agg)
    publish(channel, 's' .. ms(deadline))
  end
elseif due > now then
  -- A delayed task's wait starts when it is due (see entry_due).
  local header = fields .. ',d' .. string.format('%x', due)
  for i = 1, n do
    if not skip[i] then
      entries[#entries + 1] = ms(due)
      entries[#entries + 1] = entry(i, header)
    end
  end
  for i = 1, #entries, 1000 do
    redis.call('ZADD', delayed_key, unpack(entries, i, math.min(i + 999, #entries)))
  end
  publish(channel, 's' .. ms(due))
elseif whole and added == n and not grouped and n > 1 then
  -- The usual bulk call: the entries go as they came.
  redis.call('LPUSH', list_key, unpack(ARGV, 14, 13 + n))
  wake(idle_key, channel, n)
else
  -- The front is the right end: a batch for the front is listed last task
  -- first, so it comes out in its own order.
  for j = 1, n do
    local i = front and n - j + 1 or j
    if not skip[i] then
      entries[#entries + 1] = entry(i, fields)
    end
  end
  -- A single task takes the longest-idle runtime out of the idle set
  -- first, as the wake would: with none parked (a busy queue) that is all
  -- the hand-off costs.
  local popped
  if hand == '1' and n == 1 and not grouped then
    popped = redis.call('ZPOPMIN', idle_key)
  end
  if not (popped and popped[1] and hand_off(channel, procs_key, meta_key, leases_key, waiting_key, high_key, low_key, gready_key,
      meta, popped[1], entries[1], now, sets)) then
    if grouped then
      group_lib().push(entries, front)
    else
      -- A batch at the front comes in one call, however large, so it
      -- pushes in slices.
      local push = front and 'RPUSH' or 'LPUSH'
      for i = 1, #entries, 1000 do
        redis.call(push, list_key, unpack(entries, i, math.min(i + 999, #entries)))
      end
    end
    wake(idle_key, channel, added, popped)
  end
end
redis.call('HSET', meta_key, unpack(sets))
local reply = {0, id_of(1), #dups / 2}
for _, v in ipairs(dups) do reply[#reply + 1] = v end
-- The client counts what it enqueued (internal/store/statsbuf.go) and
-- carries its counts about once a second: the usual call writes no stats.
stats_add(counts)
stats_flush(stats_key, math.floor(now / 1000))
-- A confirmed queue has its name (delete.lua removes both together), so
-- the usual enqueue stops here.
if meta[2] then
  return reply
end
name_queue(meta_key, queue)
reply[1] = 1
return reply
