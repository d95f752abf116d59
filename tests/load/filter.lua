-- wrk script: POST the filter body in FILTER_BODY_FILE; count replies whose Error is not empty.
local f = assert(io.open(os.getenv("FILTER_BODY_FILE"), "r"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

errors = 0
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"NodeNames"') or string.find(body, '"Error":"[^"]') then
    errors = errors + 1
  end
end

function done(summary, latency, requests)
  local e = 0
  for _, t in ipairs(threads) do e = e + t:get("errors") end
  io.write(string.format("wrk_filter_requests %d\nwrk_filter_error_replies %d\n", summary.requests, e))
  io.write(string.format("wrk_filter_p50_ms %.2f\nwrk_filter_p99_ms %.2f\n",
                         latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
