-- List a queue's waiting tasks: first those without a group in dequeue
-- order (high, normal, then low priority), then the grouped ones group by
-- group (groups in the byte order of their escaped keys, each group's
-- tasks in the order they are to start: see group_lib().member), from position
-- start to stop inclusive (0 is the first listed; negative positions count
-- from the back, as in LRANGE), each with its payload cut to its first cut
-- bytes (see entry_cut), so that the reply grows with cut, not with the
-- payloads. The lists and the group set are read a megabyte or so at a
-- time (see chunk_size; the group set by rank, O(log N) to reach a
-- position), so the script holds little more than that of whole entries
-- at once; its time grows with the payloads it reads.
-- Returns {size, entry, size, entry, ...}: each payload's whole size and
-- the entry cut.
local high_key, waiting_key, low_key, gwait_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4] -- gwait: see GROUPS in common/waiting.lua
local start, stop, cut = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) -- cut >= 0

local lists = {high_key, waiting_key, low_key} -- in dequeue order
local lens, total = {}, 0
for i = 1, 3 do
  lens[i] = redis.call('LLEN', lists[i])
  total = total + lens[i]
end
local grouped = redis.call('ZCARD', gwait_key)
total = total + grouped
if start < 0 then start = start + total end
if stop < 0 then stop = stop + total end
start, stop = math.max(start, 0), math.min(stop, total - 1)
local out = {}
local offset, seen, read = 0, 0, 0
local function add(e)
  local cut_e, size = entry_cut(e, cut)
  seen, read = seen + 1, read + #e
  out[#out + 1] = size
  out[#out + 1] = cut_e
end
for i = 1, 3 do
  -- A list's front is its right end: its position p is index -(p + 1).
  local p, to = math.max(start - offset, 0), math.min(stop - offset, lens[i] - 1)
  offset = offset + lens[i]
  while p <= to do
    local last = math.min(p + chunk_size(seen, read, 1048576) - 1, to)
    local got = redis.call('LRANGE', lists[i], -(last + 1), -(p + 1))
    for j = #got, 1, -1 do
      add(got[j])
    end
    p = last + 1
  end
end
local p, to = math.max(start - offset, 0), math.min(stop - offset, grouped - 1)
while p <= to do
  local last = math.min(p + chunk_size(seen, read, 1048576) - 1, to)
  for _, m in ipairs(redis.call('ZRANGE', gwait_key, p, last)) do
    add((group_member_split(m)))
  end
  p = last + 1
end
return out
