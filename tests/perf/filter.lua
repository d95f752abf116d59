-- wrk script: POST the Filter body in $FILTER_BODY (a file) to the path in $FILTER_PATH
-- (default /filter) on every request, over keep-alive connections.
local path = os.getenv("FILTER_PATH") or "/filter"
local file = assert(io.open(assert(os.getenv("FILTER_BODY"), "FILTER_BODY is not set"), "rb"))
local body = file:read("*a")
file:close()

wrk.method = "POST"
wrk.path = path
wrk.body = body
wrk.headers["Content-Type"] = "application/json"
-- kube-scheduler's Go transport always offers gzip; the reply must stay plain.
wrk.headers["Accept-Encoding"] = "gzip"

-- One machine-readable line for tests/perf/run.sh.
done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  io.write(string.format(
      "WRK_JSON {\"requests\":%d,\"seconds\":%.3f,\"rps\":%.1f,\"errors\":%d," ..
      "\"non2xx\":%d,\"p50_us\":%d,\"p90_us\":%d,\"p99_us\":%d,\"max_us\":%d}\n",
      summary.requests, seconds, summary.requests / seconds,
      summary.errors.connect + summary.errors.read + summary.errors.write +
          summary.errors.timeout,
      summary.errors.status, latency:percentile(50), latency:percentile(90),
      latency:percentile(99), latency.max))
end
