-- List a queue's kept outcomes (the retained tasks that ended and whose
-- outcome has not expired), latest to expire first: up to limit of them,
-- skipping the offset first, each record's body (the result, or the error)
-- cut to its first cut bytes (see entry_cut; cut < 0: whole).
-- Returns {expiry (ms), body's whole size, record (cut), ...}.
local results_key, retained_key = KEYS[1], KEYS[2]
local offset, limit, cut = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) -- offset >= 0, limit > 0

-- A pending task is listed with score +inf; an outcome kept, with its
-- expiry: the finite scores above now.
local top = '9007199254740991'
-- ZRANGE with BYSCORE REV (Redis 6.2), not ZREVRANGEBYSCORE: the ACL of
-- docs/security.md allows ZRANGE.
local kept = redis.call('ZRANGE', retained_key, top, '(' .. ms(now_ms()), 'BYSCORE', 'REV', 'LIMIT', offset, limit, 'WITHSCORES')
local out = {}
for i = 1, #kept, 2 do
  local rec = redis.call('HGET', results_key, kept[i])
  if rec then
    local r, size = entry_cut(rec, cut)
    out[#out + 1] = kept[i + 1]
    out[#out + 1] = ms(size)
    out[#out + 1] = r
  end
end
return out
