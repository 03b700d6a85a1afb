-- List a queue's in-flight processes, in no order, each task entry's
-- payload cut to its first cut bytes (see entry_cut), read by HSCAN a
-- megabyte or so at a time (see waiting_list.lua; COUNT is a hint). HSCAN
-- may return a process twice (the hash can be rehashed between calls):
-- each is listed once.
-- Returns {pid, size, record, ...}: the record (state, owner, entry) with
-- its entry cut, and the payload's whole size.
local procs_key = KEYS[1]
local cut = tonumber(ARGV[1]) -- >= 0

local out, listed = {}, {}
local cursor, seen, read = '0', 0, 0
repeat
  local page = redis.call('HSCAN', procs_key, cursor, 'COUNT', chunk_size(seen, read, 1048576))
  cursor = page[1]
  local got = page[2]
  for i = 1, #got, 2 do
    local pid, v = got[i], got[i + 1]
    seen, read = seen + 1, read + #v
    if not listed[pid] then
      listed[pid] = true
      local record, size = entry_cut(v, cut, 2 + OWNER_LEN)
      out[#out + 1] = pid
      out[#out + 1] = size
      out[#out + 1] = record
    end
  end
until cursor == '0'
return out
