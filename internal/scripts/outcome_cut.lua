-- Read one task's kept outcome, its body (the result, or the error) cut
-- to its first cut bytes (see entry_cut; cut < 0: whole), as
-- outcome_list.lua lists them: a caller that shows a result's first bytes
-- is sent no more of it, however large it is.
-- Returns {expiry (ms), body's whole size, record (cut)} while an outcome
-- is kept, else {}.
local results_key, retained_key = KEYS[1], KEYS[2]
local id, cut = ARGV[1], tonumber(ARGV[2]) -- the task's id; cut: bytes, or -1

-- A pending task is listed with score +inf; an outcome kept, with its
-- expiry.
local score = redis.call('ZSCORE', retained_key, id)
if not score or score == 'inf' or tonumber(score) <= now_ms() then
  return {}
end
local rec = redis.call('HGET', results_key, id)
if not rec then
  return {}
end
local r, size = entry_cut(rec, cut)
return {score, ms(size), r}
