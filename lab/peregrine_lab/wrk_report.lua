-- wrk script used by the Peregrine lab (lab/peregrine_lab/loadgen.py).
--
-- Arguments (after `--` on the wrk command line), all positional:
--   1: pipelining depth (0 or 1 = one request per write; N > 1 = N requests concatenated per write)
--   2: HTTP method
--   3: path of a file holding the request body, or "-" for none
--   4: path of a file of distinct requests to spread the load over, or "-" for one fixed request:
--      one `METHOD<TAB>PATH<TAB>BODY` line each (loadgen.request_set, drawn from the run's seed)
--   5..: request headers as "Name: value"
--
-- With one fixed request it stays *static* (no global `request` function): wrk then formats it
-- once per thread instead of calling into Lua for every request, which would cost the load
-- generator CPU time and lower the ceiling it can measure. For pipelining, `wrk.format` is
-- replaced by one returning the request repeated N times; wrk counts the requests in that buffer
-- and expects N responses per write.
--
-- With a request file, every request is formatted once in init() and a global `request()` hands
-- them out in turn (each thread from its own starting point), so a server caching answers by URL
-- or body gets no help; pipelined, each write is N consecutive requests of the cycle. The Lua
-- call per write is the price, paid alike by every server of the run.
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

-- setup() runs in wrk's main Lua state once per thread, before that thread's init().
local threads_set_up = 0
function setup(thread)
  thread:set("lab_thread", threads_set_up)
  threads_set_up = threads_set_up + 1
end

local function read_requests(path)
  local list = {}
  for line in io.lines(path) do
    local method, target, body = string.match(line, "^([^\t]+)\t([^\t]+)\t(.*)$")
    if method then
      if body == "" then
        body = nil
      end
      list[#list + 1] = wrk.format(method, target, nil, body)
    end
  end
  assert(#list > 0, "no request in " .. path)
  return list
end

local function cycle(list, depth)
  -- Write i holds requests i .. i+depth-1 of the cycle: every request is sent equally often.
  if depth > 1 then
    local batches = {}
    for i = 1, #list do
      local parts = {}
      for k = 0, depth - 1 do
        parts[#parts + 1] = list[((i - 1 + k) % #list) + 1]
      end
      batches[i] = table.concat(parts)
    end
    list = batches
  end
  local at = ((lab_thread or 0) * 17) % #list
  request = function()
    at = at % #list + 1
    return list[at]
  end
end

function init(args)
  local depth = tonumber(args[1] or "0") or 0
  local method = args[2] or "GET"
  local body_file = args[3] or "-"
  local requests_file = args[4] or "-"
  local body = nil
  if body_file ~= "-" then
    body = read_file(body_file)
  end
  local headers = {}
  for i = 5, #args do
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
  if requests_file ~= "-" then
    cycle(read_requests(requests_file), depth)
  elseif depth > 1 then
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
