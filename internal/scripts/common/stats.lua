-- Stats: what the scripts count, written to a queue's stats hash.

-- Stats (README, "Stats"): a queue's stats hash holds the current minute
-- and two rings of time slots: minute slots 'm0'..'m359' (6 h) and hour
-- slots 'h0'..'h167' (7 d). A slot's stamp field ('m17') is the minute
-- (hour) since the epoch it holds, by the Redis clock, and its values are
-- fields '<slot>:<name>': a counter (e enqueued, s started, f finished, r
-- retried, q requeued, d dead, k reclaimed, x cancelled: the stats hash's
-- own names, unrelated to the header letters), a histogram
-- bucket ('w<k>' wait, 'u<k>' run: values v µs with 2^(k-1) < v <= 2^k, k
-- in 0..36, the last one open) or a sum ('ws', 'us', µs); or a count of
-- one kind of task ('f/<kind>' finished, 'r/<kind>' retried, 'd/<kind>'
-- dead: see stats_kinds_map).
--
-- Scripts write the current minute only: its values are the fields
-- 'c:<name>', and 'cur' is the minute they hold. The first write of a new
-- minute moves them to minute cur's slot of the minute ring and adds them
-- to its hour's slot (stats_roll). A reader takes 'c' as minute cur.
-- STATS (set by scripts.go) false makes all of it a no-op.
--
-- Who counts what: the hot path (enqueued, from the enqueue reply;
-- started and the waits, counted from the dequeue reply; finished,
-- retried and the runs, from the finish and retry replies, which carry the
-- Redis clock) is counted by the client, which adds it here about once a
-- second per queue, in an argument of an enqueue, dequeue, finish or retry
-- call it makes anyway (stats_add; see internal/store/statsbuf.go): a
-- script call costs about 0.75 µs per number it passes to Redis, too much
-- to spend on every call. The rarer events (periodic ticks' enqueues,
-- requeued, dead, reclaimed, cancelled, and the runs of
-- processes buried or requeued) are counted by their scripts (stat,
-- stat_run) and written once, at the end (stats_flush): one HMGET and one
-- HSET however many tasks a call handled.
local STATS_MINUTES, STATS_HOURS, STATS_TOP = 360, 168, 36
local stats_acc = {} -- value name -> count to add to the current minute
-- Count n under a value name; with entry (the task counted), under
-- '<name>/<kind>' too if the task has a kind.
local function stat(name, n, entry)
  if STATS and n ~= 0 then
    stats_acc[name] = (stats_acc[name] or 0) + n
    if entry then
      local kind = header_get(entry_split(entry), 'k')
      if kind and kind ~= '' then
        name = name .. '/' .. kind
        stats_acc[name] = (stats_acc[name] or 0) + n
      end
    end
  end
end

-- The histogram bucket of a duration of us µs. internal/store/statsbuf.go
-- has the same function in Go (statsBucket): change both or neither.
local function stats_bucket(us)
  if us <= 1 then return 0 end
  local m, e = math.frexp(us)
  if m == 0.5 then e = e - 1 end
  if e > STATS_TOP then return STATS_TOP end
  return e
end

-- Count a run of us µs (a process that its holder buried or requeued).
local function stat_run(us)
  if not STATS then return end
  if us < 0 then us = 0 end
  stat('u' .. stats_bucket(us), 1)
  stat('us', us)
end

-- The rest of the stats (reading a client's counts, writing the current
-- minute, rolling the slots) is needed about once a second per queue,
-- far less often than the scripts run: a script makes a closure for every
-- helper it carries on every call, so these are made by stats_writer on
-- first use, in one table, and a call with nothing to count makes none.
local STATS_WRITER = nil -- until stats_writer() makes it
local function stats_writer()
  if STATS_WRITER then return STATS_WRITER end
  local W = {}
  -- Every value name a slot can have.
  local function stats_value_names()
    local all = {'e', 's', 'f', 'r', 'q', 'd', 'k', 'x', 'ws', 'us'}
    for k = 0, STATS_TOP do
      all[#all + 1] = 'w' .. k
      all[#all + 1] = 'u' .. k
    end
    return all
  end

  -- Count what a client counted (internal/store/statsbuf.go): counts is
  -- space-separated '<name>=<n>', each name a value name and n a whole
  -- number. Names it does not know are skipped.
  local function stats_known(name)
    if #name == 1 then return string.find('esfrqdkx', name, 1, true) ~= nil end
    if name == 'ws' or name == 'us' then return true end
    if string.sub(name, 2, 2) == '/' then
      return string.find('frd', string.sub(name, 1, 1), 1, true) ~= nil and #name > 2
    end
    local k = string.match(name, '^[wu](%d%d?)$')
    return k ~= nil and tonumber(k) <= STATS_TOP
  end
  function W.add(counts)
    for name, n in string.gmatch(counts, '([^ =]+)=(%d+)') do
      if stats_known(name) then stat(name, tonumber(n)) end
    end
  end

  -- The kinds of tasks a queue counts apart (stats_acc's names
  -- '<letter>/<kind>') are bounded: the field 'kinds' of its stats hash
  -- lists those kept apart, at most STATS_KINDS, each with the hour it
  -- was last counted in ('<kind>=<hour> ...', in the order admitted).
  -- A kind not listed is admitted while there is room, else counted as
  -- '(other)', which takes no place; a kind not counted for STATS_HOURS
  -- (so in no slot's window) gives its place up, and its values are
  -- deleted from every slot then, so a slot reused later holds none. A
  -- kind that is not one the Kind option accepts is '(other)' too.
  local OTHER, STATS_KINDS = '(other)', 10
  W.KINDS = STATS_KINDS
  local function stats_kinds_read(key)
    local list, at = {}, {}
    local rec = redis.call('HGET', key, 'kinds')
    if rec then
      for kind, hour in string.gmatch(rec, '([^ =]+)=(%d+)') do
        list[#list + 1] = kind
        at[kind] = tonumber(hour)
      end
    end
    return list, at
  end
  local function stats_kind_valid(kind)
    return #kind <= 64 and string.find(kind, '^[%w%-_%./]+$') ~= nil
  end
  -- Every field of a kind's values, in every slot.
  local function stats_kind_fields(kind)
    local f = {}
    for _, l in ipairs({'f', 'r', 'd'}) do
      local name = ':' .. l .. '/' .. kind
      f[#f + 1] = 'c' .. name
      for i = 0, STATS_MINUTES - 1 do f[#f + 1] = 'm' .. i .. name end
      for i = 0, STATS_HOURS - 1 do f[#f + 1] = 'h' .. i .. name end
    end
    return f
  end
  -- Map stats_acc's kinds to those kept apart (admitting new ones) or
  -- '(other)'. Returns the 'kinds' field's new value if it changed.
  local function stats_kinds_map(key, hour)
    local kinded = {}
    for name in pairs(stats_acc) do
      if string.sub(name, 2, 2) == '/' then kinded[#kinded + 1] = name end
    end
    if #kinded == 0 then return nil end
    table.sort(kinded) -- the same admissions on a replica
    local list, at = stats_kinds_read(key)
    local changed = false
    for _, name in ipairs(kinded) do
      local n = stats_acc[name]
      local letter, kind = string.sub(name, 1, 1), string.sub(name, 3)
      if kind ~= OTHER and not at[kind] then
        if not stats_kind_valid(kind) then
          kind = OTHER
        else
          if #list >= STATS_KINDS then
            -- Places of kinds gone from every window are given up.
            local kept = {}
            for _, k in ipairs(list) do
              if hour - at[k] >= STATS_HOURS then
                redis.call('HDEL', key, unpack(stats_kind_fields(k)))
                at[k] = nil
              else
                kept[#kept + 1] = k
              end
            end
            list = kept
          end
          if #list < STATS_KINDS then
            list[#list + 1] = kind
            at[kind] = hour
            changed = true
          else
            kind = OTHER
          end
        end
      end
      if at[kind] and at[kind] ~= hour then
        at[kind] = hour
        changed = true
      end
      local to = letter .. '/' .. kind
      if to ~= name then
        stats_acc[name] = nil
        stats_acc[to] = (stats_acc[to] or 0) + n
      end
    end
    if not changed then return nil end
    local rec = {}
    for i, k in ipairs(list) do rec[i] = k .. '=' .. at[k] end
    return table.concat(rec, ' ')
  end

  -- The fields of a slot's values.
  local function stats_fields(slot, names)
    local f = {}
    for i, name in ipairs(names) do
      f[i] = slot .. ':' .. name
    end
    return f
  end

  -- A new minute (once a minute per queue at most): the values of minute
  -- cur (nil if none) go to its slot in the minute ring, which is cleared
  -- first, and are added to its hour's slot, cleared first if it held an
  -- older hour; then they are deleted. Either ring is skipped when cur is
  -- past its window.
  local function stats_roll(key, cur, minute)
    local names = stats_value_names()
    local kinds = stats_kinds_read(key)
    kinds[#kinds + 1] = OTHER
    for _, kind in ipairs(kinds) do
      names[#names + 1] = 'f/' .. kind
      names[#names + 1] = 'r/' .. kind
      names[#names + 1] = 'd/' .. kind
    end
    local cf = stats_fields('c', names)
    if cur then
      local v = redis.call('HMGET', key, unpack(cf))
      local have = {}
      for i = 1, #names do
        if v[i] then have[#have + 1] = i end
      end
      if #have > 0 and minute - cur < STATS_MINUTES then
        local mslot = 'm' .. (cur % STATS_MINUTES)
        local mf = stats_fields(mslot, names)
        redis.call('HDEL', key, unpack(mf))
        local set = {mslot, cur}
        for _, i in ipairs(have) do
          set[#set + 1] = mf[i]
          set[#set + 1] = v[i]
        end
        redis.call('HSET', key, unpack(set))
      end
      local hour = math.floor(cur / 60)
      if #have > 0 and math.floor(minute / 60) - hour < STATS_HOURS then
        local hslot = 'h' .. (hour % STATS_HOURS)
        local hf = stats_fields(hslot, names)
        local get = {hslot}
        for _, i in ipairs(have) do get[#get + 1] = hf[i] end
        local hv = redis.call('HMGET', key, unpack(get))
        local fresh = tonumber(hv[1]) == hour
        if not fresh then redis.call('HDEL', key, unpack(hf)) end
        local set = {hslot, hour}
        for j, i in ipairs(have) do
          set[#set + 1] = hf[i]
          set[#set + 1] = (tonumber(v[i]) or 0) + (fresh and tonumber(hv[j + 1]) or 0)
        end
        redis.call('HSET', key, unpack(set))
      end
    end
    redis.call('HDEL', key, unpack(cf))
  end

  -- Add what was counted to the current minute of key. now is the Redis
  -- clock in ms, if the caller has it.
  function W.flush(key, now)
    local minute = math.floor((now or now_ms()) / 60000)
    local kinds = stats_kinds_map(key, math.floor(minute / 60))
    local fields, incs = {'cur'}, {}
    for name, n in pairs(stats_acc) do
      fields[#fields + 1] = 'c:' .. name
      incs[#incs + 1] = n
    end
    stats_acc = {}
    local vals = redis.call('HMGET', key, unpack(fields))
    local set
    if tonumber(vals[1]) == minute then
      set = {}
      for i, n in ipairs(incs) do
        set[2 * i - 1] = fields[i + 1]
        set[2 * i] = n + (tonumber(vals[i + 1]) or 0)
      end
    else
      stats_roll(key, tonumber(vals[1]), minute)
      set = {'cur', minute}
      for i, n in ipairs(incs) do
        set[#set + 1] = fields[i + 1]
        set[#set + 1] = n
      end
    end
    if kinds then
      set[#set + 1] = 'kinds'
      set[#set + 1] = kinds
    end
    redis.call('HSET', key, unpack(set))
  end
  STATS_WRITER = W
  return W
end

-- Count what a client counted: counts is '' (nothing, the usual case: one
-- compare), else see W.add above.
local function stats_add(counts)
  if not STATS or counts == nil or counts == '' then return end
  stats_writer().add(counts)
end

-- Add what was counted to the current minute of key: see W.flush above.
-- Once per script run, at most; nothing counted costs one compare.
local function stats_flush(key, now)
  if not STATS or next(stats_acc) == nil then return end
  stats_writer().flush(key, now)
end

-- What a client counted (stats_add), written to key at once (before
-- anything the script may refuse or fail at), so that it is counted
-- exactly when the call ran; dropped if the queue (its meta hash) no
-- longer exists: a deleted queue's stats are gone with it, and counts
-- held across its deletion must not make the hash again.
local function stats_client(key, meta, counts, now)
  if counts == nil or counts == '' then return end
  if redis.call('HEXISTS', meta, 'name') == 0 then return end
  stats_add(counts)
  stats_flush(key, now)
end
