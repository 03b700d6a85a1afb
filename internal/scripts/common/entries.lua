-- Task entries: the one string a task is stored as, a header of fields
-- then the payload, and the fields read and written in it.

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
