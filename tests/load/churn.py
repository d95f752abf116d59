#!/usr/bin/env python3
"""Churn for tests/load/run.sh: creates pods, schedules them through the shim (filter, then bind on
4 concurrent threads), deletes them, and samples the server's and shim's RSS and open fds once a
second. Prints figures as `name value` lines and a JSON line of samples; exit 1 on any error."""
import http.client, json, os, sys, threading, time

sim_port, shim_port, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
pids = {"server": int(sys.argv[4]), "shim": int(sys.argv[5])}
nodes = sys.argv[6].split(",")
deadline = time.time() + seconds
lock = threading.Lock()
counts = {"created": 0, "bound": 0, "deleted": 0, "errors": 0}
first_errors = []

def call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request(method, path, body=None if body is None else json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data

def error(what):
    with lock:
        counts["errors"] += 1
        if len(first_errors) < 5:
            first_errors.append(what)

def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": "fitledger-scheduler", "containers": [
                {"name": "c", "image": "pause",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}

def worker(wid):
    live, n = [], 0
    while time.time() < deadline:
        name = "load-%d-%d" % (wid, n)
        n += 1
        st, data = call(sim_port, "POST", "/api/v1/namespaces/default/pods", pod(name))
        if st != 201:
            error("create %s: %d %s" % (name, st, data[:200])); continue
        created = json.loads(data)
        with lock: counts["created"] += 1
        st, data = call(shim_port, "POST", "/filter", {"Pod": created, "NodeNames": nodes})
        reply = json.loads(data) if st == 200 else {}
        fits = reply.get("NodeNames") or []
        if st != 200 or reply.get("Error") or not fits:
            error("filter %s: %d %s" % (name, st, data[:200])); continue
        st, data = call(shim_port, "POST", "/bind", {
            "PodName": name, "PodNamespace": "default",
            "PodUID": created["metadata"]["uid"], "Node": fits[n % len(fits)]})
        if st != 200 or json.loads(data).get("Error"):
            error("bind %s: %d %s" % (name, st, data[:200])); continue
        with lock: counts["bound"] += 1
        live.append(name)
        if len(live) > 25:
            victim = live.pop(0)
            st, data = call(sim_port, "DELETE", "/api/v1/namespaces/default/pods/" + victim)
            if st != 200:
                error("delete %s: %d" % (victim, st))
            else:
                with lock: counts["deleted"] += 1

def sample():
    out = {}
    for k, pid in pids.items():
        with open("/proc/%d/status" % pid) as f:
            rss = [int(l.split()[1]) for l in f if l.startswith("VmRSS:")][0]
        out[k] = (rss, len(os.listdir("/proc/%d/fd" % pid)))
    return out

threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in threads: t.start()
samples, start = [], time.time()
while time.time() < deadline:
    samples.append((round(time.time() - start, 1), sample()))
    time.sleep(1)
for t in threads: t.join()
time.sleep(2)  # let the last deletions reach the watch before the closing sample
samples.append((round(time.time() - start, 1), sample()))
for k, v in counts.items(): print("churn_%s %d" % (k, v))
for e in first_errors: print("churn_error_example %s" % e, file=sys.stderr)
print("samples " + json.dumps(samples))
sys.exit(1 if counts["errors"] else 0)
