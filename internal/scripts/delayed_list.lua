-- List a queue's delayed tasks in due order, from position start to stop
-- inclusive (0 is the next due; negative positions count from the last),
-- each with its payload cut to its first cut bytes (see entry_cut), read
-- a megabyte or so at a time (see waiting_list.lua).
-- Returns {size, entry, due (µs), ...}.
local delayed_key = KEYS[1]
local start, stop, cut = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) -- cut >= 0

local n = redis.call('ZCARD', delayed_key)
if start < 0 then start = start + n end
if stop < 0 then stop = stop + n end
start, stop = math.max(start, 0), math.min(stop, n - 1)
local out = {}
local p, seen, read = start, 0, 0
while p <= stop do
  local last = math.min(p + chunk_size(seen, read, 1048576) - 1, stop)
  local got = redis.call('ZRANGE', delayed_key, p, last, 'WITHSCORES')
  for j = 1, #got, 2 do
    local e, size = entry_cut(got[j], cut)
    seen, read = seen + 1, read + #got[j]
    out[#out + 1] = size
    out[#out + 1] = e
    out[#out + 1] = got[j + 1]
  end
  p = last + 1
end
return out
