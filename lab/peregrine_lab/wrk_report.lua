-- wrk script used by the Peregrine lab (lab/peregrine_lab/loadgen.py).
--
-- Arguments (after `--` on the wrk command line), all positional:
--   1: pipelining depth (0 or 1 = one request per write; N > 1 = N requests concatenated per write)
--   2: HTTP method
--   3: path of a file holding the request body, or "-" for none
--   4..: request headers as "Name: value"
--
-- The request stays *static* (no global `request` function): wrk then formats it once per thread
-- instead of calling into Lua for every request, which would cost the load generator CPU time and
-- lower the ceiling it can measure. For pipelining, `wrk.format` is replaced by one returning the
-- request repeated N times; wrk counts the requests in that buffer and expects N responses per write.
--
-- Status codes are not counted in a `response()` callback (that also makes wrk call into Lua for
-- every response); wrk's own `summary.errors.status` counts answers with status >= 400, which is
-- what the runner compares with the contract.
--
-- `done()` prints one line: `PEREGRINE_LAB_JSON {...}` holding the figures the runner reads.

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  return data
end

function init(args)
  local depth = tonumber(args[1] or "0") or 0
  local method = args[2] or "GET"
  local body_file = args[3] or "-"
  local body = nil
  if body_file ~= "-" then
    body = read_file(body_file)
  end
  local headers = {}
  for i = 4, #args do
    local name, value = string.match(args[i], "^([^:]+):%s*(.*)$")
    if name then
      headers[name] = value
    end
  end
  wrk.method = method
  wrk.body = body
  for name, value in pairs(headers) do
    wrk.headers[name] = value
  end
  if depth > 1 then
    local format = wrk.format
    local one = format(method, nil, nil, body)
    local many = string.rep(one, depth)
    wrk.format = function()
      return many
    end
  end
end

local function num(v)
  if v == nil then
    return "null"
  end
  return string.format("%.3f", v)
end

function done(summary, latency, requests)
  local e = summary.errors
  local parts = {
    string.format('"requests":%d', summary.requests),
    string.format('"duration_us":%d', summary.duration),
    string.format('"bytes":%d', summary.bytes),
    string.format(
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}',
      e.connect, e.read, e.write, e.status, e.timeout
    ),
    string.format(
      '"latency_us":{"min":%s,"mean":%s,"stdev":%s,"max":%s,"p50":%s,"p90":%s,"p99":%s,"p999":%s}',
      num(latency.min), num(latency.mean), num(latency.stdev), num(latency.max),
      num(latency:percentile(50)), num(latency:percentile(90)),
      num(latency:percentile(99)), num(latency:percentile(99.9))
    ),
  }
  io.write("PEREGRINE_LAB_JSON {" .. table.concat(parts, ",") .. "}\n")
end
