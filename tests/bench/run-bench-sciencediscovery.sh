#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Issue 26's speed targets for the ScienceDiscovery dialect (docs/api.md section 15), measured in
# one run against one daemon started by hand (no systemd, AllowUnscoped=yes) with both dialects
# on two loopback listeners:
#   1. POST /execute of python `pass` signed and shaped as their API server sends it, next to the
#      same run through our own API (the floor), interleaved in batches; the ratio of each
#      batch's medians (theirs over ours), reported as median and quartiles: target <= 1.05.
#   2. Their managed shell path: POST /shell-executions of `true`, then GET
#      /shell-executions/{id} every 200 ms as their API polls, until "completed"; next to the same
#      code through their synchronous POST /execute-shell. What the managed path adds (submit to
#      completed minus the synchronous run), median and quartiles: target <= one poll (200 ms).
# Prints progress on stderr and one line "BENCH-RESULT {json}" on stdout (bench_result.py); exits 0
# when it measured (whether the targets hold is in that line), 2 when it could not measure.
# Usage: run-bench-sciencediscovery.sh BUILDDIR [REQUESTS] (default 200; BENCH_SMOKE=1: 20).
# BENCH_USER: start the daemon as this user instead of root (root becomes the service user).
set -euo pipefail
build=$(cd "${1:?usage: run-bench-sciencediscovery.sh BUILDDIR [REQUESTS]}" && pwd)
n=${2:-200}
[ -n "${BENCH_SMOKE:-}" ] && n=20
tmp=$(mktemp -d /tmp/sr-bench-sd.XXXXXX)
chmod 0755 "$tmp"   # a root-started daemon becomes its sandbox user, which must reach it
pid=
cleanup() {
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
        rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/creds" "$tmp/state" "$tmp/run"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/creds/api-token"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/creds/signing-key"
cat >"$tmp/runner.conf" <<CONF
[Environments]
Bootstrap=
[Runner]
IdleExitSec=0
LogLevel=warning
MaxConnectionsPerClient=64
[Execution]
AllowUnscoped=yes
CONF
runas=()
if [ -n "${BENCH_USER:-}" ]; then
        chown -R "$(id -u "$BENCH_USER"):$(id -g "$BENCH_USER")" "$tmp/state" "$tmp/run" "$tmp/creds"
        runas=(setpriv --reuid="$(id -u "$BENCH_USER")" --regid="$(id -g "$BENCH_USER")" --clear-groups)
fi
pick_port() {
        /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port=$(pick_port)
sd_port=$(pick_port)
env -i PATH=/usr/bin:/bin CREDENTIALS_DIRECTORY="$tmp/creds" STATE_DIRECTORY="$tmp/state" RUNTIME_DIRECTORY="$tmp/run" \
        "${runas[@]}" "$build/src/sandbox-runnerd" --listen "127.0.0.1:$port" \
        --listen "sciencediscovery=127.0.0.1:$sd_port" --config "$tmp/runner.conf" --log-target console \
        2>"$tmp/daemon.log" &
pid=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$sd_port/health" 2>/dev/null && break; sleep 0.1; done

rc=0
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) \
/usr/bin/python3 - "$port" "$sd_port" "$tmp/creds/api-token" "$tmp/creds/signing-key" "$n" <<'PY' || rc=$?
import hashlib, hmac, http.client, json, os, statistics, sys, time, uuid

sys.path.insert(0, os.environ["BENCH_DIR"])
import bench_result     # noqa: E402 (the common BENCH-RESULT line)

port, sd_port, token_file, key_file, n = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
token = open(token_file).read().strip()
key = open(key_file).read().strip().encode()
BATCH = 10              # runs of each side per batch, alternating
POLL = 0.200            # their API's poll interval (notes §4)


class Conn:
    """One keep-alive connection, reopened if the daemon closes it."""
    def __init__(self, p):
        self.p, self.c = p, None

    def req(self, method, path, body=b"", headers=None):
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.p, timeout=60)
            try:
                self.c.request(method, path, body=body, headers=headers or {})
                r = self.c.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = None
                if attempt:
                    raise


ours, theirs = Conn(port), Conn(sd_port)


def die(msg):
    print("cannot measure: " + msg, file=sys.stderr)
    sys.exit(2)


def ours_execute(code):
    body = json.dumps({"executionId": "b-" + uuid.uuid4().hex[:20], "workspaceId": "bench-ours",
                       "language": "python", "code": code}).encode()
    ts = str(int(time.time()))
    s = b"v1\n" + ts.encode() + b"\nPOST\n/execute\n" + hashlib.sha256(body).hexdigest().encode()
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/json", "X-Sandbox-Timestamp": ts,
         "X-Sandbox-Signature": "v1=" + hmac.new(key, s, hashlib.sha256).hexdigest()}
    return ours.req("POST", "/execute", body, h)


def their_body(code, **kw):
    b = {"executionId": str(uuid.uuid4()), "agentId": "main", "code": code, "kernelMode": "ephemeral",
         "executionTimeoutMs": 0, "maxOutputBytes": 1073741824, "maxWorkspaceBytes": 10737418240,
         "kernelIdleTimeoutMs": 0, "workspaceRoot": "/unused", "runnerWorkspaceKey": "bench-theirs",
         "permissionEpoch": {"id": "e1", "sessionId": "bench-session", "createdAt": "2026-12-03T00:00:00.000Z",
                             "reason": "bench", "environmentRevisionId": "r1",
                             "mounts": [{"source": "workspace", "mode": "read-write"}], "secretRefs": [],
                             "networkPolicy": "none"}}
    b.update(kw)
    return b


def their_post(path, b, conn=theirs):
    body = json.dumps(b).encode()
    ts = str(int(time.time() * 1000))
    sig = hmac.new(token.encode(), ts.encode() + b"\n" + hashlib.sha256(body).hexdigest().encode(),
                   hashlib.sha256).hexdigest()
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
         "x-science-execution-timestamp": ts, "x-science-execution-signature": sig}
    return conn.req("POST", path, body, h)


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    st, body = fn(*a, **kw)
    dt = time.perf_counter() - t0
    if st not in (200, 202):
        die("unexpected %d: %s" % (st, body[:300]))
    return dt, body


def quartiles(v):
    v = sorted(v)
    return {"median": v[len(v) // 2], "p25": v[len(v) // 4], "p75": v[min(len(v) - 1, (len(v) * 3) // 4)]}


# Warm-up: both paths, a few runs each (keepers, page cache, the snapshot store's caches).
for _ in range(5):
    timed(ours_execute, "pass")
    timed(their_post, "/execute", their_body("pass", language="python"))

# 1. /execute: alternating batches.
n_batches = max(2, (n + BATCH - 1) // BATCH)
lat_ours, lat_theirs, ratios = [], [], []
for b in range(n_batches):
    o, t = [], []
    for i in range(BATCH):
        # Alternate which side goes first inside the batch, so neither always follows the other.
        if i % 2:
            o.append(timed(ours_execute, "pass")[0])
            t.append(timed(their_post, "/execute", their_body("pass", language="python"))[0])
        else:
            t.append(timed(their_post, "/execute", their_body("pass", language="python"))[0])
            o.append(timed(ours_execute, "pass")[0])
    lat_ours += o
    lat_theirs += t
    ratios.append(statistics.median(t) / statistics.median(o))
    print("batch %d/%d: ours %.2f ms, theirs %.2f ms, ratio %.3f" %
          (b + 1, n_batches, statistics.median(o) * 1e3, statistics.median(t) * 1e3, ratios[-1]), file=sys.stderr)
ratio = quartiles(ratios)

# 2. The managed shell path, polled every 200 ms, next to the synchronous run of the same code.
n_managed = max(5, n // 10)
poll = Conn(sd_port)
sync, managed, added, polls = [], [], [], []
for i in range(n_managed):
    dt, _ = timed(their_post, "/execute-shell", their_body("true"))
    sync.append(dt)
    b = their_body("true")
    t0 = time.perf_counter()
    st, body = their_post("/shell-executions", b)
    if st != 202:
        die("POST /shell-executions: %d %s" % (st, body[:300]))
    k = 0
    while True:
        # Their API polls on a fixed period from the submit.
        k += 1
        time.sleep(max(0.0, t0 + k * POLL - time.perf_counter()))
        st, body = poll.req("GET", "/shell-executions/%s?sessionId=bench-session&agentId=main" % b["executionId"],
                            headers={"Authorization": "Bearer " + token})
        state = json.loads(body).get("state") if st == 200 else None
        if state in ("completed", "failed", "cancelled", "unknown"):
            break
        if k > 100:
            die("managed run not done after %d polls: %s" % (k, body[:300]))
    if state != "completed":
        die("managed run ended %s: %s" % (state, body[:300]))
    managed.append(time.perf_counter() - t0)
    added.append(managed[-1] - statistics.median(sync))
    polls.append(k)
    print("managed %d/%d: %.1f ms after %d polls (synchronous run %.1f ms)" %
          (i + 1, n_managed, managed[-1] * 1e3, k, sync[-1] * 1e3), file=sys.stderr)
added_q = quartiles([a * 1e3 for a in added])

ok_ratio = ratio["median"] <= 1.05
ok_managed = added_q["median"] <= POLL * 1e3
results = [
    bench_result.result("sciencediscovery", "execute-theirs-over-ours",
                        statistics.median(lat_theirs) / statistics.median(lat_ours),
                        statistics.median(lat_ours) * 1e3, "ms", batch_values=ratios),
    bench_result.result("sciencediscovery", "managed-poll-added", statistics.median(added) * 1e3,
                        statistics.median(sync) * 1e3, "ms", batch_values=[a * 1e3 for a in added]),
]
bench_result.emit("sciencediscovery", {"requests": len(lat_theirs), "batch": BATCH, "batches": n_batches,
                                       "managed": n_managed, "pollMs": POLL * 1e3}, results)
print("targets: execute %s, managed %s" % ("met" if ok_ratio else "NOT met", "met" if ok_managed else "NOT met"),
      file=sys.stderr)
sys.exit(0)     # measured: whether the targets hold is in the line, for a person or run-all.sh
PY
if [ "$rc" -ge 2 ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "the benchmark could not measure; daemon log:" >&2
        tail -20 "$tmp/daemon.log" >&2
        [ "$rc" -ge 2 ] || rc=2
fi
exit "$rc"
