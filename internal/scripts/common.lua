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

-- Task entries (see internal/store/records.go, the Go side of this
-- layout): a header, ':', then the payload. The header is the task id in
-- hex, then optional fields ',<letter><value>', values free of ',' and
-- ':': 'a' counts the starts, 'f' the failed ones (a handler error, a
-- retry), 'm' is the task's attempt budget; a dead letter
-- adds 'D' (when, ms), 'W' (the worker) and 'K' (the failure's kind).
local function entry_id(e) return string.match(e, '^[^,:]*') end
local function entry_payload(e)
  local c = string.find(e, ':', 1, true)
  if not c then return e end
  return string.sub(e, c + 1)
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
-- and each tells when its task was enqueued. Returns the first (a number).
local function next_task_ids(meta, n)
  local last = tonumber(redis.call('HGET', meta, 'tid') or '0')
  local first = math.max(now_us(), last + 1)
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
local function set_lists(normal, high, low)
  PRIO.n, PRIO.h, PRIO.l = normal, high, low
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
  return n
end

-- The queue controls kept in its meta hash: 'paused' (any value), 'limit'
-- (the most processes in flight across the fleet), and 'rate' and 'per'
-- (at most rate starts in any per ms).
-- Returns paused, limit, rate, per (nil when none).
local function queue_controls(meta)
  local c = redis.call('HMGET', meta, 'paused', 'limit', 'rate', 'per')
  return c[1] ~= false and c[1] ~= nil, tonumber(c[2] or nil), tonumber(c[3] or nil), tonumber(c[4] or nil)
end

-- Slots freed in a queue with a concurrency limit: wake up to n runtimes
-- parked in the idle set (a runtime the limit held back parks there), if
-- tasks wait. Without a limit nobody waits for a slot: busy runtimes come
-- back by themselves.
local function slots_freed(meta, waiting, idle, channel, n)
  if n <= 0 or not redis.call('HGET', meta, 'limit') then return end
  if waiting_len(waiting) == 0 then return end
  local parked = redis.call('ZPOPMIN', idle, n + 1)
  if #parked == 0 then return end
  local ids = {}
  for i = 1, #parked, 2 do ids[#ids + 1] = parked[i] end
  publish(channel, 'w' .. n .. ':' .. table.concat(ids, ','))
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

-- Give processes back to their queue: each is removed from procs, and an
-- active one's task goes to the FRONT of the queue, the oldest frontmost
-- (process ids count up in dequeue order). Cancelled processes and those
-- of a deleted queue are dropped: a retry must not bring them back.
-- list holds {pid = ..., v = ...} records. Returns requeued, dropped.
--
-- poison, when given (the reclaim of a dead worker), is the poison-pill
-- guard: an active process that its holder died with soon after starting
-- it (before poison.window ms had passed since its start, which its pid
-- tells) counts a death in its task's 'r' field, and a task whose count
-- reaches poison.limit is handed to poison.bury instead of requeued. A
-- holder that died after holding the task longer clears the count: only
-- deaths in a row count, so a persistent task, held for long, is never
-- taken for a poison pill. poison.count false (a worker giving its own
-- work back) only clears: a task held longer than the window was healthy.
local function return_to_front(waiting, procs, errors, unique, list, poison)
  for _, p in ipairs(list) do p.seq = tonumber(p.pid, 16) or 0 end
  -- Newest first, so the oldest ends up at the very front.
  table.sort(list, function(a, b) return a.seq > b.seq end)
  local requeued, dropped = 0, 0
  for _, p in ipairs(list) do
    redis.call('HDEL', procs, p.pid)
    local entry = proc_state(p.v) == 'a' and entry_ran(proc_task(p.v))
    local young = poison and poison.now - p.seq / 1000 < poison.window
    if entry and young and poison.count then
      local h, payload = entry_split(entry)
      local deaths = (tonumber(header_get(h, 'r') or '0') or 0) + 1
      entry = header_set(h, 'r', deaths) .. ':' .. payload
      if deaths >= poison.limit then
        poison.bury(entry, proc_owner(p.v), deaths, p.pid)
        release_unique(unique, entry)
        entry = nil
        dropped = dropped + 1
      end
    elseif entry and poison and not young and header_has(entry, 'r') then
      local h, payload = entry_split(entry)
      entry = header_set(h, 'r', nil) .. ':' .. payload
    end
    if entry then
      redis.call('RPUSH', list_of(entry, waiting), entry)
      requeued = requeued + 1
    elseif proc_state(p.v) ~= 'a' then
      redis.call('HDEL', errors, entry_id(proc_task(p.v)))
      release_unique(unique, proc_task(p.v))
      dropped = dropped + 1
    end
  end
  return requeued, dropped
end

-- Remove a process that belongs to worker, while its lease on the queue is
-- live. Returns the process record, or nil and -1 (lease gone) or 0 (not
-- this worker's: lost).
local function take_own_process(procs, leases, meta, worker, pid)
  if not lease_live(leases, worker, now_ms()) then
    return nil, -1
  end
  local v = redis.call('HGET', procs, pid)
  if not v or proc_owner(v) ~= worker then
    return nil, 0
  end
  redis.call('HDEL', procs, pid)
  -- Only a deleted queue can have lost its name: an active or cancelled
  -- process means the queue still exists.
  if proc_state(v) == 'd' then
    drop_meta_if_gone(procs, meta)
  end
  return v
end

-- Trim a queue's dead letters to at most max, none dead before oldest (ms),
-- dropping the errors of those removed.
local function trim_dead(dead, errors, max, oldest)
  local gone = redis.call('ZRANGEBYSCORE', dead, '-inf', '(' .. ms(oldest))
  local over = redis.call('ZCARD', dead) - #gone - max
  if over > 0 then
    local more = redis.call('ZRANGE', dead, #gone, #gone + over - 1)
    for _, r in ipairs(more) do gone[#gone + 1] = r end
  end
  for i = 1, #gone, 1000 do
    local chunk = {unpack(gone, i, math.min(i + 999, #gone))}
    redis.call('ZREM', dead, unpack(chunk))
    local ids = {}
    for j, r in ipairs(chunk) do ids[j] = entry_id(r) end
    redis.call('HDEL', errors, unpack(ids))
  end
end

-- Tell a queue's runtimes of n tasks that just became waiting: the work
-- event names up to n + 1 of the runtimes parked in the idle set, longest
-- idle first (see enqueue.lua), or, with none parked, nobody, which wakes
-- every runtime.
local function wake(idle, channel, n)
  local parked = redis.call('ZPOPMIN', idle, n + 1)
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
-- failures and of deaths and its D, W and K fields removed; its id, budget,
-- other fields and payload kept.
local function dead_revived(e)
  local h, payload = entry_split(e)
  for _, letter in ipairs({'a', 'f', 'r', 'u', 'D', 'W', 'K'}) do
    h = header_set(h, letter, nil)
  end
  return h .. ':' .. payload
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
-- listed in retained by when it expires (expired ones are dropped as new
-- ones come), and announce it with an outcome event 'o<id>' for waiters.
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
