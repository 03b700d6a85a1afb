-- What failed tasks leave: their errors and attempt histories, and the
-- dead letters.

-- ATTEMPTS: a task's attempt history, the failed attempts it made, kept in
-- the errors hash beside its last error under the field '<id>:a' (ids are
-- hex, so no id is such a field): its last ATTEMPTS_KEPT records, oldest
-- first, each '<ended ms>,<how>,<worker bytes>,<error bytes>:<worker><error>'
-- with how r (retried), d (dead) or k (reclaimed: its worker was lost),
-- the error cut to ATTEMPT_ERROR_MAX bytes. Written only when an attempt
-- fails, and removed with the task's error (errors_drop), so a task that
-- never failed costs nothing.
local ATTEMPTS_KEPT, ATTEMPT_ERROR_MAX = 10, 1024

-- A failed attempt of task id added to its history, which keeps the last
-- ATTEMPTS_KEPT: returns the history's field in the errors hash and its
-- new value, for a script that writes many fields at once (retry.lua,
-- retry_plain.lua). fresh says the task has no history yet (its header
-- counts no attempt: every attempt noted counts one first), so there is
-- none to read.
local function attempt_added(errors, id, ended, how, worker, err, fresh)
  local field = id .. ':a'
  err = string.sub(err or '', 1, ATTEMPT_ERROR_MAX)
  local v = ms(ended) .. ',' .. how .. ',' .. #worker .. ',' .. #err .. ':' .. worker .. err
  if fresh then
    return field, v
  end
  v = (redis.call('HGET', errors, field) or '') .. v
  local starts, p = {}, 1
  while p <= #v do
    local colon = string.find(v, ':', p, true)
    local wl, el = string.match(string.sub(v, p, (colon or p) - 1), '^%d+,%a,(%d+),(%d+)$')
    if not wl then break end
    starts[#starts + 1] = p
    p = colon + 1 + tonumber(wl) + tonumber(el)
  end
  if #starts > ATTEMPTS_KEPT then
    v = string.sub(v, starts[#starts - ATTEMPTS_KEPT + 1])
  end
  return field, v
end

-- A first failure's history record (see attempt_added) for the retries
-- of one call depends only on the worker and the error, which those
-- retries mostly share: it is made once per pair, kept in firsts (worker
-- -> error -> {field suffix, record}), and each task's field is its id
-- and the suffix. The caller looks in firsts first, per task, and calls
-- this only for a pair not there (a call per task costs Redis some 2 k
-- instructions).
local function first_attempt_record(firsts, errors, ended, worker, err)
  local by = firsts[worker]
  if not by then
    by = {}
    firsts[worker] = by
  end
  local r = {attempt_added(errors, '', ended, 'r', worker, err, true)}
  by[err] = r
  return r
end

-- Note a failed attempt of task id in its history (see attempt_added).
local function attempt_note(errors, id, ended, how, worker, err)
  redis.call('HSET', errors, attempt_added(errors, id, ended, how, worker, err))
end

-- Remove the errors, and attempt histories, of the tasks ids[i..j] (1,000
-- at most: unpack puts every value on the Lua stack).
local function errors_drop(errors, ids, i, j)
  local fields = {}
  for k = i or 1, j or #ids do
    fields[#fields + 1] = ids[k]
    fields[#fields + 1] = ids[k] .. ':a'
  end
  if #fields > 0 then
    redis.call('HDEL', errors, unpack(fields))
  end
end

-- Trim a queue's dead letters to at most max, none dead before oldest (ms),
-- dropping the errors of those removed.
-- The holds of sequences on the dead letters trimmed are released (see
-- dead_letters_gone), when meta is given. Returns how many holds were
-- released: the caller wakes the runtimes for them (nobody polls).
local function trim_dead(dead, errors, max, oldest, meta)
  local gone = redis.call('ZRANGEBYSCORE', dead, '-inf', '(' .. ms(oldest))
  local over = redis.call('ZCARD', dead) - #gone - max
  local released = 0
  if over > 0 then
    local more = redis.call('ZRANGE', dead, #gone, #gone + over - 1)
    for _, r in ipairs(more) do gone[#gone + 1] = r end
  end
  for i = 1, #gone, 1000 do
    local chunk = {unpack(gone, i, math.min(i + 999, #gone))}
    redis.call('ZREM', dead, unpack(chunk))
    local ids = {}
    for j, r in ipairs(chunk) do ids[j] = entry_id(r) end
    errors_drop(errors, ids)
    if meta then released = released + dead_letters_gone(meta, chunk) end
  end
  return released
end

-- A dead letter made a waiting entry again: its counts of starts, of
-- failures and of deaths, its mark of a healthy hold and its D, W and K
-- fields removed; its id, budget, other fields and payload kept.
local function dead_revived(e)
  local h, payload = entry_split(e)
  for _, letter in ipairs({'a', 'f', 'r', 'h', 'u', 'D', 'W', 'K'}) do
    h = header_set(h, letter, nil)
  end
  return entry_due_now(h .. ':' .. payload)
end
