-- append: an object class for an append-only log of records, one per line.
--
--   terrace policy put append examples/policies/append.lua
--   terrace object exec mybucket/audit append.record "user bob logged in"   -> 1
--   terrace object exec mybucket/audit append.count                         -> 1
--
-- record numbers each line, so concurrent writers never interleave or
-- lose lines: the whole append is one atomic read-modify-write.

-- count_lines counts newline-terminated records.
local function count_lines(s)
  local n = 0
  for _ in s:gmatch("\n") do n = n + 1 end
  return n
end

-- record appends "N<TAB>ARG" as line N and returns N.
function record(obj, arg)
  if arg == nil or arg == "" then
    error("record: give the text to record as the argument")
  end
  if arg:find("\n", 1, true) then
    error("record: the text must be one line")
  end
  local n = count_lines(obj:read()) + 1
  obj:append(n .. "\t" .. arg .. "\n")
  return n
end

-- count returns how many records the log holds.
function count(obj)
  return count_lines(obj:read())
end

-- last returns the most recent record's text (nil for an empty log).
function last(obj)
  return obj:read():match("[^\t\n]*\t([^\n]*)\n$")
end
