-- List a queue's dead letters, newest first: up to limit of them, skipping
-- the offset newest, each with the error its last attempt recorded.
-- KEYS: dead, errors
-- ARGV: offset (>= 0), limit (> 0)
-- Returns {entry, error ('' if none), entry, error, ...}, newest first.
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
if offset >= n then
  return {}
end
-- Ranks counted from the oldest (0), so no ZREVRANGE or ZRANGE REV is
-- needed: the newest is rank n - 1.
local last = math.min(offset + limit, n)
local got = redis.call('ZRANGE', KEYS[1], ms(n - last), ms(n - offset - 1))
local out, ids = {}, {}
for i = #got, 1, -1 do
  out[#out + 1] = got[i]
  out[#out + 1] = ''
  ids[#ids + 1] = entry_id(got[i])
end
-- unpack puts every value on the Lua stack, which holds a few thousand.
for i = 1, #ids, 1000 do
  local errs = redis.call('HMGET', KEYS[2], unpack(ids, i, math.min(i + 999, #ids)))
  for j, e in ipairs(errs) do
    if e then
      out[2 * (i + j - 1)] = e
    end
  end
end
return out
