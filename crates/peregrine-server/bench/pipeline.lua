-- wrk script for the pipelined cells of measure.sh and interleaved.sh: every write carries
-- DEPTH requests (first script argument after `--`, default 16) for the URL's path.
init = function(args)
  local depth = tonumber(args[1]) or 16
  local r = {}
  for i = 1, depth do r[i] = wrk.format(nil, wrk.path) end
  req = table.concat(r)
end
request = function() return req end
