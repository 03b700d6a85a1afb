-- A queue's own records: its meta hash (the task and process id
-- counters, its name, its controls, the weight in flight) and the unique
-- keys its tasks hold.

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

-- The last process id given out in a queue (hex), "0" if none: cancel and
-- delete events carry it, so a worker applies them only to processes that
-- existed when the script ran.
local function last_pid(meta)
  local seq = redis.call('HGET', meta, 'seq')
  if not seq then return '0' end
  return string.format('%x', tonumber(seq))
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

-- Processes whose extra weight (the sum of w - 1) is x were added (x > 0)
-- or removed (x < 0).
local function weight_moved(meta, x)
  if x == 0 then return end
  if redis.call('HINCRBY', meta, 'wx', x) <= 0 then
    redis.call('HDEL', meta, 'wx')
  end
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
