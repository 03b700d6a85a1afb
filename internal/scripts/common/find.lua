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
