#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# sandbox-runner-bridge inside a real bwrap sandbox (DESIGN.md section 8), against a tiny test
# gateway (a Python socketserver on a unix socket that answers "GW:" and echoes what it gets), in
# two flavours: one that takes the hand-over (the default: one NUL byte carrying the client's TCP
# socket, then "GW:" and the echo on that socket) and one for --relay (a plain byte stream):
#  - the binary is static ("not a dynamic executable");
#  - exact bytes both ways with half-close, 10 MiB each way, 50 concurrent connections, handed
#    over, relayed with splice() and relayed with --no-splice; handed over, 300 connections at
#    once (nothing of the bridge's stays per connection); relayed, the 256-connection cap (the
#    257th is closed, a freed slot is reused); a missing gateway closes the connection and says so
#    once; a gateway with a full backlog gets connect() retried for up to 5 s;
#  - exit status passthrough: exit 7, SIGKILL (bwrap: 137; the bridge's own wait status: signal 9),
#    SIGABRT without a core file of the bridge, a missing command (127), usage errors (125);
#  - SIGTERM/SIGINT/SIGHUP sent to the bridge reach the workload;
#  - the bridge exits within 1 s of the workload even with an idle relay open, the gateway sees
#    every relay closed, and no bridge process is left;
#  - loopback: up already under bwrap --unshare-net; brought up when the bridge may (unshare -rn);
#    a clear error when it is down and the bridge may not (unshare -Un).
# Sandboxes run as uid 1000 with --cap-drop ALL and, when SECCOMP_EXPORT points to the built
# seccomp-export helper (meson sets it), under the "network" seccomp profile, as in production.
#
#   tests/integration/bridge.sh /path/to/sandbox-runner-bridge
#
# Output is TAP. Exit 77 (skip) only when the bridge, bwrap or /usr/bin/python3 is missing.

set -u

BRIDGE=${1:-${SANDBOX_RUNNER_BRIDGE:-}}
BWRAP=${BWRAP:-/usr/bin/bwrap}
PYTHON=/usr/bin/python3

if [[ -z "$BRIDGE" || ! -x "$BRIDGE" ]]; then
        echo "1..0 # SKIP sandbox-runner-bridge not given or not executable (pass its path as \$1)"
        exit 77
fi
if [[ ! -x "$BWRAP" || ! -x "$PYTHON" ]]; then
        echo "1..0 # SKIP $BWRAP or $PYTHON not found"
        exit 77
fi
BRIDGE=$(realpath "$BRIDGE")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bridge-test.XXXXXX") || exit 1
MARKER="bridge-test-marker-$$-$RANDOM"
GW_PID=
GW2_PID=
slow_pid=

cleanup() {
        [[ -n "$GW_PID" ]] && kill "$GW_PID" 2>/dev/null
        [[ -n "$GW2_PID" ]] && kill "$GW2_PID" 2>/dev/null
        [[ -n "$slow_pid" ]] && kill "$slow_pid" 2>/dev/null
        wait 2>/dev/null
        rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

n=0
failed=0
ok()   { n=$((n + 1)); echo "ok $n - $*"; }
nok()  { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
diag() { sed -e 's/^/# /'; }
# check DESC COND_STATUS [DIAG_FILE...]
check() {
        local desc=$1 rc=$2
        shift 2
        if (( rc == 0 )); then
                ok "$desc"
        else
                nok "$desc"
                for f in "$@"; do [[ -s "$f" ]] && diag <"$f"; done
        fi
}

# ---------------------------------------------------------------------------
# The test gateway: "GW:" on connect, then an echo until EOF, then close. Logs open/close.
cat >"$WORK/gw.py" <<'EOF'
import os, socket, socketserver, sys

LOG = sys.argv[2]
HANDOFF = sys.argv[3] == "handoff"

def log(word):
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, (word + "\n").encode())
    os.close(fd)

def take_over(conn):
    """The hand-over: exactly one NUL byte with exactly one TCP socket attached."""
    msg, fds, _, _ = socket.recv_fds(conn, 16, 4)
    if msg != b"\0" or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise OSError(f"bad hand-over: {msg!r} with {len(fds)} descriptors")
    s = socket.socket(fileno=fds[0])
    if s.family != socket.AF_INET or s.type != socket.SOCK_STREAM:
        raise OSError("the handed-over socket is not TCP")
    s.setblocking(True)
    return s

class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        try:
            if HANDOFF:
                s = take_over(self.request)
                self.request.close()
            log("open")
            s.sendall(b"GW:")
            while True:
                data = s.recv(65536)
                if not data:
                    break
                s.sendall(data)
        except OSError as e:
            log(f"error {e}")
        finally:
            s.close()
            log("close")

class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 512

Server(sys.argv[1], Handler).serve_forever()
EOF
"$PYTHON" "$WORK/gw.py" "$WORK/gw.sock" "$WORK/gw.log" handoff &
GW_PID=$!
"$PYTHON" "$WORK/gw.py" "$WORK/gw-relay.sock" "$WORK/gw-relay.log" stream &
GW2_PID=$!
for _ in $(seq 50); do [[ -S "$WORK/gw.sock" && -S "$WORK/gw-relay.sock" ]] && break; sleep 0.1; done
if [[ ! -S "$WORK/gw.sock" || ! -S "$WORK/gw-relay.sock" ]]; then
        echo "Bail out! the test gateways did not start"
        exit 1
fi

# ---------------------------------------------------------------------------
# Workloads (run with python3 -c inside the sandbox; argv[1] is the marker)
cat >"$WORK/common.py" <<'EOF'
import hashlib, os, socket, sys, threading, time
ADDR = ("127.0.0.1", 18118)

def recv_all(s):
    chunks = []
    while True:
        d = s.recv(1 << 16)
        if not d:
            return b"".join(chunks)
        chunks.append(d)

def echo(s, payload):
    """Send payload from a thread, half-close, read everything back."""
    def send():
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send)
    t.start()
    got = recv_all(s)
    t.join()
    return got

def expect(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)
EOF
wl() { cat "$WORK/common.py"; cat; }

wl >"$WORK/w-echo.py" <<'EOF'
data = b"hello\x00\xff\r\nCONNECT x:443 HTTP/1.1\r\n\r\nworld"
s = socket.create_connection(ADDR)
got = echo(s, data)
expect(got == b"GW:" + data, f"echo: got {got!r}")
sys.exit(7)
EOF

wl >"$WORK/w-bulk.py" <<'EOF'
data = os.urandom(10 * 1024 * 1024)
s = socket.create_connection(ADDR)
t0 = time.monotonic()
got = echo(s, data)
dt = time.monotonic() - t0
expect(len(got) == len(data) + 3, f"bulk: got {len(got)} bytes")
expect(hashlib.sha256(got).digest() == hashlib.sha256(b"GW:" + data).digest(), "bulk: bytes differ")
print(f"10 MiB each way in {dt:.2f} s")
EOF

wl >"$WORK/w-concurrent.py" <<'EOF'
N = 50
socks = [socket.create_connection(ADDR) for _ in range(N)]
for s in socks:                              # every relay is up before any data moves
    expect(s.recv(3) == b"GW:", "concurrent: no greeting")
payloads = [os.urandom(256 * 1024) for _ in range(N)]
results = [None] * N
def run(i):
    results[i] = echo(socks[i], payloads[i])
threads = [threading.Thread(target=run, args=(i,)) for i in range(N)]
for t in threads: t.start()
for t in threads: t.join()
bad = [i for i in range(N) if results[i] != payloads[i]]
expect(not bad, f"concurrent: {len(bad)} connections got wrong bytes")
EOF

wl >"$WORK/w-cap.py" <<'EOF'
socks = [socket.create_connection(ADDR) for _ in range(256)]
for s in socks:
    expect(s.recv(3) == b"GW:", "cap: no greeting within the cap")
extra = socket.create_connection(ADDR)
extra.settimeout(5)
try:
    got = extra.recv(3)
except ConnectionResetError:
    got = b""
expect(got == b"", f"cap: connection 257 got {got!r}, expected to be closed")
socks.pop().close()
time.sleep(0.2)
again = socket.create_connection(ADDR)
again.settimeout(5)
expect(again.recv(3) == b"GW:", "cap: a freed slot is not reused")
EOF

wl >"$WORK/w-many.py" <<'EOF'
socks = [socket.create_connection(ADDR) for _ in range(300)]
for s in socks:
    s.settimeout(10)
    expect(s.recv(3) == b"GW:", "many: no greeting")
for i, s in enumerate(socks):
    s.sendall(b"%d" % i)
    expect(s.recv(16) == b"%d" % i, "many: wrong echo")
EOF

wl >"$WORK/w-idle.py" <<'EOF'
s = socket.create_connection(ADDR)
expect(s.recv(3) == b"GW:", "idle: no greeting")
print(f"{time.time():.6f}", flush=True)
os._exit(0)                                  # leaves the relay open
EOF

wl >"$WORK/w-nogw.py" <<'EOF'
for _ in range(3):
    s = socket.create_connection(ADDR)
    s.settimeout(5)
    try:
        got = s.recv(3)
    except ConnectionResetError:
        got = b""
    expect(got == b"", f"no gateway: got {got!r}")
EOF

# A gateway that accepts nothing for DELAY seconds, with a backlog of 1: connect() gets EAGAIN.
cat >"$WORK/slow-gw.py" <<'EOF'
import socket, sys, threading, time
path, delay = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(1)
time.sleep(delay)
def handle(c):
    msg, fds, _, _ = socket.recv_fds(c, 16, 1)   # the hand-over
    c.close()
    c = socket.socket(fileno=fds[0])
    c.setblocking(True)
    c.sendall(b"GW:")
    while (d := c.recv(65536)):
        c.sendall(d)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
EOF

wl >"$WORK/w-backlog.py" <<'EOF'
want = sys.argv[3].encode()
socks = [socket.create_connection(ADDR) for _ in range(int(sys.argv[2]))]
for s in socks:
    s.settimeout(10)
t0 = time.monotonic()
def greeting(s):
    try:
        return s.recv(3)
    except ConnectionResetError:
        return b""
got = greeting(socks[-1])                   # the last one waited longest for the gateway
print(f"{time.monotonic() - t0:.1f}")
expect(got == want, f"backlog: the last connection got {got!r}")
if want:
    expect(all(greeting(s) == want for s in socks[:-1]), "backlog: not every connection got through")
EOF

cat >"$WORK/w-signal.py" <<'EOF'
import os, signal, sys, time
codes = {signal.SIGTERM: 3, signal.SIGINT: 4, signal.SIGHUP: 5}
for sig in codes:
    signal.signal(sig, lambda s, f: os._exit(codes[s]))
open(sys.argv[1], "w").close()               # ready
time.sleep(30)
sys.exit(1)
EOF

# Runs ARGV and prints its wait status as "exit N" or "signal N" (bash folds both into $?).
cat >"$WORK/waitstatus.py" <<'EOF'
import subprocess, sys
r = subprocess.run(sys.argv[1:]).returncode
print(f"signal {-r}" if r < 0 else f"exit {r}")
EOF

# ---------------------------------------------------------------------------
# The sandbox, shaped like the daemon's: all namespaces, uid 1000, no capabilities.
SECCOMP=()
BPF=/dev/null
if [[ -n "${SECCOMP_EXPORT:-}" && -x "$SECCOMP_EXPORT" ]] &&
   "$SECCOMP_EXPORT" network >"$WORK/network.bpf" 2>"$WORK/seccomp.err"; then
        SECCOMP=(--seccomp 9)
        BPF=$WORK/network.bpf
fi

# sandbox [BRIDGE_OPTIONS...] -- ARGV...: runs the bridge in bwrap; stdout/stderr as given.
sandbox() {
        local opts=()
        while [[ $1 != -- ]]; do opts+=("$1"); shift; done
        shift
        "$BWRAP" --unshare-all --unshare-user --die-with-parent --new-session --cap-drop ALL \
                --uid 1000 --gid 1000 \
                --ro-bind /usr /usr --symlink usr/lib64 /lib64 --symlink usr/lib /lib \
                --symlink usr/bin /bin --proc /proc --dev /dev --tmpfs /tmp \
                --bind "$WORK/${GW_SOCK:-gw.sock}" /run/sandbox-egress.sock --ro-bind "$BRIDGE" /bridge \
                "${SECCOMP[@]}" \
                -- /bridge --gateway /run/sandbox-egress.sock "${opts[@]}" -- "$@" 9<"$BPF"
}
# py SCRIPT: the argv of a workload
py() { printf '%s\0' python3 -c "$(<"$WORK/$1")" "$MARKER"; }
run_py() {     # run_py SCRIPT [BRIDGE_OPTIONS...]
        local script=$1 argv
        shift
        mapfile -d '' argv < <(py "$script")
        sandbox "$@" -- "${argv[@]}"
}

echo "1..27"
if (( ${#SECCOMP[@]} )); then
        echo "# sandboxes run under the network seccomp profile"
else
        echo "# SECCOMP_EXPORT not set: sandboxes run without a seccomp filter"
fi

# 1
ldd "$BRIDGE" >"$WORK/out" 2>&1
grep -q "not a dynamic executable" "$WORK/out"
check "ldd: not a dynamic executable" $? "$WORK/out"

# 2
run_py w-echo.py >"$WORK/out" 2>"$WORK/err"
rc=$?
(( rc == 7 ))
check "exact bytes both ways with half-close; workload exit 7 -> 7 (got $rc)" $? "$WORK/err"

# 3-8
for mode in handoff relay-splice relay-no-splice; do
        opt=()
        sock=gw-relay.sock
        case $mode in
        handoff) sock=gw.sock ;;
        relay-splice) opt=(--relay) ;;
        relay-no-splice) opt=(--relay --no-splice) ;;
        esac
        GW_SOCK=$sock run_py w-bulk.py "${opt[@]}" >"$WORK/out" 2>"$WORK/err"
        rc=$?
        [[ $rc == 0 ]] && diag <"$WORK/out"
        check "$mode: 10 MiB each way, sha256 equal" $rc "$WORK/err" "$WORK/out"
        GW_SOCK=$sock run_py w-concurrent.py "${opt[@]}" >"$WORK/out" 2>"$WORK/err"
        check "$mode: 50 concurrent connections, 256 KiB each way, exact bytes" $? "$WORK/err" "$WORK/out"
done

# 9-10
GW_SOCK=gw-relay.sock run_py w-cap.py --relay >"$WORK/out" 2>"$WORK/err"
check "relay: connection 257 is accepted and closed; a freed slot is reused" $? "$WORK/err"
run_py w-many.py >"$WORK/out" 2>"$WORK/err"
check "handoff: 300 connections at once, all handed over and served" $? "$WORK/err"

# 11-12
sandbox -- python3 -c 'import os; os.kill(os.getpid(), 9)' "$MARKER" 2>"$WORK/err"
rc=$?
(( rc == 137 ))
check "workload killed by SIGKILL: bwrap reports 137 (got $rc)" $? "$WORK/err"
sandbox -- /nonexistent/command "$MARKER" 2>"$WORK/err"
rc=$?
(( rc == 127 )) && grep -q "Failed to execute '/nonexistent/command'" "$WORK/err"
check "missing command: 127 and a message (got $rc)" $? "$WORK/err"

# 13
# Idle connection open when the workload exits: the bridge (so bwrap) must be gone within 1 s.
# Connections of earlier tests end asynchronously (their test-gateway threads see EOF late): let
# them all close before counting.
for _ in $(seq 100); do
        (( $(grep -c '^open$' "$WORK/gw.log") == $(grep -c '^close$' "$WORK/gw.log") )) && break
        sleep 0.1
done
: >"$WORK/gw.log"
run_py w-idle.py >"$WORK/out" 2>"$WORK/err"
rc=$?
t_end=$EPOCHREALTIME
t_exit=$(head -n1 "$WORK/out")
delay=$(awk -v a="$t_exit" -v b="$t_end" 'BEGIN { printf "%.3f", b - a }')
(( rc == 0 )) && awk -v d="$delay" 'BEGIN { exit !(d < 1.0) }'
check "exits ${delay}s after the workload, with an idle connection open" $? "$WORK/err"

# 14
sleep 0.3
opens=$(grep -c '^open$' "$WORK/gw.log")
closes=$(grep -c '^close$' "$WORK/gw.log")
(( opens == 1 && closes == 1 ))
check "the gateway saw the idle connection closed (opens $opens, closes $closes)" $?

# Outside bwrap, in a fresh user+network namespace where lo starts down, to see the bridge's
# own wait status and to signal it directly. unshare execs the bridge: $! is the bridge.
UNSHARE_OK=1
unshare -rn true 2>/dev/null || UNSHARE_OK=0
ns_bridge() { unshare -rn "$BRIDGE" --gateway "$WORK/gw.sock" "$@"; }
# Background jobs of a non-interactive shell start with SIGINT ignored, and the bridge passes an
# ignored signal through as ignored: the signal test gives it the default disposition back.
DFL_EXEC='import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])'

# 15
if (( UNSHARE_OK )); then
        mapfile -d '' argv < <(py w-echo.py)
        ns_bridge -- "${argv[@]}" >"$WORK/out" 2>"$WORK/err"
        rc=$?
        (( rc == 7 ))
        check "lo down, CAP_NET_ADMIN in the netns (unshare -rn): brought up, echo works (got $rc)" $? "$WORK/err"
else
        nok "unshare -rn does not work here"
fi

# 16
unshare -Un "$BRIDGE" --gateway "$WORK/gw.sock" -- true 2>"$WORK/err"
rc=$?
(( rc == 125 )) && grep -q "loopback interface 'lo' is down" "$WORK/err"
check "lo down, no capabilities (unshare -Un): 125 and a clear message (got $rc)" $? "$WORK/err"

# 17-18
st=$("$PYTHON" "$WORK/waitstatus.py" unshare -rn "$BRIDGE" --gateway "$WORK/gw.sock" -- \
        "$PYTHON" -c 'import os; os.kill(os.getpid(), 9)' "$MARKER" 2>"$WORK/err")
[[ "$st" == "signal 9" ]]
check "workload killed by SIGKILL: the bridge's wait status is signal 9 (got '$st')" $? "$WORK/err"
( cd "$WORK" && ulimit -c unlimited &&
  "$PYTHON" "$WORK/waitstatus.py" unshare -rn "$BRIDGE" --gateway "$WORK/gw.sock" -- \
        "$PYTHON" -c 'import os, resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); os.abort()' \
        "$MARKER" >"$WORK/st" 2>"$WORK/err" )
st=$(<"$WORK/st")
[[ "$st" == "signal 6" ]] && ! compgen -G "$WORK/core*" >/dev/null
check "workload aborts: the bridge's wait status is signal 6, no core file (got '$st')" $? "$WORK/err"

# 19-21
for sig in TERM INT HUP; do
        rm -f "$WORK/ready"
        "$PYTHON" -c "$DFL_EXEC" unshare -rn "$BRIDGE" --gateway "$WORK/gw.sock" -- \
                "$PYTHON" -c "$(<"$WORK/w-signal.py")" "$WORK/ready" "$MARKER" 2>"$WORK/err" &
        pid=$!
        for _ in $(seq 100); do [[ -e "$WORK/ready" ]] && break; sleep 0.05; done
        kill -s "$sig" "$pid"
        wait "$pid"
        rc=$?
        case $sig in TERM) want=3 ;; INT) want=4 ;; HUP) want=5 ;; esac
        (( rc == want ))
        check "SIG$sig sent to the bridge reaches the workload (exit $rc, want $want)" $? "$WORK/err"
done

# 22
mapfile -d '' argv < <(py w-nogw.py)
unshare -rn "$BRIDGE" --gateway "$WORK/no-such.sock" -- "${argv[@]}" 2>"$WORK/err"
rc=$?
count=$(grep -c 'Failed to connect to the egress gateway' "$WORK/err")
(( rc == 0 && count == 1 ))
check "no gateway: connections are closed, reported once (exit $rc, $count messages)" $? "$WORK/err"

# 23-24
# The gateway's backlog is full for 1.5 s: connect() is retried until it is accepted ...
"$PYTHON" "$WORK/slow-gw.py" "$WORK/slow1.sock" 1.5 &
slow_pid=$!
sleep 0.3
mapfile -d '' argv < <(py w-backlog.py)
unshare -rn "$BRIDGE" --gateway "$WORK/slow1.sock" -- "${argv[@]}" 10 GW: >"$WORK/out" 2>"$WORK/err"
check "gateway backlog full for 1.5 s: 10 connections retried until accepted" $? "$WORK/err"
kill "$slow_pid"
# ... and given up after 5 s, with a message.
"$PYTHON" "$WORK/slow-gw.py" "$WORK/slow2.sock" 1000 &
slow_pid=$!
sleep 0.3
unshare -rn "$BRIDGE" --gateway "$WORK/slow2.sock" -- "${argv[@]}" 4 "" >"$WORK/out" 2>"$WORK/err"
rc=$?
waited=$(<"$WORK/out")
(( rc == 0 )) && grep -q 'timed out' "$WORK/err" && [[ "$waited" == 4.* || "$waited" == 5.* ]]
check "gateway never accepts: connection closed after 5 s (${waited}s)" $? "$WORK/err" "$WORK/out"
kill "$slow_pid"

# 25
"$BRIDGE" -- true 2>"$WORK/err"
rc1=$?
"$BRIDGE" --gateway "$WORK/gw.sock" 2>>"$WORK/err"
rc2=$?
"$BRIDGE" --gateway "$WORK/gw.sock" --listen 127.0.0.1:http-alt -- true 2>>"$WORK/err"
rc3=$?
(( rc1 == 125 && rc2 == 125 && rc3 == 125 ))
check "usage errors exit 125 (got $rc1 $rc2 $rc3)" $? "$WORK/err"

# 26
sleep 0.2
left=()
for f in /proc/[0-9]*/cmdline; do
        p=${f#/proc/}; p=${p%/cmdline}
        [[ $p == "$$" || $p == "$BASHPID" ]] && continue
        tr '\0' ' ' 2>/dev/null <"$f" | grep -q -- "$MARKER" && left+=("$p")
done
for p in "${left[@]}"; do tr '\0' ' ' </proc/"$p"/cmdline; echo; done >"$WORK/out" 2>/dev/null
(( ${#left[@]} == 0 ))
check "no bridge or workload process left (${#left[@]})" $? "$WORK/out"

# 27
kill -0 "$GW_PID" 2>/dev/null && kill -0 "$GW2_PID" 2>/dev/null
check "the test gateways are still running" $?

exit $(( failed > 0 ))
