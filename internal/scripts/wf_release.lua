-- Record the end of a workflow step's task, as its queue's notice told
-- it (flow_notice in common/workflows.lua): the step's result and state
-- ('ok', 'dead', or 'x' for a task cancelled, whose notice says
-- 'cancelled'), then what that means for its children: a child's count of
-- parents left goes down, and one with none left becomes ready ('r'); a
-- child of a step that died or was cancelled is cancelled ('x'), with its
-- descendants, unless the dependency lets it run whatever its parent's
-- end (a '+' before it in kids: then the count goes down as for a
-- success). Once every step has ended the workflow ends (flow_close):
-- 'failed' if one died or its task was cancelled (counted in the flow's
-- 'cancelled' field), else 'succeeded'.
-- A notice 'revived' (a dead step's task requeued from the dead letters)
-- undoes a death: the step is queued again, its descendants that its
-- death cancelled wait again (those no other death or cancel holds), a
-- child still waiting that runs whatever its end waits for it again, and
-- a workflow that had failed runs again, its keys kept. So does an end
-- newer than the death recorded, whose 'revived' notice (older) is not
-- carried yet: notices may be carried in any order.
-- Idempotent: a notice no later than the last recorded of the step (in
-- seen), a step that has ended already, or a workflow that has ended (or
-- is gone) changes nothing, so a notice carried twice (a sweep's replay
-- after a crash) records nothing twice, and an old one carried late
-- cannot undo a newer. Either way the script answers with the steps this
-- step's ends made ready (kept in freed: a revived step's success adds to
-- those its death freed) that are still ready, not yet marked queued
-- (wf_enqueued.lua): a replay of any of its notices after a crash between
-- this script and their enqueues gets them again.
-- Several notices of the workflow are recorded in one call (a batch of
-- carries), one after another, as separate calls would; a step freed by
-- several of them is answered once.
-- A step's children are settled at most FLOW_RELEASE_MAX a call (the
-- calls of a batch share them), so that the end of a fan-out's parent
-- holds Redis for a bounded time: where its release stands is kept in
-- freed under '@<step>' (the byte of its kids where the next child
-- starts), written in the call that settles the children before it, and
-- the next call that names the step (any notice of it: the caller's next
-- call, or a sweep's replay after a crash) settles the next ones from
-- there, each child once. A death's cascade (the descendants of the
-- children it cancels, cancelled in turn) is settled within the same
-- bound, and kept under the step that died (cascade_of below) until its
-- last descendant is, the mark '@<step>' with it. A call with enqueued
-- set (ARGV[2] '1': the caller enqueued what the call before answered)
-- answers only the steps it freed itself, not a replay's whole list.
-- Returns {more, step, spec, ...}: more '1' while a step named has
-- children left to settle (call again), else '0'; then per such step.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]
local channel, enqueued = ARGV[1], ARGV[2] == '1'
-- Then per notice, ARGV[3 + 5(i - 1) ...]: the step, its status ('ok' |
-- 'dead' | 'cancelled' | 'revived'), its result, when the notice was written (µs) and
-- the id of the step's task.

-- The children of parent by name (see places), read once a call: a
-- revival asks about the children of a wide step for each of them.
local placed = {}

-- Where each child of parent starts in its kids (the byte), and those
-- that run whatever its end ('+' before them).
local function places(parent)
  local p = placed[parent]
  if not p then
    p = {at = {}, plus = {}}
    for b, kid in string.gmatch(redis.call('HGET', kids_key, parent) or '', '()([^,]+)') do
      if string.sub(kid, 1, 1) == '+' then
        kid = string.sub(kid, 2)
        p.plus[kid] = true
      end
      p.at[kid] = b
    end
    placed[parent] = p
  end
  return p
end

-- Whether parent's end lets kid run ('+' before kid in parent's kids).
local function runs_anyway(parent, kid)
  return places(parent).plus[kid] == true
end

-- Where the release of step stands: the byte of its kids where its next
-- child to settle starts, or nil if none is left (or it has not ended).
local function mark_of(step)
  return tonumber(redis.call('HGET', freed_key, '@' .. step))
end

-- Whether parent's end has yet to be settled in kid: its release (or,
-- given at, where it stands in a cascade) stands at or before kid in its
-- kids.
local function unsettled(parent, kid, at)
  at = at or mark_of(parent)
  if not at then
    return false
  end
  local s = places(parent).at[kid]
  return s ~= nil and s >= at
end

-- Append a field and its value to t.
local function put(t, field, value)
  t[#t + 1] = field
  t[#t + 1] = value
end

-- HSET of field, value pairs, a thousand a call.
local function hset(key, pairs_)
  for i = 1, #pairs_, 2000 do
    redis.call('HSET', key, unpack(pairs_, i, math.min(i + 1999, #pairs_)))
  end
end

-- The steps a death cancelled whose own children are yet to be settled
-- (a cascade), kept under the step whose end began it, in freed under
-- '!<step>' ('<name>:<byte of its kids where the next child starts>',
-- ',' between, the last met last), while its release is under way:
-- a cascade is settled within the same budget as the children, from
-- where it stands, by the next call that names the step.
local function cascade_of(step)
  local stack = {}
  for name, at in string.gmatch(redis.call('HGET', freed_key, '!' .. step) or '', '([^,:]+):(%d+)') do
    stack[#stack + 1] = {name = name, at = tonumber(at)}
  end
  return stack
end

-- Lower by one the count of parents left of each of kids (steps, each
-- once), whose parent's end lets them run; those with none left that
-- wait become ready, appended to freed. Each hash is read and written a
-- thousand steps a call.
local function lower(kids, freed)
  local lefts, states = hmget(left_key, kids), hmget(steps_key, kids)
  local newleft, ready = {}, {}
  for j, kid in ipairs(kids) do
    local left = (tonumber(lefts[j]) or 0) - 1
    put(newleft, kid, left)
    if left <= 0 and states[j] == 'w' then
      put(ready, kid, 'r')
      freed[#freed + 1] = kid
    end
  end
  hset(left_key, newleft)
  hset(steps_key, ready)
end

-- Cancel those of kids (steps, each once) that wait, whose parent's end
-- does not let them run, and push on stack (see cascade_of) those of
-- them that have children, the last first, so that the cascade meets
-- them in order. Returns the steps still open (nil if it ended none).
local function cut(kids, stack)
  local states, ended, names = hmget(steps_key, kids), {}, {}
  for j = #kids, 1, -1 do
    if states[j] == 'w' then
      put(ended, kids[j], 'x')
      names[#names + 1] = kids[j]
    end
  end
  if #ended == 0 then
    return nil
  end
  hset(steps_key, ended)
  for j, below in ipairs(hmget(kids_key, names)) do
    if below and below ~= '' then
      stack[#stack + 1] = {name = names[j], at = 1, kids = below}
    end
  end
  return redis.call('HINCRBY', flow_key, 'open', -#ended / 2)
end

-- Split the children of kids (a step's list) from byte at, at most
-- budget of them, into those its end lowers the count of (all if good,
-- else those that run whatever its end: '+') and those it cancels.
-- Returns both, how many it took, where the next starts and whether one
-- is left.
local function take(kids, at, budget, good)
  local down, off, n = {}, {}, 0
  local b, e = string.find(kids, '[^,]+', at)
  while b and n < budget do
    local kid = string.sub(kids, b, e)
    local runs = string.sub(kid, 1, 1) == '+'
    if runs then kid = string.sub(kid, 2) end
    if good or runs then
      down[#down + 1] = kid
    else
      off[#off + 1] = kid
    end
    n = n + 1
    at = e + 2
    b, e = string.find(kids, '[^,]+', at)
  end
  return down, off, n, at, b ~= nil
end

-- Settle the children of the steps on stack (see cascade_of), the last
-- first, at most budget of them, as settle does a step's (those it
-- cancels pushed, for their own children). Returns the children settled
-- and the steps still open (nil if it ended none).
-- A step it frees is listed in freed under step (whose end began the
-- cascade, and whose notice carries it), not under a parent of it: it
-- is noted in freed under '^<freed step>', naming step, so that the
-- check (check_workflow.lua) asks that step's queue for the notice. The
-- note lasts while the freed step is ready: its mark as queued
-- (wf_enqueued.lua, flow_enqueue.lua) or its end drops it.
local function cascade(stack, budget, freed, step)
  local n, open = 0, nil
  while #stack > 0 and n < budget do
    local top = stack[#stack]
    top.kids = top.kids or redis.call('HGET', kids_key, top.name) or ''
    local down, off, m, at, left = take(top.kids, top.at, budget - n, false)
    n, top.at = n + m, at
    if not left then
      table.remove(stack)
    end
    if #down > 0 then
      local before, by = #freed, {}
      lower(down, freed)
      for j = before + 1, #freed do
        put(by, '^' .. freed[j], step)
      end
      hset(freed_key, by)
    end
    if #off > 0 then
      open = cut(off, stack) or open
    end
  end
  return n, open
end

-- Append freed, the steps an end of step made ready, to its freed list.
local function add_freed(step, freed)
  if #freed > 0 then
    local list = table.concat(freed, ',')
    local before = redis.call('HGET', freed_key, step)
    if before then
      list = before .. ',' .. list
    end
    redis.call('HSET', freed_key, step, list)
  end
end

-- Undo step's death (see above).
local function revive(step)
  local state = redis.call('HGET', flow_key, 'state')
  -- A death whose release was under way: the children past where it
  -- stands never had it settled, and its next end settles them all.
  local at = mark_of(step)
  -- Its cascade under way, by step: where each stands.
  local pending, upto = cascade_of(step), {}
  for _, c in ipairs(pending) do
    upto[c.name] = c.at
  end
  if state == 'failed' then
    redis.call('HSET', flow_key, 'state', 'running')
    redis.call('HDEL', flow_key, 'ended')
    for _, k in ipairs(KEYS) do
      redis.call('PERSIST', k)
    end
    -- The releases under way when it ended are carried no further (a
    -- carry of an ended workflow settles nothing, and its notices are
    -- forgotten): every child past where one stands has ended, and one
    -- that waits again counts only the parents that have not ended.
    for _, f in ipairs(redis.call('HKEYS', freed_key)) do
      local c = string.sub(f, 1, 1)
      if c == '@' or c == '!' then
        redis.call('HDEL', freed_key, f)
      end
    end
  elseif state ~= 'running' then
    return
  end
  -- Counted, so that a read of the workflow in pages (wf_state.lua) that
  -- a revival went between is read again: the revival moves steps back.
  redis.call('HINCRBY', flow_key, 'revived', 1)
  if at then
    redis.call('HDEL', freed_key, '@' .. step)
  end
  if #pending > 0 then
    redis.call('HDEL', freed_key, '!' .. step)
  end
  redis.call('HSET', steps_key, step, 'q')
  redis.call('HINCRBY', flow_key, 'dead', -1)
  redis.call('HINCRBY', flow_key, 'open', 1)
  -- The steps that wait again: step, then the descendants its death
  -- cancelled, unless another parent's end still cancels them.
  local todo, waits, again = {step}, {step}, {[step] = true}
  while #todo > 0 do
    local parent = table.remove(todo)
    -- Its children's states read together, a thousand a call.
    local kids = {}
    for kid in string.gmatch(redis.call('HGET', kids_key, parent) or '', '[^,]+') do
      if string.sub(kid, 1, 1) ~= '+' then
        kids[#kids + 1] = kid
      end
    end
    local states = hmget(steps_key, kids)
    for j, kid in ipairs(kids) do
      if states[j] == 'x' then
        local held = false
        for p in string.gmatch(redis.call('HGET', parents_key, kid) or '', '[^,]+') do
          local st = redis.call('HGET', steps_key, p)
          if st ~= 'w' and st ~= 'r' and st ~= 'q' and st ~= 'ok' and not runs_anyway(p, kid) then
            held = true
          end
        end
        if not held then
          redis.call('HSET', steps_key, kid, 'w')
          redis.call('HINCRBY', flow_key, 'open', 1)
          todo[#todo + 1] = kid
          waits[#waits + 1] = kid
          again[kid] = true
        end
      end
    end
  end
  -- The steps of its cascade that another end still cancels (held),
  -- whose rest of children this call settles below.
  local held = {}
  for _, c in ipairs(pending) do
    if not again[c.name] then
      held[#held + 1] = c
    end
  end
  -- A child still waiting that runs whatever the end of one that waits
  -- again had that end counted, and waits for it again: those of step
  -- past where its release stood were not counted, nor those of a step
  -- of its cascade past where that stood.
  for _, w in ipairs(waits) do
    local kids = redis.call('HGET', kids_key, w) or ''
    local stop = (w == step and at) or upto[w] or #kids + 1
    local b, e = string.find(kids, '[^,]+')
    while b and b < stop do
      local kid = string.sub(kids, b, e)
      if string.sub(kid, 1, 1) == '+' then
        kid = string.sub(kid, 2)
        if not again[kid] and redis.call('HGET', steps_key, kid) == 'w' then
          redis.call('HINCRBY', left_key, kid, 1)
        end
      end
      b, e = string.find(kids, '[^,]+', e + 1)
    end
  end
  -- Where the cascades under way stand, by step: other ends' and the held
  -- steps of this one's, whose settling below lowers the counts.
  local below
  local function cascading(p)
    if not below then
      below = {}
      for _, f in ipairs(redis.call('HKEYS', freed_key)) do
        if string.sub(f, 1, 1) == '!' then
          for _, c in ipairs(cascade_of(string.sub(f, 2))) do
            below[c.name] = c.at
          end
        end
      end
      for _, c in ipairs(held) do
        below[c.name] = c.at
      end
    end
    return below[p]
  end
  -- Counted once all wait again (one may be the parent of another):
  -- the parents left of a step that waits again are those that have not
  -- ended, and those whose end is yet to be settled in it (a release or a
  -- cascade under way, the held steps of this one's among them: a parent
  -- of it that it waits for whatever its end).
  for _, w in ipairs(waits) do
    if w ~= step then
      local left = 0
      for p in string.gmatch(redis.call('HGET', parents_key, w) or '', '[^,]+') do
        local st = redis.call('HGET', steps_key, p)
        if st == 'w' or st == 'r' or st == 'q' or unsettled(p, w) or
            (st == 'x' and cascading(p) and unsettled(p, w, cascading(p))) then
          left = left + 1
        end
      end
      redis.call('HSET', left_key, w, left)
    end
  end
  -- Then the held steps' children, on the counts just made, so that a
  -- step they cut again lowers each count once: no later call goes on
  -- with a cascade of a step that runs again, whatever the number of its
  -- children (a revival during a cascade is rare). Those made ready are
  -- added to the step's freed list, answered by its notices.
  if #held > 0 then
    local freed = {}
    cascade(held, math.huge, freed, step)
    add_freed(step, freed)
  end
end

-- Settle the children of step, which ended (good: in a way that lets
-- them run), from where its release stands, at most budget of them,
-- counting those of its cascade (see cascade_of), which goes first: a
-- child's count of parents left goes down, one with none left becomes
-- ready, and one that cannot run is cancelled, its descendants in the
-- cascade. Where the release and the cascade stand are written if
-- children are left to either, else dropped; those made ready are
-- appended to step's freed list. Returns those made ready, the children
-- settled, whether some are left, and the steps still open (nil if it
-- ended none).
local function settle(step, good, budget)
  local kids = redis.call('HGET', kids_key, step) or ''
  local had = mark_of(step)
  local pos, freed = had or 1, {}
  local stack = cascade_of(step)
  local stacked = #stack > 0
  local n, open = cascade(stack, budget, freed, step)
  -- The children of this call: those whose count goes down, and the
  -- others, cancelled if they wait.
  local down, off, m, at, more = take(kids, pos, budget - n, good)
  n, pos = n + m, at
  if #down > 0 then
    lower(down, freed)
  end
  if #off > 0 then
    open = cut(off, stack) or open
  end
  local below, last = cascade(stack, budget - n, freed, step)
  n, open = n + below, last or open
  more = more or #stack > 0
  if more then
    redis.call('HSET', freed_key, '@' .. step, pos)
  elseif had then
    redis.call('HDEL', freed_key, '@' .. step)
  end
  if #stack > 0 then
    local list = {}
    for j, s in ipairs(stack) do
      list[j] = s.name .. ':' .. s.at
    end
    redis.call('HSET', freed_key, '!' .. step, table.concat(list, ','))
  elseif stacked then
    redis.call('HDEL', freed_key, '!' .. step)
  end
  add_freed(step, freed)
  return freed, n, more, open
end

-- The children left to settle in this call (see settle).
local budget = FLOW_RELEASE_MAX

-- The workflow's state, read once: only a revival and the workflow's
-- end change it.
local state = redis.call('HGET', flow_key, 'state')

-- Record one notice's end of step (see above). Returns the steps it
-- freed if it recorded the end, else nil.
local function release(step, status, result, stamp, task)
  local at = tonumber(stamp)
  local seen = tonumber(redis.call('HGET', seen_key, step) or '0')
  local cur = redis.call('HGET', steps_key, step)
  -- Only a workflow that runs, or a failed one (which a revival may run
  -- again), notes when it saw the step: one that ended otherwise takes
  -- nothing, and a seen hash it made now would outlive its other keys.
  if at > seen and cur and (state == 'running' or state == 'failed') then
    redis.call('HSET', seen_key, step, stamp)
    seen = at
    if cur == 'dead' then
      -- Revived: by this notice, or by one not carried yet, since an end
      -- newer than the death recorded comes only after a requeue.
      revive(step)
      state, cur = redis.call('HGET', flow_key, 'state'), redis.call('HGET', steps_key, step)
    end
  end
  if at == seen and status ~= 'revived' and
      state == 'running' and (cur == 'w' or cur == 'r' or cur == 'q') then
    if status == 'ok' then
      redis.call('HSET', results_key, step, result)
    end
    -- Its id, if its end came before its mark as queued (wf_enqueued.lua
    -- sets it with the mark).
    if cur ~= 'q' then
      redis.call('HSETNX', ids_key, step, task)
    end
    -- A ready step leaves that state for good: its note of the death that
    -- freed it (see cascade) is read no more.
    if cur == 'r' then
      redis.call('HDEL', freed_key, '^' .. step)
    end
    local st = status
    if status == 'cancelled' then
      st = 'x'
      redis.call('HINCRBY', flow_key, 'cancelled', 1)
    end
    local open = flow_step_end(flow_key, steps_key, step, st)
    -- Those an earlier end of the step freed (a death, before its
    -- revival) are answered with these: a crash may have left them
    -- unqueued, and a replay of that end's notice answers from the list.
    local before = redis.call('HGET', freed_key, step)
    local freed, n, _, last = settle(step, status == 'ok', budget)
    budget = budget - n
    open = last or open
    if before then
      for kid in string.gmatch(before, '[^,]+') do
        freed[#freed + 1] = kid
      end
    end
    if open <= 0 then
      local dead = tonumber(redis.call('HGET', flow_key, 'dead') or '0')
      local cancelled = tonumber(redis.call('HGET', flow_key, 'cancelled') or '0')
      state = (dead > 0 or cancelled > 0) and 'failed' or 'succeeded'
      flow_close(KEYS, channel, state)
    end
    return freed
  end
end

-- The common batch in bulk: every notice a first success of a distinct
-- step that has not ended, none the parent of another, in a workflow
-- that runs. Its ends are recorded, its children's counts lowered and
-- those with none left made ready as release does one notice after
-- another, but each hash read and written a thousand steps a call, not a
-- few calls per step: a fan-out's children and a fan-in's parents cost
-- the batch a few calls. Any other batch (a death, a cancel, a revival, a
-- replay, a late notice, or children more than a call settles) goes one
-- notice after another, below. Returns
-- the steps freed (those answered), or nil, having written nothing, for
-- a batch of the other kind.
local function bulk()
  if state ~= 'running' then
    return nil
  end
  local names, mine = {}, {}
  for i = 3, #ARGV, 5 do
    local step = ARGV[i]
    if ARGV[i + 1] ~= 'ok' or mine[step] then
      return nil
    end
    mine[step] = true
    names[#names + 1] = step
  end
  local seens, curs = hmget(seen_key, names), hmget(steps_key, names)
  for j, step in ipairs(names) do
    local cur = curs[j]
    if tonumber(ARGV[3 + 5 * (j - 1) + 3]) <= tonumber(seens[j] or '0') or
        not (cur == 'w' or cur == 'r' or cur == 'q') then
      return nil
    end
  end
  -- Each child's count goes down by its parents in the batch; the last of
  -- them in the batch frees it, as one after another would.
  local by = {}
  local kids, down = flow_kids_down(kids_key, names, mine, by)
  if not kids then
    return nil
  end
  local seen, results, ended = {}, {}, {}
  for j, step in ipairs(names) do
    local at = 3 + 5 * (j - 1)
    put(seen, step, ARGV[at + 3])
    put(results, step, ARGV[at + 2])
    put(ended, step, 'ok')
    -- Its id, if its end came before its mark as queued.
    if curs[j] ~= 'q' then
      redis.call('HSETNX', ids_key, step, ARGV[at + 4])
    end
    if curs[j] == 'r' then
      redis.call('HDEL', freed_key, '^' .. step)
    end
  end
  hset(seen_key, seen)
  hset(results_key, results)
  hset(steps_key, ended)
  local lefts, kstates = hmget(left_key, kids), hmget(steps_key, kids)
  local newleft, ready, freedby, byorder = {}, {}, {}, {}
  for j, kid in ipairs(kids) do
    local left = (tonumber(lefts[j]) or 0) - down[kid]
    put(newleft, kid, left)
    if left <= 0 and kstates[j] == 'w' then
      put(ready, kid, 'r')
      local step = by[kid]
      if not freedby[step] then
        freedby[step] = {}
        byorder[#byorder + 1] = step
      end
      table.insert(freedby[step], kid)
    end
  end
  hset(left_key, newleft)
  hset(steps_key, ready)
  local open = redis.call('HINCRBY', flow_key, 'open', -#names)
  -- Added to those an earlier end of the step freed (a death, before its
  -- revival), as release does; answered with them.
  local befores = hmget(freed_key, names)
  local lists, freed = {}, {}
  for j, step in ipairs(names) do
    local list = freedby[step] and table.concat(freedby[step], ',')
    if befores[j] then
      for kid in string.gmatch(befores[j], '[^,]+') do
        freed[#freed + 1] = kid
      end
      if list then list = befores[j] .. ',' .. list end
    end
    if list then
      put(lists, step, list)
      for _, kid in ipairs(freedby[step]) do
        freed[#freed + 1] = kid
      end
    end
  end
  hset(freed_key, lists)
  if open <= 0 then
    local dead = tonumber(redis.call('HGET', flow_key, 'dead') or '0')
    local cancelled = tonumber(redis.call('HGET', flow_key, 'cancelled') or '0')
    state = (dead > 0 or cancelled > 0) and 'failed' or 'succeeded'
    flow_close(KEYS, channel, state)
  end
  -- Those still ready, each once.
  local told, uniq = {}, {}
  for _, kid in ipairs(freed) do
    if not told[kid] then
      told[kid] = true
      uniq[#uniq + 1] = kid
    end
  end
  local out, states = {}, hmget(steps_key, uniq)
  for j, kid in ipairs(uniq) do
    if states[j] == 'r' then
      out[#out + 1] = kid
    end
  end
  return out
end

-- The notices left to release one after another: none once in bulk.
local out, fresh, last = bulk(), {}, #ARGV
if out then
  last = 2
else
  out = {}
end
for i = 3, last, 5 do
  fresh[i] = release(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
end
-- The releases under way of the steps named continue while the call's
-- children last (none in bulk: its steps had not ended, and its children
-- are few enough to settle at once).
local more, chunk = false, {}
if last > 2 and state == 'running' then
  local names, first, marks, named = {}, {}, {}, {}
  for i = 3, last, 5 do
    if not named[ARGV[i]] then
      named[ARGV[i]] = true
      names[#names + 1] = ARGV[i]
      first[#first + 1] = i
      marks[#marks + 1] = '@' .. ARGV[i]
    end
  end
  marks = hmget(freed_key, marks)
  for j, step in ipairs(names) do
    if marks[j] and state == 'running' then
      if budget > 0 then
        local freed, n, left, open = settle(step, redis.call('HGET', steps_key, step) == 'ok', budget)
        budget = budget - n
        chunk[first[j]] = freed
        more = more or left
        if open and open <= 0 then
          local dead = tonumber(redis.call('HGET', flow_key, 'dead') or '0')
          local cancelled = tonumber(redis.call('HGET', flow_key, 'cancelled') or '0')
          state = (dead > 0 or cancelled > 0) and 'failed' or 'succeeded'
          flow_close(KEYS, channel, state)
        end
      else
        more = true
      end
    end
  end
  more = more and state == 'running'
end
-- The steps freed by the ends recorded just now and the releases
-- continued; else (a replay) all those the step's ends freed, unless
-- the caller enqueued those already (enqueued).
local told, maybe = {}, {}
for i = 3, last, 5 do
  local freed = fresh[i]
  if not freed and not enqueued then
    freed = {}
    for kid in string.gmatch(redis.call('HGET', freed_key, ARGV[i]) or '', '[^,]+') do
      freed[#freed + 1] = kid
    end
  else
    freed = freed or {}
    for _, kid in ipairs(chunk[i] or {}) do
      freed[#freed + 1] = kid
    end
  end
  for _, kid in ipairs(freed) do
    if not told[kid] then
      told[kid] = true
      maybe[#maybe + 1] = kid
    end
  end
end
-- Those still ready, each once.
local states = hmget(steps_key, maybe)
for j, kid in ipairs(maybe) do
  if states[j] == 'r' then
    out[#out + 1] = kid
  end
end
-- Their specs, a thousand a call: a fan-out frees thousands at once.
local names = out
out = {more and '1' or '0'}
for i = 1, #names, 1000 do
  local specs = redis.call('HMGET', spec_key, unpack(names, i, math.min(i + 999, #names)))
  for j, spec in ipairs(specs) do
    out[#out + 1] = names[i + j - 1]
    out[#out + 1] = spec
  end
end
return out
