-- checksum: an object class that computes digests where the data lives.
--
--   terrace policy put checksum examples/policies/checksum.lua
--   terrace object exec mybucket/report.pdf checksum.sha256
--
-- The object is read on a node holding a replica; only the digest crosses
-- the network.

-- sha256 returns the hex SHA-256 of the object's contents.
function sha256(obj)
  if not obj.exists then
    error("sha256: " .. obj.bucket .. "/" .. obj.key .. " does not exist")
  end
  return terrace.sha256(obj:read())
end

-- crc32c returns the CRC-32C of the contents (as a number).
function crc32c(obj)
  return terrace.crc32c(obj:read())
end
