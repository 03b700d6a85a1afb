-- Enqueue anew, for Client.Check, a workflow step whose task is gone from
-- its queue though it has not ended (see check_step_gone.lua), judging
-- again here: the old task must still be listed as pending in the
-- retained set and be in no place a task lives (tasks_search in
-- common/find.lua, bounded: a search that stopped at a bound changes
-- nothing). Then the step's unique key, which the old task holds, is
-- released and the step is enqueued as flow_enqueue.lua enqueues one, so
-- that its new task takes the key. The old task's pending mark stays, so
-- that a check after a crash before the workflow learns the new id finds
-- the step again: this script then answers the key's new holder,
-- enqueuing nothing (check_step_forget.lua drops the mark once the
-- workflow has the id).
-- Returns {'enqueued' | 'held' | 'ended' | 'present' | 'partial', the
-- new task's id (enqueued, held) or '', unregistered (0/1) as
-- enqueue.lua answers it}.
local procs_key, delayed_key, dead_key, high_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local waiting_key, low_key, gwait_key, gather_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local retained_key, unique_key, unique_ttl_key, meta_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local idle_key, gready_key = KEYS[13], KEYS[14]
local channel, queue, old = ARGV[1], ARGV[2], ARGV[3] -- old: the gone task's id
local limit, budget = tonumber(ARGV[4]), tonumber(ARGV[5]) -- budget in bytes
-- The step as flow_enqueue.lua takes one: its unique key's sha1, how
-- long it is held (ms; 0: while alive), its header fields, its due time
-- (µs; 0: now), its delay (µs), '1' to put it at the front, its payload.
local sha, ttl, header = ARGV[6], tonumber(ARGV[7]), ARGV[8]
local due_at, delay, front, payload = tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11] == '1', ARGV[12]

local score = redis.call('ZSCORE', retained_key, old)
if score ~= 'inf' and score ~= '+inf' then
  return {'ended', '', 0}
end
local found, partial = tasks_search(procs_key, delayed_key, dead_key, high_key, waiting_key, low_key, gwait_key, gather_key,
  {[old] = true}, limit, budget)
if partial then return {'partial', '', 0} end
if found[old] then return {'present', '', 0} end
local holder = redis.call('HGET', unique_key, sha)
if holder and holder ~= old then
  return {'held', holder, 0}
end
if holder then
  redis.call('HDEL', unique_key, sha)
  redis.call('ZREM', unique_ttl_key, sha)
end

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key)
local now = now_us()
local meta = redis.call('HMGET', meta_key, 'tid', 'registered')
local id = string.format('%x', math.max(now, (tonumber(meta[1] or '0') or 0) + 1))
redis.call('HSET', unique_key, sha, id)
if ttl > 0 then
  redis.call('ZADD', unique_ttl_key, ms(math.floor(now / 1000) + ttl), sha)
else
  header = header .. ',u' .. sha
end
if string.find(header, ',R', 1, true) then
  outcome_pending(retained_key, {id})
end
local due = math.max(due_at, now + delay)
if due > now then
  redis.call('ZADD', delayed_key, ms(due), id .. header .. ',d' .. string.format('%x', due) .. ':' .. payload)
  publish(channel, 's' .. ms(due))
else
  local entry = id .. header .. ':' .. payload
  if string.find(header, ',g', 1, true) then
    group_lib().push({entry}, front)
  elseif front then
    redis.call('RPUSH', list_of(entry, waiting_key), entry)
  else
    redis.call('LPUSH', list_of(entry, waiting_key), entry)
  end
  wake(idle_key, channel, 1)
end
redis.call('HSET', meta_key, 'tid', ms(tonumber(id, 16)))
if not meta[2] then
  name_queue(meta_key, queue)
end
return {'enqueued', id, meta[2] and 0 or 1}
