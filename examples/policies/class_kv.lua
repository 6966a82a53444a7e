-- class_kv: an object class that keeps a small JSON map in one object,
-- updated field by field without read-modify-write races in the client.
--
--   terrace policy put kv examples/policies/class_kv.lua --hook class
--   terrace object exec mybucket/config kv.set "mode=fast"      -> fast
--   terrace object exec mybucket/config kv.get mode             -> fast
--   terrace object exec mybucket/config kv.keys                 -> ["mode"]
--
-- Every method sees the whole object; a write replaces it atomically, and
-- a concurrent writer makes the method run again on the new contents.

local function load(obj)
  local s = obj:read()
  if s == "" then return {} end
  return terrace.json_decode(s)
end

-- set takes "key=value" and returns the value stored.
function set(obj, arg)
  local k, v = (arg or ""):match("^([%w_%-%.]+)=(.*)$")
  if k == nil then
    error("set: want key=value, got '" .. tostring(arg) .. "'")
  end
  local m = load(obj)
  m[k] = v
  obj:write(terrace.json_encode(m))
  return v
end

-- get returns a key's value (nil if absent).
function get(obj, key)
  return load(obj)[key]
end

-- del removes a key and returns whether it was there.
function del(obj, key)
  local m = load(obj)
  local had = m[key] ~= nil
  m[key] = nil
  obj:write(terrace.json_encode(m))
  return had
end

-- keys returns the sorted keys.
function keys(obj)
  local out = {}
  for k in pairs(load(obj)) do out[#out + 1] = k end
  table.sort(out)
  return out
end
