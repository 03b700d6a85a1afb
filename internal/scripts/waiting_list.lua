-- List a queue's waiting tasks in dequeue order (high, normal, then low
-- priority), from position start to stop inclusive (0 is the next out;
-- negative positions count from the back, as in LRANGE), each with its
-- payload cut to its first cut bytes (see entry_cut), so that the reply
-- grows with cut, not with the payloads. The lists are read a megabyte or
-- so at a time (see chunk_size), so the script holds little more than
-- that of whole entries at once; its time grows with the payloads it
-- reads.
-- Returns {size, entry, size, entry, ...}: each payload's whole size and
-- the entry cut.
local high_key, waiting_key, low_key = KEYS[1], KEYS[2], KEYS[3]
local start, stop, cut = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) -- cut >= 0

local lists = {high_key, waiting_key, low_key} -- in dequeue order
local lens, total = {}, 0
for i = 1, 3 do
  lens[i] = redis.call('LLEN', lists[i])
  total = total + lens[i]
end
if start < 0 then start = start + total end
if stop < 0 then stop = stop + total end
start, stop = math.max(start, 0), math.min(stop, total - 1)
local out = {}
local offset, seen, read = 0, 0, 0
for i = 1, 3 do
  -- A list's front is its right end: its position p is index -(p + 1).
  local p, to = math.max(start - offset, 0), math.min(stop - offset, lens[i] - 1)
  offset = offset + lens[i]
  while p <= to do
    local last = math.min(p + chunk_size(seen, read, 1048576) - 1, to)
    local got = redis.call('LRANGE', lists[i], -(last + 1), -(p + 1))
    for j = #got, 1, -1 do
      local e, size = entry_cut(got[j], cut)
      seen, read = seen + 1, read + #got[j]
      out[#out + 1] = size
      out[#out + 1] = e
    end
    p = last + 1
  end
end
return out
