-- List a queue's dead letters, newest first: up to limit of them, skipping
-- the offset newest, each with the error its last attempt recorded and its
-- payload cut to its first cut bytes (see entry_cut; cut < 0: whole).
-- Returns {size, entry, error ('' if none), ...}, newest first: each
-- payload's whole size, and the entry (cut).
local dead_key, errors_key = KEYS[1], KEYS[2]
local offset, limit, cut = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) -- offset >= 0, limit > 0

local n = redis.call('ZCARD', dead_key)
if offset >= n then
  return {}
end
-- Ranks counted from the oldest (0), so no ZREVRANGE or ZRANGE REV is
-- needed: the newest is rank n - 1. Read a megabyte or so at a time (see
-- waiting_list.lua), so that a cut listing holds little more than that
-- of whole entries at once.
local last = math.min(offset + limit, n)
local out, ids = {}, {}
local hi, seen, read = n - offset - 1, 0, 0
while hi >= n - last do
  local lo = math.max(hi - chunk_size(seen, read, 1048576) + 1, n - last)
  local got = redis.call('ZRANGE', dead_key, ms(lo), ms(hi))
  for i = #got, 1, -1 do
    local e, size = entry_cut(got[i], cut)
    seen, read = seen + 1, read + #got[i]
    out[#out + 1] = size
    out[#out + 1] = e
    out[#out + 1] = ''
    ids[#ids + 1] = entry_id(e)
  end
  hi = lo - 1
end
-- unpack puts every value on the Lua stack, which holds a few thousand.
for i = 1, #ids, 1000 do
  local errs = redis.call('HMGET', errors_key, unpack(ids, i, math.min(i + 999, #ids)))
  for j, e in ipairs(errs) do
    if e then
      out[3 * (i + j - 1)] = e
    end
  end
end
return out
