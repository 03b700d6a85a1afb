-- Tasks found by id: there is no index by id, so these read entries.

-- The member of the group waiting set gwait that holds task id, found by
-- ZSCAN: Redis matches the members ('<id>' then ',' or ':', glob
-- characters escaped), and the script reads only those that match, so
-- the search copies no payload it does not return. max bounds the members
-- looked at (ZSCAN's COUNT, a hint; nil: no bound). Returns the member or
-- nil, and whether the bound stopped the search before the end.
local function group_find(gwait, id, max)
  local pattern = '*' .. (string.gsub(id, '[%*%?%[%]\\]', '\\%0')) .. '[,:]*'
  local cursor, looked = '0', 0
  repeat
    if max and looked >= max then return nil, true end
    local page = redis.call('ZSCAN', gwait, cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor, looked = page[1], looked + 1000
    local found = page[2]
    for i = 1, #found, 2 do
      if entry_is(group_member_split(found[i]), id) then return found[i], false end
    end
  until cursor == '0'
  return nil, false
end

-- The dead letter of task id, or nil. The members are whole entries, so
-- they are scanned (ZSCAN, matched by Redis against pattern: the id,
-- glob-escaped, then '[,:]*') and the id of each match compared.
local function find_dead(dead, id, pattern)
  local cursor = '0'
  repeat
    local page = redis.call('ZSCAN', dead, cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = page[1]
    local found = page[2]
    for i = 1, #found, 2 do
      if entry_id(found[i]) == id then
        return found[i]
      end
    end
  until cursor == '0'
  return nil
end

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
