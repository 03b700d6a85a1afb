-- What failed tasks leave: their errors and attempt histories, and the
-- dead letters.

-- ATTEMPTS: a task's attempt history, the failed attempts it made, its last
-- ATTEMPTS_KEPT records, oldest first, each
-- '<ended ms>,<how>,<worker bytes>,<error bytes>:<worker><error>' with how
-- r (retried), d (dead) or k (reclaimed: its worker was lost), the error
-- cut to ATTEMPT_ERROR_MAX bytes. A task in the queue carries its last
-- record in its entry (the 'H' field: see attempt_added) beside its last
-- error (the 'e' field), and the errors hash holds only its older
-- records, under the field '<id>:a' (ids are hex, so no id is such a
-- field): a task that failed once costs the hash nothing, and its retry,
-- its dequeue and its finish no call on it. A dead letter's history is
-- all in the hash, and its error under its id (attempt_buried). Written
-- only when an attempt fails, and removed with the task's error
-- (errors_drop), so a task that never failed costs nothing.
-- An entry that counts starts ('a') but carries no attempt ('H') may be
-- of the layout earlier versions wrote, which a queue not drained still
-- holds: its whole history in the hash, and its last error under its id.
-- The store reads that too (history_older; Store.Dequeue in Go), and its
-- next failed attempt moves it to this layout.
local ATTEMPTS_KEPT, ATTEMPT_ERROR_MAX = 10, 1024

-- Header field values are free of ',' and ':' (see entries.lua): an error
-- kept in a header has '%', ',' and ':' as %XX, as Go's UnescapeGroup
-- reads them back; a worker, '.' too (the 'H' field's separator).
local FIELD_ESCAPES = {['%'] = '%25', [','] = '%2C', [':'] = '%3A', ['.'] = '%2E'}
local function field_escape(s)
  return (string.gsub(s, '[%%,:]', FIELD_ESCAPES))
end
local function worker_escape(s)
  return (string.gsub(s, '[%%,:%.]', FIELD_ESCAPES))
end
local function field_unescape(s)
  return (string.gsub(s, '%%(%x%x)', function(x) return string.char(tonumber(x, 16)) end))
end

-- One record of a failed attempt (see ATTEMPTS); ended in ms, a number or
-- its text.
local function attempt_record(ended, how, worker, err)
  err = string.sub(err or '', 1, ATTEMPT_ERROR_MAX)
  return ended .. ',' .. how .. ',' .. #worker .. ',' .. #err .. ':' .. worker .. err
end

-- A history's last keep records (all of them if fewer), and how many
-- those are. A malformed record ends it.
local function history_trim(v, keep)
  local starts, p = {}, 1
  while p <= #v do
    local colon = string.find(v, ':', p, true)
    local wl, el = string.match(string.sub(v, p, (colon or p) - 1), '^%d+,%a,(%d+),(%d+)$')
    if not wl then break end
    starts[#starts + 1] = p
    p = colon + 1 + tonumber(wl) + tonumber(el)
  end
  if #starts > keep then
    return string.sub(v, starts[#starts - keep + 1]), keep
  end
  return v, #starts
end

-- The 'H' field of a header h (no ':'), the last record of the task's
-- history, '<n>.<ended ms>.<how>.<worker>[.<error>]': how many records
-- the history holds, then the record's parts, the worker and the error
-- escaped; with no error part, the record's error is the 'e' field's
-- (the usual one: an attempt that failed with an error, which is the last
-- error too), so that the entry holds the error once. Returns n and the
-- record (see ATTEMPTS), or 0 and nil.
local function header_history(h)
  local hv = header_get(h, 'H')
  if not hv then return 0, nil end
  local n, ended, how, worker, rest = string.match(hv, '^(%d+)%.(%d+)%.(%a)%.([^%.]*)(.*)$')
  if not n then return 0, nil end
  local err
  if rest == '' then
    err = field_unescape(header_get(h, 'e') or '')
  else
    err = field_unescape(string.sub(rest, 2))
  end
  return tonumber(n), attempt_record(ended, how, field_unescape(worker), err)
end

-- The 'H' field's value after its count (see header_history) for an
-- attempt with error err, which is the 'e' field's when it is not ''.
local function history_field(ended, how, worker, err)
  local f = '.' .. ms(ended) .. '.' .. how .. '.' .. worker_escape(worker)
  if err == '' then
    return f .. '.'
  end
  return f
end

-- The history of task id, whose header is h, before an attempt is added:
-- the hash's records, then the one the header carries, the last keep of
-- them, and how many. The hash is read only when the header says it holds
-- some: an 'H' field counting more than one, or none with an 'a' field
-- (an entry whose history is all in the hash). started says whether h
-- counts starts, if the caller knows.
-- Such an entry, of the earlier layout (see ATTEMPTS), may have its last error
-- in the hash too, under its id: returned third (nil if none), read in the
-- same call.
local function history_older(errors, id, h, keep, started)
  local n, last = header_history(h)
  local v, olderr = '', nil
  if n > 1 then
    v = redis.call('HGET', errors, id .. ':a') or ''
  elseif n == 0 and (started or started == nil and header_get(h, 'a')) then
    local got = redis.call('HMGET', errors, id .. ':a', id)
    v, olderr = got[1] or '', got[2] or nil
  end
  local trimmed, kept = history_trim(v .. (last or ''), keep)
  return trimmed, kept, olderr
end

-- A failed attempt of task id, whose header is h (no ':'), added to its
-- history: returns the header with the attempt as its 'H' field and its
-- last error as its 'e' field, last, in that order (err, or, if that is
-- '', the one before it: an attempt with no error, a reclaim's, keeps it),
-- and the errors hash's field and value for the older records, or nil when
-- there are none, for a script that writes many fields at once
-- (retry.lua, retry_plain.lua). started: see history_older.
local function attempt_added(errors, id, h, ended, how, worker, err, started)
  local older, n, olderr = history_older(errors, id, h, ATTEMPTS_KEPT - 1, started)
  local e = err ~= '' and field_escape(err) or header_get(h, 'e') or olderr and field_escape(olderr)
  if olderr then
    -- An entry of the earlier layout: its error goes into it, and the
    -- hash keeps only the older records.
    redis.call('HDEL', errors, id)
  end
  h = header_set(header_set(h, 'e', nil), 'H', (n + 1) .. history_field(ended, how, worker, err))
  if e then
    h = h .. ',e' .. e
  end
  if n > 0 then
    return h, id .. ':a', older
  end
  return h
end

-- A first failure's fields (see attempt_added) for the retries of one call
-- depend only on the worker and the error, which those retries mostly
-- share: they are made once per pair, kept in firsts (worker -> error ->
-- fields), and each task's header is its id, its counts and them. The
-- caller looks in firsts first, per task, and calls this only for a pair
-- not there (a call per task costs Redis some 2 k instructions).
local function first_attempt_fields(firsts, ended, worker, err)
  local by = firsts[worker]
  if not by then
    by = {}
    firsts[worker] = by
  end
  local f = ',H1' .. history_field(ended, 'r', worker, err)
  if err ~= '' then
    f = f .. ',e' .. field_escape(err)
  end
  by[err] = f
  return f
end

-- A failed attempt of task id noted in its entry e, which goes back to
-- waiting (see attempt_added): returns the entry.
local function attempt_note(errors, e, ended, how, worker, err)
  local h, payload = entry_split(e)
  local field, older
  h, field, older = attempt_added(errors, entry_id(h), h, ended, how, worker, err)
  if field then
    redis.call('HSET', errors, field, older)
  end
  return h .. ':' .. payload
end

-- A last failed attempt of task id, whose header is h (no ':'), on its way
-- to the dead letters: its whole history goes to the errors hash, the
-- attempt last, and its last error under its id (err, or, if that is '',
-- the one its header carries); returns the header without the 'e' and
-- 'H' fields.
local function attempt_buried(errors, id, h, ended, worker, err)
  local older, _, olderr = history_older(errors, id, h, ATTEMPTS_KEPT - 1)
  local last = err
  if last == '' then
    local e = header_get(h, 'e')
    last = e and field_unescape(e) or olderr or ''
  end
  local history = older .. attempt_record(ms(ended), 'd', worker, err)
  if last ~= '' then
    redis.call('HSET', errors, id, last, id .. ':a', history)
  else
    redis.call('HSET', errors, id .. ':a', history)
  end
  return header_set(header_set(h, 'e', nil), 'H', nil)
end

-- A task's whole attempt history (see ATTEMPTS), oldest first, from the
-- errors hash and the header of its entry e (nil: the hash's alone).
local function attempt_history(errors, id, e)
  local n, last = header_history(e and entry_split(e) or '')
  local v = ''
  if n ~= 1 then
    v = redis.call('HGET', errors, id .. ':a') or ''
  end
  return v .. (last or '')
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
-- fields (and any last error or attempt record: see attempt_buried)
-- removed; its id, budget, other fields and payload kept.
local function dead_revived(e)
  local h, payload = entry_split(e)
  for _, letter in ipairs({'a', 'f', 'r', 'h', 'u', 'D', 'W', 'K', 'e', 'H'}) do
    h = header_set(h, letter, nil)
  end
  return entry_due_now(h .. ':' .. payload)
end
