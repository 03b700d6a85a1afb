-- Read a task's retained outcome (TaskResult) and, for Wait (look '1'),
-- when none is kept, whether one will come: all in one script, so that the
-- task cannot end, or be requeued, between the reads.
--
-- A retained task that has not ended is listed in the retained set with
-- the score +inf (see outcome_pending): one ZSCORE tells that an outcome
-- will come. A task not listed so is looked for in the queue's keys, in
-- flight, delayed, dead, then waiting (from both ends of each list: a
-- task just enqueued is near the back, one about to start near the
-- front), so that Wait can tell why none will come; that look costs a
-- read of the queue, as cancel_id.lua's does, but only when the answer is
-- that no outcome will come (or for a retained task enqueued by a worqr
-- that did not list it, which is then found).
-- Returns {'o', outcome record, expiry (ms)} while an outcome is kept;
-- else, with look '0', {'n'}, and with look '1' one of:
--   {'w'} one will come: the task is retained and waits, is delayed or is
--         in flight;
--   {'r'} the task is in the queue (waiting, delayed, in flight or dead)
--         but not retained: none will;
--   {'c'} or {'d'} it is retained and in flight, but cancelled, or its
--         queue deleted: none will;
--   {'n'} none of these: an id the queue does not know (never enqueued,
--         or ended and gone), or a dead letter whose outcome expired.
local results_key, retained_key, procs_key, delayed_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local dead_key, waiting_key, high_key, low_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local id, look = ARGV[1], ARGV[2] -- the task's id; look: '1' | '0'
local pattern = ARGV[3] -- the ZSCAN pattern for the id (see find_dead)

local score = redis.call('ZSCORE', retained_key, id)
if score == 'inf' then
  return {'w'}
end
if score then
  local rec = redis.call('HGET', results_key, id)
  if rec and tonumber(score) > now_ms() then
    return {'o', rec, score}
  end
end
if look ~= '1' then
  return {'n'}
end

-- What a task found alive says: retained or not, and, in flight, its
-- process's state.
local function alive(e, state)
  if not header_has(e, 'R') then return {'r'} end
  if state == 'c' or state == 'd' then return {state} end
  return {'w'}
end

local all = redis.call('HGETALL', procs_key)
for i = 2, #all, 2 do
  local e = proc_task(all[i])
  if entry_id(e) == id then
    return alive(e, proc_state(all[i]))
  end
end
local e = find_dead(delayed_key, id, pattern) -- any sorted set of entries
if e then
  return alive(e)
end
e = find_dead(dead_key, id, pattern)
if e then
  -- Dead, its outcome (if it had one) expired: none will come unless it
  -- is requeued.
  if header_has(e, 'R') then return {'n'} end
  return {'r'}
end
-- The entry in chunk whose id is id (its header starts with the id, then
-- ',' or ':'), or nil: compared in place, with no copy of each id.
local n, sub, byte = #id, string.sub, string.byte
local function in_chunk(chunk)
  for j = 1, #chunk do
    local c = chunk[j]
    if sub(c, 1, n) == id then
      local after = byte(c, n + 1)
      if after == 44 or after == 58 then return c end
    end
  end
  return nil
end
-- The lists are read a megabyte or so at a time (see chunk_size), so
-- that the script holds little more than that of their payloads at once,
-- however long the queue and large its tasks.
local seen, read = 0, 0
local function look(key, from, to)
  local chunk = redis.call('LRANGE', key, from, to)
  for j = 1, #chunk do
    seen, read = seen + 1, read + #chunk[j]
  end
  return in_chunk(chunk)
end
for _, list in ipairs({waiting_key, high_key, low_key}) do
  local lo, hi = 0, redis.call('LLEN', list) - 1
  while lo <= hi do
    local to = math.min(lo + chunk_size(seen, read, 1048576) - 1, hi)
    e = look(list, lo, to)
    if e then return alive(e) end
    lo = to + 1
    if lo <= hi then
      local from = math.max(hi - chunk_size(seen, read, 1048576) + 1, lo)
      e = look(list, from, hi)
      if e then return alive(e) end
      hi = from - 1
    end
  end
end
return {'n'}
