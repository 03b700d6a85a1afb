-- Aggregation (the Aggregate enqueue option): tasks gathered under a key
-- and flushed as one task.

-- Aggregation (the Aggregate enqueue option): a queue's gathering tasks
-- wait in one sorted set, all scored 0, as '<key>\0<entry>', so that each
-- key's tasks lie together in id order; an open gathering's deadline (µs,
-- Redis clock) is in another, key -> deadline, which promote.lua reads as
-- it reads the delayed set; and its size in a hash, key -> the bytes its
-- tasks take in the aggregated task's payload (see AGG.size), so that a
-- flush keeps that payload within the client's task size bound without
-- reading the tasks. A key holds no NUL byte (the client checks).
-- The queue's meta hash may hold its settings: 'amax' tasks at most per
-- aggregated task, 'adelay' ms at most from a gathering's first task to
-- its flush; AGG.max and AGG.delay when not set (as the client's
-- DefaultAggregateMaxSize and DefaultAggregateMaxDelay say). A script
-- makes a closure for every helper it carries on every call, so these are
-- made by agg_lib() on first use, in one table: an enqueue or a promote
-- that meets no gathering makes none of them.
local AGG_LIB = nil -- until agg_lib() makes it
local function agg_lib()
  if AGG_LIB then return AGG_LIB end
  local AGG = {max = 100, delay = 60000}

  -- The queue's settings: max, delay (ms).
  function AGG.settings(meta)
    local v = redis.call('HMGET', meta, 'amax', 'adelay')
    return tonumber(v[1] or '') or AGG.max, tonumber(v[2] or '') or AGG.delay
  end

  -- The tasks gathered under key so far.
  function AGG.count(gather, key)
    return redis.call('ZLEXCOUNT', gather, '[' .. key .. '\0', '(' .. key .. '\1')
  end

  -- The bytes entry e takes in an aggregated task's payload:
  -- '<id>,<payload length>:<payload>', counted without copying the payload.
  function AGG.size(e)
    local c = string.find(e, ':', 1, true)
    local p = #e - c
    return #string.match(e, '^[^,:]*') + 2 + #tostring(p) + p
  end

  -- The bytes key's gathered tasks take as members, as the size hash
  -- holds them; measured when it holds none (a gathering from before it
  -- was kept, or one Check repaired).
  function AGG.bytes(gather, sizes, key)
    local v = redis.call('HGET', sizes, key)
    if v then return tonumber(v) or 0 end
    local b = 0
    for _, m in ipairs(redis.call('ZRANGEBYLEX', gather, '[' .. key .. '\0', '(' .. key .. '\1')) do
      b = b + AGG.size(string.sub(m, #key + 2))
    end
    return b
  end

  -- The keys whose gathering holds tasks but has no deadline, which would
  -- never be flushed by time: one ZRANGEBYLEX per key (O(K log N) for K
  -- keys), each reading one of its tasks.
  function AGG.undue(gather, due)
    local out, from = {}, '-'
    while true do
      local m = redis.call('ZRANGEBYLEX', gather, from, '+', 'LIMIT', 0, 1)[1]
      if not m then return out end
      local key = string.match(m, '^[^%z]*')
      if not redis.call('ZSCORE', due, key) then out[#out + 1] = key end
      from = '[' .. key .. '\1'
    end
  end

  -- Flush key's gathering: its first tasks (in id order), max at most and
  -- limit bytes at most in the payload (at least one, however large), become
  -- one task of id id (hex), with the header fields of the first of them and
  -- 'A<count>', whose payload is each member, in order, as
  -- '<id>,<payload length>:<payload>'; it goes to wait as push_waiting puts
  -- it (set_lists first). The members go; so does the deadline, when none
  -- is left. more, when given, are entries of tasks newer than every one
  -- gathered, not stored (an enqueue's own), from its index from (1 when
  -- nil) on: they come after the stored ones, in their order, and count
  -- among the max and the limit (none when nil or 0). Returns the members
  -- flushed (0: the gathering was empty), how many of more they took, and
  -- their bytes.
  function AGG.flush(gather, due, key, max, id, normal, more, limit, from)
    more = more or {}
    if not limit or limit <= 0 then limit = math.huge end
    local parts, fields, bytes, stored, used = {}, nil, 0, 0, 0
    local function take(e)
      local c = string.find(e, ':', 1, true)
      local h = string.sub(e, 1, c - 1)
      local size = AGG.size(e)
      if #parts >= max or (#parts > 0 and bytes + size > limit) then return false end
      if #parts == 0 then fields = string.match(h, '^[^,]*(.*)$') end
      parts[#parts + 1] = entry_id(h) .. ',' .. (#e - c) .. ':' .. string.sub(e, c + 1)
      bytes = bytes + size
      return true
    end
    -- The stored tasks are read a few at a time: the bound may take far
    -- fewer than max of them, and each may be large.
    local lo, first, last, full = '[' .. key .. '\0', nil, nil, false
    while not full and #parts < max do
      local got = redis.call('ZRANGEBYLEX', gather, lo, '(' .. key .. '\1', 'LIMIT', 0, math.min(max - #parts, 16))
      if #got == 0 then break end
      for _, m in ipairs(got) do
        if not take(string.sub(m, #key + 2)) then full = true break end
        stored = stored + 1
        first, last = first or m, m
      end
      lo = '(' .. last
    end
    if not full then
      for j = from or 1, #more do
        if not take(more[j]) then break end
        used = used + 1
      end
    end
    if #parts == 0 then
      redis.call('ZREM', due, key)
      return 0, 0, 0
    end
    if stored > 0 then
      redis.call('ZREMRANGEBYLEX', gather, '[' .. first, '[' .. last)
    end
    if AGG.count(gather, key) == 0 then redis.call('ZREM', due, key) end
    push_waiting(id .. fields .. ',A' .. #parts .. ':' .. table.concat(parts), normal)
    return #parts, used, bytes
  end
  AGG_LIB = AGG
  return AGG
end
