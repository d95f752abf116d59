-- wrk script for tests/perf/run.sh: POST the Filter body in the file $FILTER_BODY to the path
-- $FILTER_PATH (default /filter) on every request, over keep-alive connections, with the headers
-- kube-scheduler's extender client sends (Go's net/http: User-Agent Go-http-client/1.1, gzip
-- offered; the extender sets Content-Type; wrk adds Host and Content-Length).
local path = os.getenv("FILTER_PATH") or "/filter"
local file = assert(io.open(assert(os.getenv("FILTER_BODY"), "FILTER_BODY is not set"), "rb"))
local body = file:read("*a")
file:close()

wrk.method = "POST"
wrk.path = path
wrk.body = body
wrk.headers["User-Agent"] = "Go-http-client/1.1"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept-Encoding"] = "gzip"

-- One machine-readable line for run.sh. "errors" are socket errors and timeouts; "non2xx" replies
-- with another status: a run with either is not a measurement.
done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  io.write(string.format(
      "WRK_JSON {\"requests\":%d,\"seconds\":%.3f,\"rps\":%.1f,\"errors\":%d," ..
      "\"non2xx\":%d,\"bytes\":%d,\"p50_us\":%d,\"p90_us\":%d,\"p99_us\":%d,\"max_us\":%d}\n",
      summary.requests, seconds, summary.requests / seconds,
      summary.errors.connect + summary.errors.read + summary.errors.write +
          summary.errors.timeout,
      summary.errors.status, summary.bytes, latency:percentile(50), latency:percentile(90),
      latency:percentile(99), latency.max))
end
