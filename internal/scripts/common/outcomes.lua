-- Outcomes kept for tasks that ask for them (the Retain option): the
-- results hash and the retained set.

-- A retained task (an 'R' field) that has not ended is listed in the
-- retained set with the score +inf (which ZSCORE answers as 'inf'), until
-- retain replaces it with its outcome's expiry: so Wait learns with one
-- ZSCORE that an outcome will come (see outcome.lua), without looking for
-- the task. The scripts that put a retained task in the queue list it
-- (enqueue, tick, a dead letter requeued); those that end it without an
-- outcome unlist it (a cancel: outcome_unlisted), and deleting the queue
-- drops the set. ids are the tasks' ids.
local function outcome_pending(retained, ids)
  local args = {}
  for i, id in ipairs(ids) do
    args[2 * i - 1] = '+inf'
    args[2 * i] = id
  end
  for i = 1, #args, 1000 do
    redis.call('ZADD', retained, unpack(args, i, math.min(i + 999, #args)))
  end
end

-- Tasks (entries) cancelled: those retained are unlisted (no outcome will
-- come). Returns their ids.
local function outcome_unlisted(retained, entries)
  local ids = {}
  for _, e in ipairs(entries) do
    if header_has(e, 'R') then ids[#ids + 1] = entry_id(e) end
  end
  for i = 1, #ids, 1000 do
    redis.call('ZREM', retained, unpack(ids, i, math.min(i + 999, #ids)))
  end
  return ids
end

-- Dead letters (entries) going back to the queue lose the outcome their
-- death left, if they are retained ones: a requeued task is as if it had
-- never run, and TaskResult and Wait must not answer with the old outcome
-- while it waits to run again. They are listed as pending again.
local function dead_outcome_cleared(results, retained, entries)
  local ids = {}
  for _, e in ipairs(entries) do
    if header_has(e, 'R') then ids[#ids + 1] = entry_id(e) end
  end
  if #ids > 0 then
    redis.call('HDEL', results, unpack(ids))
    outcome_pending(retained, ids)
  end
end

-- Keep the outcome of a task that asked for it (its 'R' field: how long,
-- in ms) in the results hash, under its id: a record '<id>,s<status>,
-- S<started ms>,E<ended ms>,a<attempts>[,K<kind>]:<result or error>',
-- listed in retained by when it expires (in place of its +inf while it
-- was pending: see outcome_pending; expired ones are dropped as new ones
-- come), and announce it with an outcome event 'o<id>' for waiters.
-- status is 'ok' or 'dead'; started comes from the process id; attempts
-- is the entry's count of starts plus ran (1 when the entry is a process
-- record's, which does not count its own start yet). The count is read
-- only for a task that asked to be kept: finish runs this for every task.
-- tasks are {entry, pid, body} each, kept together: one write of the
-- records and one of their expiries for them all, and one trim.
local function retain_many(results, retained, channel, tasks, status, ran, kind)
  local kept = {}
  for _, t in ipairs(tasks) do
    if header_has(t[1], 'R') then kept[#kept + 1] = t end
  end
  if #kept == 0 then return end
  local now = now_ms()
  local recs, scores, ids = {}, {}, {}
  for i, t in ipairs(kept) do
    local entry = t[1]
    local id = entry_id(entry)
    local keep = tonumber(header_get(entry_split(entry), 'R')) or 0
    local rec = id .. ',s' .. status .. ',S' .. ms(math.floor((tonumber(t[2], 16) or 0) / 1000)) ..
      ',E' .. ms(now) .. ',a' .. (entry_attempts(entry) + ran)
    if kind then rec = rec .. ',K' .. kind end
    recs[2 * i - 1], recs[2 * i] = id, rec .. ':' .. t[3]
    scores[2 * i - 1], scores[2 * i] = ms(now + keep), id
    ids[i] = id
  end
  for i = 1, #recs, 2000 do
    redis.call('HSET', results, unpack(recs, i, math.min(i + 1999, #recs)))
    redis.call('ZADD', retained, unpack(scores, i, math.min(i + 1999, #scores)))
  end
  local old = redis.call('ZRANGEBYSCORE', retained, '-inf', '(' .. ms(now), 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('HDEL', results, unpack(old))
    redis.call('ZREM', retained, unpack(old))
  end
  for _, id in ipairs(ids) do
    publish(channel, 'o' .. id)
  end
end

-- retain_many for one task.
local function retain(results, retained, channel, entry, status, pid, ran, body, kind)
  if not header_has(entry, 'R') then return end
  retain_many(results, retained, channel, {{entry, pid, body}}, status, ran, kind)
end
