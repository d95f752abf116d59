-- wrk script: GET /healthz (no body, no gRPC behind it): the machine's latency noise floor.
wrk.method = "GET"
wrk.path = "/healthz"

done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  io.write(string.format(
      "WRK_JSON {\"requests\":%d,\"seconds\":%.3f,\"rps\":%.1f,\"p50_us\":%d,\"p90_us\":%d," ..
      "\"p99_us\":%d,\"max_us\":%d}\n",
      summary.requests, seconds, summary.requests / seconds, latency:percentile(50),
      latency:percentile(90), latency:percentile(99), latency.max))
end
