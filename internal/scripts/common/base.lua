-- What the other files of common/ build on: the Redis server's clock,
-- events, numbers written for Redis, and a hash read in parts.
--
-- common/ holds the helpers the scripts share, a subject to a file. A
-- script carries only the parts it uses (prelude.go), in the order of
-- scripts.go's commonFiles: a part names only parts above it.

-- Time comes from the Redis server so that every lease is judged by one
-- clock per slot, never by a client's. Scores and ids are formatted with
-- %.0f / %x because Lua numbers are doubles and tostring() may print them
-- in exponent form.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Events go out on the queue's channel, which shares its hash tag: with
-- SPUBLISH on Redis Cluster (a shard channel, heard only on the queue's own
-- shard) and PUBLISH elsewhere. scripts.go sets PUBLISH_COMMAND above.
local function publish(channel, message)
  redis.call(PUBLISH_COMMAND, channel, message)
end

local function ms(n)
  return string.format('%.0f', n)
end

-- HMGET of names, a thousand a call; the values by index in names.
local function hmget(key, names)
  local got = {}
  for i = 1, #names, 1000 do
    local part = redis.call('HMGET', key, unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #part do
      got[i + j - 1] = part[j]
    end
  end
  return got
end
