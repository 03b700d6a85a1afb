-- Look, for Client.Check, for workflow steps' tasks that are gone from
-- their queue though they have not ended: listed as pending in the
-- retained set (every workflow task is retained, and ends unlisted or
-- with its outcome) but in no place a task lives (see tasks_search).
-- Changes nothing. The search is bounded (limit entries, budget bytes):
-- a search that stopped at a bound confirms none.
-- Returns {partial (0/1), then per id given 1 (gone) or 0}.
local procs_key, delayed_key, dead_key, high_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local waiting_key, low_key, gwait_key, gather_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local retained_key = KEYS[9]
local limit, budget = tonumber(ARGV[1]), tonumber(ARGV[2]) -- budget in bytes
-- Then the tasks' ids, ARGV[3...].

-- (check_step_gone.lua and check_step_requeue.lua each carry this
-- search, the same text: in common.lua it would count towards every
-- script's limit of top-level locals.)
-- Look for tasks by id in every place a queue's task lives: in flight
-- (procs), delayed, dead, waiting (high, normal and low lists, and the
-- groups' waiting set) and gathered for aggregation (gather). There is no
-- index by id, so entries are read, at most limit of them and budget
-- bytes in all, a chunk at a time (see chunk_size). want is a set of ids.
-- Returns the set of those found, and whether a bound stopped the search
-- before the end (then a task not found may be where it was not looked
-- for).
local function tasks_search(procs, delayed, dead, high, waiting, low, gwait, gather, want, limit, budget)
  local found, seen, bytes = {}, 0, 0
  local function note(id)
    if want[id] then found[id] = true end
  end
  local function full() return seen >= limit or bytes >= budget end
  local cursor = '0'
  repeat
    if full() then return found, true end
    local page = redis.call('HSCAN', procs, cursor, 'COUNT', chunk_size(seen, bytes, budget - bytes))
    cursor = page[1]
    for i = 2, #page[2], 2 do
      local v = page[2][i]
      seen, bytes = seen + 1, bytes + #v
      note(entry_id(string.sub(v, 2 + OWNER_LEN)))
    end
  until cursor == '0'
  -- A sorted set or list read by rank, each member's entry given by of.
  local function ranged(key, len, read, of)
    local n, p = redis.call(len, key), 0
    while p < n do
      if full() then return true end
      local k = math.min(chunk_size(seen, bytes, budget - bytes), n - p, limit - seen)
      for _, m in ipairs(redis.call(read, key, p, p + k - 1)) do
        seen, bytes = seen + 1, bytes + #m
        note(entry_id(of and of(m) or m))
      end
      p = p + k
    end
    return false
  end
  local function gathered(m)
    local at = string.find(m, '\0', 1, true) or 0
    return string.sub(m, at + 1)
  end
  for _, place in ipairs({{delayed, 'ZCARD', 'ZRANGE'}, {dead, 'ZCARD', 'ZRANGE'}, {high, 'LLEN', 'LRANGE'},
      {waiting, 'LLEN', 'LRANGE'}, {low, 'LLEN', 'LRANGE'}, {gwait, 'ZCARD', 'ZRANGE', group_member_split},
      {gather, 'ZCARD', 'ZRANGE', gathered}}) do
    if ranged(place[1], place[2], place[3], place[4]) then return found, true end
  end
  return found, false
end

local want, pending = {}, {}
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', retained_key, ARGV[i])
  if score == 'inf' or score == '+inf' then
    want[ARGV[i]] = true
    pending[i] = true
  end
end
local found, partial = tasks_search(procs_key, delayed_key, dead_key, high_key, waiting_key, low_key, gwait_key, gather_key,
  want, limit, budget)
local out = {partial and 1 or 0}
for i = 3, #ARGV do
  out[#out + 1] = (not partial and pending[i] and not found[ARGV[i]]) and 1 or 0
end
return out
