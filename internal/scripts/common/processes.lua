-- Processes (a queue's procs hash): their records, starting them, and
-- ending them, one at a time or in batches, or giving them back to the
-- queue.

-- procs hash values: one state byte, the 36-byte owner id, then the task
-- entry.
local OWNER_LEN = 36
local function proc_state(v) return string.sub(v, 1, 1) end
local function proc_owner(v) return string.sub(v, 2, 1 + OWNER_LEN) end
local function proc_task(v) return string.sub(v, 2 + OWNER_LEN) end

-- What finish and stop report about the process they removed.
local STATE_CODE = {a = 1, c = 2, d = 3}


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
  -- Per task: only an entry with a ',w' can have a weight (see
  -- entry_weight); the usual one, and one retried (its header's fields
  -- other than 'w'), cost no call of it.
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
    if find(t, ',w', 1, true) then
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

-- The hand-off (see enqueue.lua): entry, a single task due now, goes
-- straight into a process of worker, the longest-idle runtime, which the
-- caller just took out of the idle set, on a queue where nothing
-- waits (no level's list, no group ready to start: a hand-off must not
-- pass them) and no control holds it back (paused, a concurrency or rate
-- limit: meta is the meta hash as the enqueues read it, HMGET of 'tid',
-- 'registered', 'paused', 'limit', 'rate', 'seq'), if that worker's lease
-- on the queue is live; the event 'h<worker>,<pid>,<entry>' carries the
-- process to it. now is the Redis clock (µs); sets the caller's meta
-- writes, which the process id counter joins (see start_procs). The
-- checks go cheapest first for a busy queue (tasks wait), then for one
-- held back. Every enqueue that hands a task over does it here, so that
-- a condition on it holds for all of them. Returns whether entry went.
-- The lease is read here as lease_live reads it, not through it: each
-- helper a script carries is a closure made on every call, and
-- lease_live would be one more for enqueue_one.lua, whose hand-off is
-- its only use of it (some 0.9 thousand Redis instructions a call).
local function hand_off(channel, procs, meta_key, leases, waiting, high, low, gready, meta, worker, entry, now, sets)
  if redis.call('EXISTS', waiting, high, low, gready) > 0 or meta[3] or meta[4] or meta[5] then
    return false
  end
  local lease = redis.call('ZSCORE', leases, worker)
  if not (lease and tonumber(lease) > math.floor(now / 1000)) then
    return false
  end
  local pids = start_procs(procs, meta_key, worker, {entry}, now, meta[6], sets)
  publish(channel, 'h' .. worker .. ',' .. pids[1] .. ',' .. entry)
  return true
end

-- Batches of processes settled in one call (finish.lua, retry.lua,
-- retry_plain.lua): ARGV holds the channel, the client's counts (see
-- stats_client), then stride values per process, the pid second.
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
        entry = attempt_note(errors, entry, lost, 'k', proc_owner(p.v), '')
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
