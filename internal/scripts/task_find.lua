-- Find one task by id wherever it is: in flight, delayed, dead, waiting.
-- There is no index by id, so this is a scan, O(n) in the tasks it looks
-- at, all on the server: only what matches comes back, its payload cut to
-- its first cut bytes (see entry_cut), so the reply stays small whatever
-- the queue holds. Entries are read into the script to be matched, a
-- megabyte or so at a time (see chunk_size), so its time grows with the
-- bytes it reads: each of the four places is searched up to limit entries
-- and budget bytes. A search that stopped at a bound before the end is
-- partial: the task may be where it did not look. A task waiting in a
-- group is looked for after the lists, in the group set by ZSCAN (see
-- group_find: Redis matches the members, so only the member found is
-- read), at most limit members; its position follows the lists', as
-- waiting_list.lua orders them.
-- Returns {partial (0/1), waiting, delayed, process, dead, history}, each {} when
-- not found, else:
--   waiting: {position in dequeue order, size, entry}
--   delayed: {size, entry, due (µs)}
--   process: {pid, size, record (state, owner, entry), progress report or ''}
--   dead:    {size, entry, error or ''}
-- then the task's attempt history ('' if none: see attempt_history),
-- wherever it is; with partial and the task not found, the one the errors
-- hash holds, without the latest attempt, which its entry carries.
local high_key, waiting_key, low_key, delayed_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local procs_key, dead_key, errors_key, progress_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local gwait_key = KEYS[9] -- see GROUPS in common/waiting.lua
local id, cut = ARGV[1], tonumber(ARGV[2]) -- cut < 0: whole
local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[4]) -- budget in bytes

local partial = 0
-- The header of the task's entry, with its ':', once found: it carries
-- the last record of the task's attempt history (see attempt_history).
local hit
local function header_of(e, at)
  local c = string.find(e, ':', at or 1, true)
  return c and string.sub(e, at or 1, c) or nil
end

-- Search n entries in order, read(p, k) giving those at positions p to
-- p + k - 1 (and their scores, if any), counting what is read in the
-- tally t ({seen, bytes}): the position, entry and score of the task's,
-- or nil (with partial set if a bound stopped it).
local function search(n, read, t)
  local p = 0
  while p < n do
    if t.seen >= limit or t.bytes >= budget then
      partial = 1
      return nil
    end
    local k = math.min(chunk_size(t.seen, t.bytes, budget - t.bytes), n - p, limit - t.seen)
    local got, scores = read(p, k)
    for j, e in ipairs(got) do
      t.seen, t.bytes = t.seen + 1, t.bytes + #e
      if entry_is(e, id) then
        return p + j - 1, e, scores and scores[j]
      end
    end
    p = p + k
  end
  return nil
end

-- In flight: the process records, by HSCAN (its COUNT is a hint).
local proc = {}
local cursor, t = '0', {seen = 0, bytes = 0}
repeat
  if t.seen >= limit or t.bytes >= budget then
    partial = 1
    break
  end
  local page = redis.call('HSCAN', procs_key, cursor, 'COUNT', chunk_size(t.seen, t.bytes, budget - t.bytes))
  cursor = page[1]
  local got = page[2]
  for i = 1, #got, 2 do
    local v = got[i + 1]
    t.seen, t.bytes = t.seen + 1, t.bytes + #v
    if #v > 1 + OWNER_LEN and entry_is(string.sub(v, 2 + OWNER_LEN, 2 + OWNER_LEN + #id), id) then
      local record, size = entry_cut(v, cut, 2 + OWNER_LEN)
      proc = {got[i], size, record, redis.call('HGET', progress_key, id) or ''}
      hit = header_of(v, 2 + OWNER_LEN)
    end
  end
until cursor == '0' or #proc > 0

-- Delayed, in due order.
local delayed = {}
local _, e, due = search(redis.call('ZCARD', delayed_key), function(p, k)
  local got = redis.call('ZRANGE', delayed_key, p, p + k - 1, 'WITHSCORES')
  local entries, scores = {}, {}
  for i = 1, #got, 2 do
    entries[#entries + 1], scores[#scores + 1] = got[i], got[i + 1]
  end
  return entries, scores
end, {seen = 0, bytes = 0})
if e then
  local cut_e, size = entry_cut(e, cut)
  delayed = {size, cut_e, due}
  hit = hit or header_of(e)
end

-- Dead, newest first.
local dead = {}
local n = redis.call('ZCARD', dead_key)
_, e = search(n, function(p, k)
  local got = redis.call('ZRANGE', dead_key, n - p - k, n - p - 1)
  local entries = {}
  for i = #got, 1, -1 do
    entries[#entries + 1] = got[i]
  end
  return entries
end, {seen = 0, bytes = 0})
if e then
  local cut_e, size = entry_cut(e, cut)
  dead = {size, cut_e, redis.call('HGET', errors_key, id) or ''}
  hit = hit or header_of(e)
end

-- Waiting, in dequeue order: each list from its front, its right end
-- (position p is index -(p + 1)); one tally for the three.
local waiting = {}
local offset = 0
t = {seen = 0, bytes = 0}
for _, list in ipairs({high_key, waiting_key, low_key}) do
  local len = redis.call('LLEN', list)
  local pos
  pos, e = search(len, function(p, k)
    local got = redis.call('LRANGE', list, -(p + k), -(p + 1))
    local entries = {}
    for i = #got, 1, -1 do
      entries[#entries + 1] = got[i]
    end
    return entries
  end, t)
  if e then
    local cut_e, size = entry_cut(e, cut)
    waiting = {offset + pos, size, cut_e}
    hit = hit or header_of(e)
    break
  end
  offset = offset + len
end
if #waiting == 0 and not (t.seen >= limit or t.bytes >= budget) then
  local m, stopped = group_find(gwait_key, id, limit)
  if stopped then partial = 1 end
  if m then
    local cut_e, size = entry_cut((group_member_split(m)), cut)
    waiting = {offset + redis.call('ZRANK', gwait_key, m), size, cut_e}
    hit = hit or header_of((group_member_split(m)))
  end
end
return {partial, waiting, delayed, proc, dead, attempt_history(errors_key, id, hit)}
