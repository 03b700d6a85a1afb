-- Move up to asked tasks from the front of the queue into processes owned
-- by the worker, but only while the worker's lease on this queue is live
-- (a fenced or reclaimed worker must never take work).
-- Returns -1 when the lease is not live, else {until, now, pid, entry,
-- pid, entry, ...}: until is, under a rate limit that is used
-- up (the queue's, or, when the dequeue took fewer tasks than asked, a
-- group's: the earliest of those held back by theirs), when the next start
-- is allowed (µs, Redis clock; 0 otherwise), and
-- now the Redis clock the limit was judged by (µs; 0 when none was), so
-- that the caller times its wake-up by Redis's clock; then each
-- entry as it waited, its count of earlier starts unchanged (the process
-- record keeps it so; see entry_ran), with the error its last attempt
-- recorded, if any, in its header (see attempt_added).
--
-- A runtime that finds fewer tasks than it asked for has free slots and an
-- empty queue: it parks in the idle set, where the next enqueue finds it
-- and names it in its work event. One that got all it asked for is busy
-- and leaves the set; it comes back for more when a slot frees.
--
-- A fixed number of calls however many tasks it takes (one LRANGE and one
-- LTRIM, or one RPOP for a single task; one HSET per 500 processes; one
-- HGET and one HSET of the process id counter), so taking a batch costs
-- Redis little more
-- than taking one.
local waiting_key, procs_key, leases_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local idle_key, starts_key, high_key, low_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local stats_key, gwait_key, gready_key, grunning_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local glimits_key, gstarts_key = KEYS[13], KEYS[14] -- see GROUPS in common/waiting.lua
local worker, asked = ARGV[1], tonumber(ARGV[2]) -- asked: the most tasks to take
local park = ARGV[3] -- "1" for a Handle runtime
local counts = ARGV[4] -- stats counted by the client ('' for none: see stats_add)

local start_u = now_us() -- the one clock reading of a plain dequeue
local now = math.floor(start_u / 1000)
stats_client(stats_key, meta_key, counts, now)
if not lease_live(leases_key, worker, now) then
  return -1
end
-- The front of the queue is the right end of the list. A paused queue
-- hands out nothing, and one with a concurrency limit no more than its
-- free slots (every process in procs holds one, a weighted task's its
-- weight (see entry_weight), a dead worker's too until it is reclaimed:
-- the limit is never exceeded). Under a limit the front task starts only
-- if its weight fits in the free slots; if not, nothing behind it starts
-- either (strict order: a heavy task is never starved by light ones). A
-- task heavier than the whole limit counts as the limit: it starts alone,
-- once nothing is in flight.
-- A rate limit allows rate starts in any window of per ms: the starts of
-- the last window are kept in the starts set (pid -> µs).
local want = asked
local paused, limit, rate, per, extra, seq = queue_controls(meta_key)
local room -- under a limit, the slots free
if paused then
  want = 0
elseif limit then
  room = limit - redis.call('HLEN', procs_key) - extra
  want = math.max(math.min(want, room), 0)
end
local now_u -- the clock the queue's rate is judged by, under one
if rate and per and want > 0 then
  now_u = start_u
  redis.call('ZREMRANGEBYSCORE', starts_key, '-inf', ms(now_u - per * 1000))
  want = math.max(math.min(want, rate - redis.call('ZCARD', starts_key)), 0)
end
-- tasks holds the tasks taken in list order, the first out last (as
-- LRANGE gives them): read back to front below.
local tasks = {}
local grouped = false -- whether take_turns ran: groups may be held by rate
-- Under group rates: the group of each task taken (by its entry), whose
-- start is recorded by its process id once it has one, and the rate
-- window (ms) of each group held back by a start of this call, whose
-- score is then set by that start's id (below, once it has one).
local rated, rate_fix = {}, {}
-- The earliest start allowed, under a rate or groups (see the general
-- path below); nil on the plain path, where there is none.
local next_start
-- Priorities or groups in use (the high or low list, or the ready set,
-- not empty): one EXISTS, read only when a task can be taken.
local others = want > 0 and redis.call('EXISTS', high_key, low_key, gready_key) > 0
-- A plain queue (the usual case: no limit, no rate, no priorities or
-- groups in use) takes from the normal list's front and nothing else: the
-- general path's helpers below, each a closure made per call, are made
-- only when it runs.
if not (room or now_u or others) then
  if want == 1 then
    tasks[1] = redis.call('RPOP', waiting_key) or nil
  elseif want > 1 then
    tasks = redis.call('LRANGE', waiting_key, -want, -1)
    if #tasks > 0 then redis.call('LTRIM', waiting_key, 0, -(#tasks + 1)) end
  end
else
  set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
  -- When the rate limit is used up: the next start is allowed as the oldest
  -- start of the window leaves it.
  local function rate_until()
    if not now_u or redis.call('ZCARD', starts_key) < rate then return 0 end
    local oldest = redis.call('ZRANGE', starts_key, 0, 0, 'WITHSCORES')
    return tonumber(oldest[2]) + per * 1000 + 1
  end
  -- Take from one list's front (its right end), up to k tasks, into tasks:
  -- what a later (lower) level gives goes before what is there already.
  -- Under a limit, the tasks taken are those at the front whose weights
  -- fit in room; the first that does not fit blocks every level.
  local blocked = false
  local function fits(t)
    if not room then return true end
    local w = math.min(entry_weight(t), limit)
    if w > room then
      blocked = true
      return false
    end
    room = room - w
    return true
  end
  local function take(list, k)
    if k <= 0 or blocked then return end
    if k == 1 then
      local t = redis.call('RPOP', list)
      if t and fits(t) then
        table.insert(tasks, 1, t)
      elseif t then
        redis.call('RPUSH', list, t)
      end
      return
    end
    local got = redis.call('LRANGE', list, -k, -1)
    local fit = #got
    if room then
      fit = 0
      for i = #got, 1, -1 do
        if not fits(got[i]) then break end
        fit = fit + 1
      end
    end
    if fit > 0 then
      redis.call('LTRIM', list, 0, -(fit + 1))
      if fit == #got and #tasks == 0 then
        tasks = got
      else
        local merged = {}
        for i = #got - fit + 1, #got do merged[#merged + 1] = got[i] end
        for _, t in ipairs(tasks) do merged[#merged + 1] = t end
        tasks = merged
      end
    end
  end
  -- The (up to) k ready groups of lowest turn, not those held (turns are
  -- clock readings, far below 2^53), and, with scored, their turns (a
  -- reply's text each; else nil): Redis writes a score for Lua as text, which
  -- costs it more than the member, so a dequeue that compares no turns
  -- reads none.
  local function ready_groups(k, scored)
    if not scored then
      return redis.call('ZRANGEBYSCORE', gready_key, '-inf', '(' .. ms(GROUP_RATE_BASE), 'LIMIT', 0, k)
    end
    local got = redis.call('ZRANGEBYSCORE', gready_key, '-inf', '(' .. ms(GROUP_RATE_BASE), 'WITHSCORES', 'LIMIT', 0, k)
    local names, turns = {}, {}
    for i = 1, #got, 2 do
      names[#names + 1] = got[i]
      turns[#turns + 1] = got[i + 1]
    end
    return names, turns
  end
  -- Groups held back until a time (by their rate, or a sequence's task
  -- waiting for its retry delay) that has come by t (µs) take turns from t,
  -- as if they had just become ready. One call when none has. Returns how
  -- many.
  local function rate_released(t)
    local due = redis.call('ZRANGEBYSCORE', gready_key, '(' .. ms(GROUP_RATE_BASE), ms(GROUP_RATE_BASE + t))
    groups_turn(gready_key, due, ms(t))
    return #due
  end
  -- Groups (see GROUPS in common/waiting.lua): the normal list and the ready
  -- groups take turns, lowest turn first; the normal list's turn is the meta
  -- field 'gp', a group's its score in the ready set. A turn takes one task
  -- when at least k groups are ready (k: the most tasks to take), else up to
  -- k / (groups ready) of them, a share, from the front of the group (one
  -- ZRANGEBYLEX for them all) or of the list, and each task taken moves the
  -- taker's turn one step on: shares are equal, and a dequeue of few groups
  -- costs a call per group, not per task. A group starts a task only while
  -- the slots its processes hold (a weighted task's its weight, a dead
  -- worker's until reclaimed) leave room for it under its limit (its own in
  -- the limits hash, else the default 'glimit'; a task heavier than the
  -- limit starts alone). One found empty leaves the ready set, until a task
  -- joins it (group_lib().push); one at its limit with tasks waiting stays
  -- in it, held: scored +inf, past every turn, until a process of it ends
  -- (groups_settle gives it a turn again, with no look at its tasks) or its
  -- limit changes. A group with a rate limit (see GROUP_RATE_BASE in
  -- common/groups.lua) starts a task only while its starts in the window,
  -- recorded in gstarts, are fewer than its rate; one that used it up with
  -- tasks waiting stays in the ready set scored GROUP_RATE_BASE + when its
  -- next start is allowed, and the first dequeue after that time gives it a
  -- turn again (one ZRANGEBYSCORE per dequeue). A group whose front task is
  -- due later (a sequence's task retried with a delay: see retry.lua) is held
  -- the same way until it is due. A sequence held on its dead task (see
  -- sequence_died in common/groups.lua) is scored GROUP_DEAD_HOLD, which no
  -- dequeue takes, until its hold is released.
  -- With no group ready this is the normal list's take.
  local function take_turns(k)
    if k <= 0 or blocked then return end
    grouped = true
    local t0, step = now_us(), 0
    local m = redis.call('HMGET', meta_key, 'glimit', 'gp', 'grate', 'grx', 'gdead', 'gturns', 'gtx', 'gsize')
    local default, plain = control_value(m[1]), tonumber(m[2] or '0') or 0
    -- The turn size (SetGroupTurnSize): the fewest tasks a turn takes when
    -- its group has them waiting, room for them under its limit, and the
    -- dequeue asks for them. A turn costs a read of its group's front and a
    -- move of its turn, so that a larger one spreads them over more tasks;
    -- groups then alternate in runs of up to this many.
    local size = control_value(m[8]) or 1
    -- Turns (see "Turns per group" in common/groups.lua): every group's
    -- default, and whether a group has turns of its own or may be in the
    -- middle of its turns; a queue without them reads no more.
    local turns_default = control_value(m[6]) or 1
    local turned = turns_default > 1 or m[7] ~= false
    -- The groups' turns are read only to be compared: with the normal
    -- list's (it has tasks waiting) or under turns.
    local plain_left, plain_took = redis.call('LLEN', waiting_key) > 0, false
    local scored = turned or plain_left
    local ready, scores = ready_groups(k, scored)
    local released = false
    if #ready == 0 then
      if rate_released(t0) == 0 then return take(waiting_key, k) end
      released = true
      ready, scores = ready_groups(k, scored)
    end
    local G = group_lib()
    -- A group's turns (own, a stored value; default, a number) and the turns
    -- it used of its run (counter, stored; score, its score in the ready set
    -- as a reply's text): always at least one turn left.
    local function group_turns(own, counter, score, default)
      local w = control_value(own) or default
      local used = 0
      if counter then
        local u, at = string.match(counter, '^(%d+)/(.+)$')
        if u and tonumber(at) == tonumber(score) then used = math.min(tonumber(u), w - 1) end
      end
      return w, used
    end
    local rate_n, rate_per = group_rate(m[3])
    local rates = rate_n ~= nil or m[4] ~= false
    local holds = tonumber(m[5] or nil) ~= nil -- groups held on a dead task (see sequence_died)
    if not released and rate_released(t0) > 0 then ready, scores = ready_groups(k, scored) end
    -- The bound below which group g's starts have left a window of per ms
    -- ending now, as ZRANGEBYLEX takes it: 0 when the window is longer
    -- than the Redis clock's µs since 1970.
    local function window_from(g, per)
      return '(' .. g .. '\0' .. string.format('%016x', math.max(t0 - per * 1000 + 1, 0))
    end
    if rates then
      -- One recorded start picked at random: its group's starts that left
      -- the window go, all of them if it has no rate any more. A dequeue
      -- trims only the groups it serves, and this sampling (as Redis
      -- expires keys) clears the starts of groups no longer served.
      local m1 = redis.call('ZRANDMEMBER', gstarts_key)
      if m1 then
        local g = string.sub(m1, 1, string.find(m1, '\0', 1, true) - 1)
        local n, per = rate_n, rate_per
        if m[4] then
          local own_n, own_per = group_rate(redis.call('HGET', glimits_key, g .. ':r'))
          if own_n then n, per = own_n, own_per end
        end
        local to = '(' .. g .. '\1'
        if n then to = window_from(g, per) end
        redis.call('ZREMRANGEBYLEX', gstarts_key, '[' .. g .. '\0', to)
      end
    end
    local now_rated = {} -- group -> its tasks taken in this call under a rate
    -- The starts group g may still make under rate n per per ms, after its
    -- starts that left the window are dropped, and when its oldest start in
    -- the window leaves it (µs; nil when that is one of this call's).
    local function rate_room(g, n, per)
      local from, to = '[' .. g .. '\0', '(' .. g .. '\1'
      redis.call('ZREMRANGEBYLEX', gstarts_key, from, window_from(g, per))
      local used = redis.call('ZLEXCOUNT', gstarts_key, from, to)
      local oldest
      if used > 0 then
        local first = redis.call('ZRANGEBYLEX', gstarts_key, from, to, 'LIMIT', 0, 1)[1]
        oldest = tonumber(string.sub(first, #g + 2, #g + 17), 16) + per * 1000 + 1
      end
      return n - used - (now_rated[g] or 0), oldest
    end
    local function turn(n)
      step = step + n
      return t0 + step
    end
    local running = {} -- group -> the slots it holds, once it took a task
    while k > 0 and not blocked and #ready > 0 do
      local names = ready
      local held = redis.call('HMGET', grunning_key, unpack(names))
      -- Each group's own limit and, under turns, its own turns and the
      -- turns it used of its current run, under own rates its own rate, and
      -- under holds its hold: the fields of the limits hash in one HMGET (one
      -- per 4000 fields), however many of these the queue uses.
      local fields, per = {}, 1
      if turned then per = per + 2 end
      if m[4] then per = per + 1 end
      if holds then per = per + 1 end
      for _, g in ipairs(names) do
        fields[#fields + 1] = g
        if turned then
          fields[#fields + 1] = g .. ':t'
          fields[#fields + 1] = g .. ':u'
        end
        if m[4] then fields[#fields + 1] = g .. ':r' end
        if holds then fields[#fields + 1] = g .. ':d' end
      end
      local values = {}
      for i = 1, #fields, 4000 do
        local got = redis.call('HMGET', glimits_key, unpack(fields, i, math.min(i + 3999, #fields)))
        for _, v in ipairs(got) do values[#values + 1] = v end
      end
      local own, tu, own_rate, dead = {}, {}, {}, {}
      for i = 1, #names do
        local at = (i - 1) * per + 1
        own[i] = values[at]
        if turned then
          tu[2 * i - 1], tu[2 * i] = values[at + 1], values[at + 2]
          at = at + 2
        end
        if m[4] then
          at = at + 1
          own_rate[i] = values[at]
        end
        if holds then dead[i] = values[at + 1] end
      end
      -- A turn is a share of the tasks asked for: one task (the turn size)
      -- when there are as many groups ready as tasks, else an equal share of
      -- them. Under turns, a turn is one task (the turn size), and a group
      -- of w turns takes its run of w in a row, what is left of it when it
      -- used some (see group_turns); when the tasks asked for are at least
      -- twice the turns of the groups read, each takes as many whole runs as
      -- fit (the share, in runs; the passes below give the rest).
      local runs = {}
      local share = math.max(math.ceil(k / #names), size)
      if turned then
        local sum = 0
        for i = 1, #names do
          local w, used = group_turns(tu[2 * i - 1], tu[2 * i], scores[i], turns_default)
          runs[i] = {w = w, used = used, had = tu[2 * i] ~= false}
          sum = sum + w
        end
        share = math.max(math.floor(k / sum), size)
      end
      local counters, dropped = {}, {}
      local took, out, again, hold = {}, {}, {}, {}
      for i, g in ipairs(names) do
        while plain_left and k > 0 and plain <= tonumber(scores[i]) do
          local before = #tasks
          take(waiting_key, math.min(share, k))
          local got = #tasks - before
          if got > 0 then
            k, plain, plain_took = k - got, turn(got), true
          end
          if blocked then break end
          if got < math.min(share, k + got) then plain_left = false end
        end
        if k == 0 or blocked then break end
        local limit = control_value(own[i]) or default
        local r = running[g] or tonumber(held[i] or '0') or 0
        local run = runs[i]
        local quota = share
        if run then quota = share * run.w - run.used end
        -- Under a turn size, no more of its front is read than its free
        -- slots can hold (each holds one at least; one when it has none, as
        -- a task heavier than the limit starts alone): the limit below
        -- stops the take there anyway.
        local reads = quota
        if limit and size > 1 then reads = math.min(reads, math.max(limit - r, 1)) end
        -- A sequence held on its dead task starts nothing.
        local front = dead[i] and {} or G.front(g, math.min(reads, k) + 1)
        local got, full = 0, false
        local rn, rper = rate_n, rate_per
        local own_n, own_per = group_rate(own_rate[i])
        if own_n then rn, rper = own_n, own_per end
        local allowed, rate_next = math.huge, nil
        if rn and #front > 0 then allowed, rate_next = rate_room(g, rn, rper) end
        local due_at -- when the group's next task is due, if later than now
        for f = 1, math.min(reads, k, #front, math.max(allowed, 0)) do
          local e = G.entry(g, front[f])
          -- A sequence's task retried with a delay waits in its group, due
          -- later (see retry.lua): the tasks behind it wait too.
          if header_has(e, 'd') then
            local due = tonumber(header_get(entry_split(e), 'd'), 16)
            if due and due > t0 then
              due_at = due
              break
            end
          end
          local w = entry_weight(e)
          if limit and r > 0 and r + w > limit then
            full = true
            break
          end
          if not fits(e) then break end
          took[#took + 1] = front[f]
          if rn then rated[e] = g end
          table.insert(tasks, 1, e)
          got, r = got + 1, r + w
        end
        k = k - got
        if got > 0 then running[g] = r end
        if rn and got > 0 then now_rated[g] = (now_rated[g] or 0) + got end
        if dead[i] then
          hold[#hold + 1] = ms(GROUP_DEAD_HOLD)
          hold[#hold + 1] = g
        elseif got == #front then
          out[#out + 1] = g -- none left
        elseif full or (limit and r >= limit) then
          hold[#hold + 1] = 'inf'
          hold[#hold + 1] = g
        elseif due_at and got == 0 then
          -- Held until its next task is due, as a group held by its rate.
          hold[#hold + 1] = ms(GROUP_RATE_BASE + due_at)
          hold[#hold + 1] = g
        elseif got >= allowed then
          -- Its rate is used up: held until its oldest start in the window
          -- leaves it (one of this call's: its score is set once the start
          -- has its id).
          if not rate_next then rate_fix[g], rate_next = rper, t0 + rper * 1000 + 1 end
          hold[#hold + 1] = ms(GROUP_RATE_BASE + rate_next)
          hold[#hold + 1] = g
        elseif got > 0 and run and got < quota then
          -- A group in the middle of a run keeps its place: the turns it
          -- used of it are kept with its turn, until its run is over.
          local used = (run.used + got) % run.w
          if used > 0 then
            counters[#counters + 1] = g .. ':u'
            counters[#counters + 1] = used .. '/' .. scores[i]
            run.had = false -- written anew
          else
            again[#again + 1] = ms(turn(got))
            again[#again + 1] = g
          end
        elseif got > 0 then
          again[#again + 1] = ms(turn(got))
          again[#again + 1] = g
        end
        -- A run over (the group took its turns, left, or is held) forgets
        -- its turns used; a group that took nothing as the queue's limit
        -- blocked it keeps its place and them.
        if run and run.had and (got > 0 or not blocked) then dropped[#dropped + 1] = g .. ':u' end
        if blocked then break end
      end
      if #counters > 0 then redis.call('HSET', glimits_key, unpack(counters)) end
      if #dropped > 0 then redis.call('HDEL', glimits_key, unpack(dropped)) end
      if #took > 0 then redis.call('ZREM', gwait_key, unpack(took)) end
      if #out > 0 then redis.call('ZREM', gready_key, unpack(out)) end
      if #again > 0 then redis.call('ZADD', gready_key, unpack(again)) end
      if #hold > 0 then redis.call('ZADD', gready_key, unpack(hold)) end
      if (#took == 0 and #out == 0 and #hold == 0) or k == 0 or blocked then break end
      ready, scores = ready_groups(k, scored)
    end
    local counts = {}
    for g, r in pairs(running) do
      counts[#counts + 1] = g
      counts[#counts + 1] = r
    end
    if #counts > 0 then redis.call('HSET', grunning_key, unpack(counts)) end
    -- No group ready: the normal list has the turns left.
    if k > 0 and not blocked and plain_left and #ready == 0 then
      local before = #tasks
      take(waiting_key, k)
      if #tasks > before then plain, plain_took = turn(#tasks - before), true end
    end
    if plain_took then redis.call('HSET', meta_key, 'gp', ms(plain)) end
  end
  if want > 0 then
    -- Priorities: high, then normal (and the groups), then low.
    if others then
      take(high_key, want)
      take_turns(want - #tasks)
      take(low_key, want - #tasks)
    else
      take(waiting_key, want)
    end
  end
  -- The earliest start allowed: the queue's rate, and, for a dequeue that
  -- came short, the first group held back by its rate (so that the runtime
  -- sleeps until then instead of polling).
  -- Returns it (0: none) and the clock it was judged by (nil: none).
  function next_start()
    local u, at = rate_until(), now_u
    if grouped and #tasks < asked then
      local first = redis.call('ZRANGEBYSCORE', gready_key, '(' .. ms(GROUP_RATE_BASE), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      local g = group_held_until(first[2])
      if g then
        at = at or now_us()
        if u == 0 or g < u then u = g end
      end
    end
    return u, at
  end
end
local n = #tasks
if park == '1' then
  if n < asked then
    redis.call('ZADD', idle_key, now, worker)
  else
    redis.call('ZREM', idle_key, worker)
  end
end
if n == 0 then
  if not next_start then return {'0', '0'} end
  local u, at = next_start()
  return {ms(u), ms(at or 0)}
end
local pids = start_procs(procs_key, meta_key, worker, tasks, start_u, seq)
-- The starts of groups under a rate, recorded by their process ids (the
-- Redis clock at their start, as the queue's rate counts them), and the
-- groups held back by them scored by their first.
if next(rated) then
  local members, first = {}, {}
  for j = 1, #pids do
    local t = tasks[n - j + 1]
    local g = rated[t]
    if g then
      local pid = pids[j]
      members[#members + 1] = '0'
      members[#members + 1] = g .. '\0' .. string.rep('0', 16 - #pid) .. pid .. entry_id(t)
      if rate_fix[g] and not first[g] then
        first[g] = true
        redis.call('ZADD', gready_key, 'XX', ms(GROUP_RATE_BASE + tonumber(pid, 16) + rate_fix[g] * 1000 + 1), g)
      end
    end
  end
  for i = 1, #members, 1000 do
    redis.call('ZADD', gstarts_key, unpack(members, i, math.min(i + 999, #members)))
  end
end
local out, started = {'0', '0'}, {}
local k = 2
for j = 1, #pids do
  local pid = pids[j]
  out[k + 1] = pid
  out[k + 2] = tasks[n - j + 1]
  k = k + 2
  if now_u then
    started[#started + 1] = ms(tonumber(pid, 16))
    started[#started + 1] = pid
  end
end
if now_u then
  redis.call('ZADD', starts_key, unpack(started))
end
if next_start then
  local u, at = next_start()
  if at then out[1], out[2] = ms(u), ms(at) end
end
return out
