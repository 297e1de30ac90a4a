-- Kourier's (and TechEmpower's) pipeline.lua: `wrk ... -s pipeline.lua -- DEPTH` sends DEPTH copies
-- of the request in one write per round.
init = function(args)
  local r = {}
  local depth = tonumber(args[1]) or 1
  for i = 1, depth do
    r[i] = wrk.format()
  end
  req = table.concat(r)
end

request = function()
  return req
end
