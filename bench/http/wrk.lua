-- The load of one benchmark scenario for wrk (bench/http/wrk.ts starts it with -t1 and sets the
-- environment): one request per line of ATTEST_WRK_BODIES (or one fixed request), sent in order;
-- each answer is checked for ATTEST_WRK_EXPECT; done() prints the counts as one JSON line.
local method = os.getenv("ATTEST_WRK_METHOD") or "POST"
local path = os.getenv("ATTEST_WRK_PATH")
local expect = os.getenv("ATTEST_WRK_EXPECT")
local expect2 = os.getenv("ATTEST_WRK_EXPECT2")
local file = os.getenv("ATTEST_WRK_BODIES")
-- use once: each body is sent once, then nothing (an empty request: the connection waits) until
-- wrk stops; otherwise the bodies are sent round and round
local once = os.getenv("ATTEST_WRK_ONCE") == "1"
-- stop after this many answers (a run bounded by a count), 0 for none
local amount = tonumber(os.getenv("ATTEST_WRK_AMOUNT") or "0")
local headers = {}
for name, value in string.gmatch(os.getenv("ATTEST_WRK_HEADERS") or "", "([^:\n]+): ([^\n]*)") do
  headers[name] = value
end

local requests = {}
local sent = 0
correct = 0
wrong = 0
sample = ""
dry = 0

function init(args)
  if file and file ~= "" then
    for line in io.lines(file) do
      requests[#requests + 1] = wrk.format(method, path, headers, line)
    end
  else
    requests[1] = wrk.format(method, path, headers, os.getenv("ATTEST_WRK_BODY"))
  end
end

local primed = false
function request()
  -- wrk asks each thread for one request at its start and never sends it: that one counts not
  if not primed then
    primed = true
    return requests[1]
  end
  sent = sent + 1
  if (once and sent > #requests) or (amount > 0 and sent > amount) then
    -- a duration-bound use-once pool that runs dry before the end is a harness error
    if amount == 0 then dry = dry + 1 end
    return ""
  end
  return requests[(sent - 1) % #requests + 1]
end

function response(status, headers, body)
  if status == 200 and body ~= nil and string.find(body, expect, 1, true) ~= nil
      and (expect2 == nil or expect2 == "" or string.find(body, expect2, 1, true) ~= nil) then
    correct = correct + 1
  else
    wrong = wrong + 1
    if sample == "" then sample = tostring(status) .. " " .. string.sub(body or "", 1, 300) end
  end
  -- wrk itself runs its whole -d: bench/http/wrk.ts stops it (SIGINT, which still reports) on this line
  if amount > 0 and correct + wrong == amount then
    io.stdout:write("ATTEST_WRK_DONE\n")
    io.stdout:flush()
  end
end

local threads = {}
function setup(thread) threads[#threads + 1] = thread end

local function quote(s)
  return '"' .. string.gsub(s, '[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end) .. '"'
end

function done(summary, latency, requests)
  local c, w, d, s = 0, 0, 0, ""
  for _, t in ipairs(threads) do
    c = c + t:get("correct")
    w = w + t:get("wrong")
    d = d + t:get("dry")
    if s == "" then s = t:get("sample") end
  end
  local e = summary.errors
  io.write(string.format(
    '\nATTEST_WRK {"correct":%d,"wrong":%d,"dry":%d,"requests":%d,"errors":%d,"durationUs":%d,"p50Us":%d,"p99Us":%d,"sample":%s}\n',
    c, w, d, summary.requests, e.connect + e.read + e.write + e.timeout, summary.duration,
    latency:percentile(50), latency:percentile(99), quote(s)))
end
