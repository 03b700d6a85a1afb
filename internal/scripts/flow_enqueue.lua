-- Enqueue workflow steps released together (a fan-out, or a batch of
-- carries), many in one call, in the queue's slot: as enqueue.lua does
-- for one task with a unique key each, but with one clock read, one read
-- and one write of the queue's meta hash, one push per list and one wake
-- for them all, instead of a script each. Each step's unique key (its
-- sha1, held for ttl ms from now, or while its task lives with ttl 0)
-- makes its enqueue idempotent: a step whose key is held adds nothing
-- and answers the holder's id, flagged duplicate. A call of one step (a
-- chain's next) may hand it off as enqueue.lua hands off a single task:
-- straight into a process of the longest-idle runtime, which is spared
-- its dequeue, a round trip between a parent's end and its child's
-- start. Steps released together (a fan-out) go to the lists, and the
-- wake names the runtimes.
-- The client's stats counts ride on its other calls (enqueue.lua).
-- Steps of one workflow whose keys share the queue's slot (its home: its
-- keys follow the queue's) hold no unique key: the step's state is the
-- token. A step still ready ('r') is enqueued and marked queued ('q')
-- with its task's id here, as wf_enqueued.lua marks the others, so a
-- release answered again (a replay) finds it queued and adds nothing,
-- answering the id it was given, flagged duplicate; a step not ready
-- (cancelled, ended, waiting) adds nothing and answers '', flagged
-- '2'. A ready step whose unique key is held (a release that takes the
-- key, as a client without this script's home path does, enqueued its
-- task and has not marked it) is marked queued with the holder's id and
-- answered so, flagged duplicate: its task is enqueued once.
-- Returns {unregistered, then id (hex), duplicate (0/1/2) per step}:
-- unregistered as enqueue.lua answers it.
local list_key, meta_key, idle_key, delayed_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4] -- list: unused (enqueue.lua's keys)
local unique_key, unique_ttl_key, stats_key, leases_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8] -- stats: unused; leases: a hand-off's
local procs_key, waiting_key, high_key, low_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12] -- procs: a hand-off's; every level's list
local retained_key, gwait_key, gready_key = KEYS[13], KEYS[14], KEYS[15] -- the groups' waiting tasks and turns
-- The home workflow's keys, in WorkflowKeys' order, if any: its state
-- (for its creation), its steps, their tasks' ids and its freed hash
-- (a step marked queued drops its note '^<step>' there, as
-- wf_enqueued.lua does).
local flow_key, flow_steps_key, flow_ids_key, flow_left_key = KEYS[16], KEYS[17], KEYS[18], KEYS[19] -- left: unused
local flow_kids_key, flow_parents_key, flow_spec_key = KEYS[20], KEYS[21], KEYS[22] -- unused
local flow_results_key, flow_freed_key = KEYS[23], KEYS[24] -- results: unused
local channel, queue = ARGV[1], ARGV[2] -- queue: its name
-- hand: '1' if the step may be handed off (a call of one step, small
-- enough for an event: see enqueue.lua), else '0'.
local hand = ARGV[3]
-- Then per step, ARGV[4 + 7(i - 1) ...]: its unique key's sha1 (its
-- name, in a home workflow), how long it is held (ms; 0: while alive;
-- in a home workflow, its unique key's sha1, only read), its header
-- fields (with its level's, ',ph' or ',pl'), its due time (µs, Redis
-- clock; 0: now), its delay (µs from now), '1' to put it at the front
-- ('0' the back), its payload.

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key)
local now = now_us()
local now_m = math.floor(now / 1000)
-- Keys held for a time are dropped once it has passed (a hundred a call).
local stale = redis.call('ZRANGEBYSCORE', unique_ttl_key, '-inf', ms(now_m), 'LIMIT', 0, 100)
if #stale > 0 then
  redis.call('HDEL', unique_key, unpack(stale))
  redis.call('ZREM', unique_ttl_key, unpack(stale))
end
-- With the controls a hand-off must not pass and the process id counter
-- it counts on, as enqueue.lua reads them.
local meta = redis.call('HMGET', meta_key, 'tid', 'registered', 'paused', 'limit', 'rate', 'seq')
local next_id = math.max(now, (tonumber(meta[1] or '0') or 0) + 1)
local out = {meta[2] and '0' or '1'}
local pushes = {} -- per list, then per end: the entries to push
local grouped, retained, delayed, dues, woken, added = {}, {}, {}, {}, 0, 0
-- The steps' unique keys' holders, read a thousand a call; a holder's
-- expiry is looked at only for a key held (a replay's), and the keys
-- taken are written a thousand a call: a step costs no call of its own.
local shas = {}
for i = 4, #ARGV, 7 do
  shas[#shas + 1] = ARGV[i]
end
local holders = {}
local marks = {} -- the home workflow's steps queued
-- HSET's arguments (of the unique keys, or of the home workflow's ids:
-- the steps' tasks, enqueued here or by other releases) and ZADD's.
local taken, held = {}, {}
if flow_steps_key then
  -- A home workflow's: a step not ready has the id it was queued with
  -- as its holder, or '' if it has none (see above).
  local states, ids = hmget(flow_steps_key, shas), hmget(flow_ids_key, shas)
  local ready, keys = {}, {} -- the steps ready, and their unique keys
  for j, step in ipairs(shas) do
    if states[j] ~= 'r' then
      holders[step] = ids[j] or ''
    else
      ready[#ready + 1] = step
      keys[#keys + 1] = ARGV[4 + 7 * (j - 1) + 1]
    end
  end
  -- A ready step whose unique key is held: a release by a client that
  -- takes the key enqueued its task and has not marked it queued (it
  -- stopped, or is under way). That task is the step's: it is marked
  -- queued with its id here, and nothing is added. A holder older than
  -- the workflow (its id, µs, before the workflow's creation, ms) was a
  -- step of a workflow of the same id before this one, the key held
  -- longer than its keys: not this step's.
  if #keys > 0 then
    local holding = hmget(unique_key, keys)
    local created -- read once a key is held
    for j, step in ipairs(ready) do
      local holder = holding[j]
      if holder and not created then
        created = tonumber(redis.call('HGET', flow_key, 'created') or '0') or 0
      end
      if holder and not holders[step] and (tonumber(holder, 16) or 0) >= created * 1000 then
        holders[step] = holder
        marks[#marks + 1] = step
        marks[#marks + 1] = 'q'
        taken[#taken + 1] = step
        taken[#taken + 1] = holder
      end
    end
  end
else
  for i = 1, #shas, 1000 do
    local part = redis.call('HMGET', unique_key, unpack(shas, i, math.min(i + 999, #shas)))
    for j = 1, #part do
      holders[shas[i + j - 1]] = part[j] or nil
    end
  end
  for sha, _ in pairs(holders) do
    local exp = redis.call('ZSCORE', unique_ttl_key, sha)
    if exp and tonumber(exp) <= now_m then
      redis.call('HDEL', unique_key, sha)
      redis.call('ZREM', unique_ttl_key, sha)
      holders[sha] = nil
    end
  end
end
for i = 4, #ARGV, 7 do
  local sha, ttl, header = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local due_at, delay, front, payload = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), ARGV[i + 5] == '1', ARGV[i + 6]
  local holder = holders[sha]
  if holder == '' then
    out[#out + 1] = ''
    out[#out + 1] = '2'
  elseif holder then
    out[#out + 1] = holder
    out[#out + 1] = '1'
  else
    local id = string.format('%x', next_id)
    next_id = next_id + 1
    added = added + 1
    holders[sha] = id
    taken[#taken + 1] = sha
    taken[#taken + 1] = id
    if flow_steps_key then
      marks[#marks + 1] = sha
      marks[#marks + 1] = 'q'
    elseif ttl > 0 then
      held[#held + 1] = ms(now_m + ttl)
      held[#held + 1] = sha
    else
      header = header .. ',u' .. sha
    end
    if string.find(header, ',R', 1, true) then
      retained[#retained + 1] = id
    end
    local due = math.max(due_at, now + delay)
    if due > now then
      -- A delayed task's wait starts when it is due (see entry_due).
      delayed[#delayed + 1] = ms(due)
      delayed[#delayed + 1] = id .. header .. ',d' .. string.format('%x', due) .. ':' .. payload
      dues[ms(due)] = true
    else
      local entry = id .. header .. ':' .. payload
      woken = woken + 1
      if string.find(header, ',g', 1, true) then
        grouped[#grouped + 1] = {entry, front}
      else
        local list = list_of(entry, waiting_key)
        local ends = pushes[list] or {back = {}, front = {}}
        pushes[list] = ends
        local at = front and ends.front or ends.back
        at[#at + 1] = entry
      end
    end
    out[#out + 1] = id
    out[#out + 1] = '0'
  end
end
for i = 1, #taken, 2000 do
  redis.call('HSET', flow_ids_key or unique_key, unpack(taken, i, math.min(i + 1999, #taken)))
end
for i = 1, #marks, 2000 do
  redis.call('HSET', flow_steps_key, unpack(marks, i, math.min(i + 1999, #marks)))
  local notes = {}
  for j = i, math.min(i + 1999, #marks), 2 do
    notes[#notes + 1] = '^' .. marks[j]
  end
  redis.call('HDEL', flow_freed_key, unpack(notes))
end
for i = 1, #held, 2000 do
  redis.call('ZADD', unique_ttl_key, unpack(held, i, math.min(i + 1999, #held)))
end
if #retained > 0 then
  outcome_pending(retained_key, retained)
end
for i = 1, #delayed, 1000 do
  redis.call('ZADD', delayed_key, unpack(delayed, i, math.min(i + 999, #delayed)))
end
for due in pairs(dues) do
  publish(channel, 's' .. due)
end
-- The meta fields written at the end: a hand-off's process id counter.
local sets = {}
-- A lone step due now, of no group, takes the longest-idle runtime out
-- of the idle set first, as the wake would (the wake names it first if
-- the step does not go to it); on a queue where nothing waits and no
-- control holds it back, the step goes to it if its worker's lease is
-- live (hand_off, as enqueue.lua hands a task over).
local popped
if hand == '1' and woken == 1 and #grouped == 0 then
  local entry
  for _, ends in pairs(pushes) do
    entry = ends.back[1] or ends.front[1]
  end
  popped = redis.call('ZPOPMIN', idle_key)
  if popped[1] and hand_off(channel, procs_key, meta_key, leases_key, waiting_key, high_key, low_key, gready_key,
      meta, popped[1], entry, now, sets) then
    pushes, woken = {}, 0
  end
end
for list, ends in pairs(pushes) do
  for i = 1, #ends.back, 1000 do
    redis.call('LPUSH', list, unpack(ends.back, i, math.min(i + 999, #ends.back)))
  end
  -- The front is the right end: each goes there in its turn, so the
  -- last step released comes out first.
  for i = 1, #ends.front, 1000 do
    redis.call('RPUSH', list, unpack(ends.front, i, math.min(i + 999, #ends.front)))
  end
end
for _, g in ipairs(grouped) do
  group_lib().push({g[1]}, g[2])
end
if woken > 0 then
  wake(idle_key, channel, woken, popped)
end
if added > 0 then
  sets[#sets + 1] = 'tid'
  sets[#sets + 1] = ms(next_id - 1)
end
if #sets > 0 then
  redis.call('HSET', meta_key, unpack(sets))
end
if added > 0 then
  if not meta[2] then
    name_queue(meta_key, queue)
  end
end
return out
