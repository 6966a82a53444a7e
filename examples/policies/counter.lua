-- counter: an object class holding a decimal counter.
--
--   terrace policy put counter examples/policies/counter.lua
--   terrace object exec mybucket/visits counter.incr        -> 1
--   terrace object exec mybucket/visits counter.incr 10     -> 11
--   terrace object exec mybucket/visits counter.get         -> 11
--
-- Each call is an atomic read-modify-write of the object: concurrent
-- increments from many clients never lose an update.

-- incr adds ARG (default 1) and returns the new value.
function incr(obj, arg)
  local n = tonumber(obj:read()) or 0
  local step = 1
  if arg ~= nil then
    step = tonumber(arg)
    if step == nil then
      error("incr: the argument must be a number, got '" .. arg .. "'")
    end
  end
  n = n + step
  obj:write(tostring(n))
  return n
end

-- get returns the value without writing.
function get(obj)
  return tonumber(obj:read()) or 0
end
