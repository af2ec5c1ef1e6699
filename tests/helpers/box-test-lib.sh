#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# box-test-lib.sh: what the private-systemd integration tests (tests/integration/systemd-*.sh)
# share.  Sourced, never run; it sources tests/helpers/systemd-box.sh, whose safety rules hold
# here too: the only way to boot systemd is box_start, every box a test starts is stopped by
# the EXIT trap that box_test_init sets, only processes the test started are ended (by pid),
# and all traffic stays on the box's loopback.  A test looks like:
#
#   set -u
#   set -o pipefail
#   # shellcheck source=SCRIPTDIR/../helpers/box-test-lib.sh
#   source "$(dirname "${BASH_SOURCE[0]}")/../helpers/box-test-lib.sh"
#   box_test_require_root                   # TAP skip (exit 77) unless root
#   BUILD=${1:-${MESON_BUILD_ROOT:-}}
#   tap_plan 12
#   box_test_init NAME                      # WORK, BOX, STAGE, host snapshot, traps
#   timed T_INSTALL t "meson install ..." step_install || broken="install failed"
#   timed T_BOOT t "private systemd boots to running" step_boot || broken=${broken:-"..."}
#   ...
#   stop_box_and_check_host                 # stop the box (T_STOP), the four host checks
#   tap_finish                              # last line: the script's exit status
#
# TAP
#   tap_plan N            print the plan; PLAN=N, n (tests run), failed, broken
#   t DESC FUNC [ARGS]    one test: FUNC's output becomes TAP comments; when $broken is set the
#                         test is reported "not ok ... # not run: $broken" and FUNC not called.
#                         FUNC runs in this shell: it may set variables for later steps
#   ok/nok DESC, diag (stdin to comments), note TEXT, since T0 (seconds since $EPOCHREALTIME
#   T0), timed VAR CMD... (run CMD, VAR = its seconds), tap_finish (counts against the plan;
#   its status is the result)
#
# Host snapshot and host checks
#   box_test_init NAME    WORK=/tmp/sr-NAME.*, BOX=$WORK/box, STAGE=$WORK/stage, a canary
#                         /tmp/sr-NAME-canary.* (the box must not touch the host's /tmp), the
#                         host's mount points; EXIT trap box_test_cleanup (ends $BG_PID if a
#                         test set it to a background job of its own, stops the box, removes
#                         WORK and the canary)
#   box_test_stop         keep the box's cgroup list, box_stop (time in T_STOP), clear broken
#                         (the host checks run even when earlier steps failed)
#   stop_box_and_check_host   box_test_stop, then TAP: canary intact and box gone, no process
#                         in the box's pid namespace, no new mount of ours, no cgroup of the
#                         box.  The steps step_host_canary, step_host_no_processes,
#                         step_host_no_mounts and step_host_no_cgroups also serve one by one
#
# Staging install of the build dir
#   stage_install BIN...  check BUILD and that the binaries BIN (src/sandbox-runnerd, ...) are
#                         built, meson install into STAGE; sets BUILD_OPTS, PREFIX, LIBEXECDIR, CONFDIR,
#                         SERVICE_USER, POLKIT_MODE, all from the build's configuration (a test never
#                         assumes a prefix: the package's is /usr, a plain build's /usr/local).
#                         opt NAME: a meson option of the build; opt_dir NAME: a directory option
#                         made absolute (under PREFIX when relative)
#   stage_path NAME [FIND-TESTS]   the installed path (as seen in the box) of a staged file
#   stage_check_units     sandbox-runner.{socket,service,slice} are staged
#   stage_check_polkit_rule        the rule is installed where polkitd reads it (RULEFILE)
#
# Box boot and provisioning
#   bx CMD...             run CMD in the box (box_run)
#   step_boot             box_boot (box_start, BOX_PIDNS, box_wait) and box_boot_info
#   box_provision         box_provision_base (box_install, sysusers, tmpfiles), catalog,
#                         daemon-reload, the service user and /etc/credstore, box_secrets
#                         (random TOKEN and SIGNING_KEY into /etc/credstore)
#   journal_has EXPR      the service's journal (JSON lines as L) satisfies EXPR, with retries
#   scope_units, stray_processes   sandbox-runner-x-* units; the service user's processes
#                         other than the daemon and its (at most 2) idle keepers
#
# The signed HTTP client inside the box
#   box_install_client    TOKEN and SIGNING_KEY to /root/sr-token and /root/sr-key, the python3
#                         client to /root/sr-client.py (request timeout BOX_CLIENT_TIMEOUT, 120 s)
#   box_client ARGS       run it: health | get PATH | post PATH BODY-JSON (signed, API.md v1) |
#                         bench N ID-PREFIX [PAUSE-MS]; prints {"http", "elapsedMs", "body"} (bench: its stats)
#   client ARGS           the same into RES; r EXPR / rt EXPR: jprint / jtest over RES
#   health                GET /health into HEALTH; restart_until EXPR: restart the service until
#                         its /health matches EXPR
#
# JSON on the host side (python3, not jq): jtest EXPR [ARG], jprint EXPR [ARG] over one document
# d (ARG as a); jlines EXPR over JSON lines as the list L.

BOX_TEST_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/systemd-box.sh
source "$BOX_TEST_LIB_DIR/systemd-box.sh"

# shellcheck disable=SC2034  # for the tests' timing notes
T_START=$EPOCHREALTIME
SCOPE_PREFIX=sandbox-runner-x-
RULE=50-sandbox-runner.rules
RULESDIR=/usr/share/polkit-1/rules.d          # polkitd reads only this and /etc/polkit-1/rules.d

box_test_require_root() {
        if [[ $EUID -ne 0 ]]; then
                echo "1..0 # SKIP needs root (boots a private systemd)"
                exit 77
        fi
}

# -----------------------------------------------------------------------------------------
# TAP

tap_plan() {
        PLAN=$1
        echo "1..$PLAN"
        n=0
        failed=0
        broken=            # set when a step that later tests depend on failed
}

ok()   { n=$((n + 1)); echo "ok $n - $*"; }
nok()  { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
diag() { sed -e 's/^/# /'; }
note() { echo "# $*"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# timed VAR CMD [ARGS...]: run CMD in this shell; VAR = its wall-clock seconds; CMD's status.
timed() {
        local timed_var=$1 timed_t0=$EPOCHREALTIME timed_rc
        shift
        "$@"
        timed_rc=$?
        printf -v "$timed_var" '%s' "$(since "$timed_t0")"
        return $timed_rc
}

# t DESC FUNC [ARGS...]: one TAP test; FUNC prints its diagnostics on stdout/stderr.
t() {
        local desc=$1 out rc
        shift
        if [[ -n "$broken" ]]; then
                nok "$desc # not run: $broken"
                return 1
        fi
        # not in a subshell: steps set variables for later ones
        "$@" >"$WORK/step.out" 2>&1
        rc=$?
        out=$(<"$WORK/step.out")
        if (( rc == 0 )); then
                ok "$desc"
        else
                nok "$desc"
        fi
        [[ -n "$out" ]] && printf '%s\n' "$out" | diag
        return $rc
}

tap_finish() {
        if (( n != PLAN )); then
                echo "# planned $PLAN tests, ran $n"
                failed=$((failed + 1))
        fi
        (( failed == 0 ))
}

# -----------------------------------------------------------------------------------------
# Work directory, host snapshot, clean-up

box_test_init() {
        local name=$1
        WORK=$(mktemp -d "/tmp/sr-$name.XXXXXX") || { echo "Bail out! no work directory"; exit 1; }
        BOX=$WORK/box
        STAGE=$WORK/stage
        BOX_PIDNS=
        BG_PID=
        CANARY=$(mktemp "/tmp/sr-$name-canary.XXXXXX")
        echo "sandbox-runner $name test canary $$" >"$CANARY"
        cp "$CANARY" "$WORK/canary.expected"
        awk '{ print $5 }' /proc/self/mountinfo | sort >"$WORK/mounts.before"
        trap box_test_cleanup EXIT
        trap 'exit 130' INT TERM HUP
}

box_test_cleanup() {
        if [[ -n "${BG_PID:-}" ]]; then
                kill "$BG_PID" 2>/dev/null
                wait "$BG_PID" 2>/dev/null
        fi
        box_stop "$BOX" 2>/dev/null
        if grep -qF " $WORK/" /proc/self/mountinfo; then
                echo "# mounts left below $WORK; not removing it" >&2
        else
                rm -rf --one-file-system "$WORK"
        fi
        rm -f "$CANARY"
}

# Stop the box; what follows checks that the host is as it was.
box_test_stop() {
        cp "$BOX/cgroups" "$WORK/box-cgroups" 2>/dev/null || : >"$WORK/box-cgroups"
        timed T_STOP box_stop "$BOX"
        broken=
}

step_host_canary() {
        [[ -f "$CANARY" ]] || { echo "canary $CANARY is gone: the box emptied the host's /tmp"; return 1; }
        cmp -s "$CANARY" "$WORK/canary.expected" || { echo "canary changed"; return 1; }
        ! box_pid1 "$BOX" >/dev/null || { echo "box PID 1 still running"; return 1; }
}

# The kernel tears a pid namespace down after its PID 1 is gone: what was killed with it may be a
# zombie for a moment more (seen with the load average at 7). Wait up to 10 s for the namespace to
# empty; a process that outlives that is a leak.
step_host_no_processes() {
        [[ -n "$BOX_PIDNS" ]] || { echo "box never ran"; return 0; }
        local p i left=()
        for i in $(seq 100); do
                left=()
                for p in /proc/[0-9]*; do
                        [[ "$(readlink "$p/ns/pid" 2>/dev/null)" == "$BOX_PIDNS" ]] && left+=("${p#/proc/}")
                done
                (( ${#left[@]} == 0 )) && { (( i == 1 )) || echo "the box's pid namespace emptied after ~$(( (i - 1) * 100 )) ms"; return 0; }
                sleep 0.1
        done
        echo "processes of the box still running 10 s after it stopped: ${left[*]}"
        ps -o pid,stat,cmd -p "${left[*]}"
        return 1
}

step_host_no_mounts() {
        local extra
        extra=$(awk '{ print $5 }' /proc/self/mountinfo | sort | comm -13 "$WORK/mounts.before" -)
        [[ -z "$extra" ]] && return 0
        echo "new mounts on the host since the start: $extra"
        # Only fail for what can be ours: other processes on the machine may mount too.
        ! grep -qE "^$WORK/|^/(etc|usr|var|run|tmp|var/tmp|dev|dev/shm|proc|sys|sys/fs/cgroup)(/|$)" <<<"$extra"
}

step_host_no_cgroups() {
        local cg left=()
        while IFS= read -r cg; do
                [[ -n "$cg" && -e "$cg" ]] && left+=("$cg")
        done <"$WORK/box-cgroups"
        (( ${#left[@]} == 0 )) || { echo "cgroups left: ${left[*]}"; return 1; }
        echo "$(wc -l <"$WORK/box-cgroups") box cgroups removed"
}

# Stop the box, then the four TAP tests that the host is as it was.
stop_box_and_check_host() {
        box_test_stop
        t "box stopped; host /tmp canary intact" step_host_canary
        t "no process of the box left" step_host_no_processes
        t "no mount left on the host" step_host_no_mounts
        t "no cgroup of the box left on the host" step_host_no_cgroups
}

# -----------------------------------------------------------------------------------------
# JSON with python3 (the set-up installs it; not jq), on the host side.

PY=$(command -v /usr/bin/python3 || command -v python3)
# jtest EXPR [ARG]: stdin is one JSON document, bound to d (ARG to a); true if EXPR is
jtest() {
        "$PY" -c 'import json, sys
a = sys.argv[2] if len(sys.argv) > 2 else None
d = json.load(sys.stdin)
sys.exit(0 if eval(sys.argv[1]) else 1)' "$@" 2>/dev/null
}
# jprint EXPR [ARG]: print EXPR over the JSON document d
jprint() {
        "$PY" -c 'import json, sys
a = sys.argv[2] if len(sys.argv) > 2 else None
d = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$@"
}
# jlines EXPR: stdin is JSON lines (journalctl -o json), bound to the list L
jlines() {
        "$PY" -c 'import json, sys
L = [json.loads(l) for l in sys.stdin if l.strip()]
r = eval(sys.argv[1])
if isinstance(r, str):
    print(r)
sys.exit(0 if r else 1)' "$@" 2>/dev/null
}

# -----------------------------------------------------------------------------------------
# Staging install of the build dir

BUILD_OPTS=
opt() { jprint 'next((o["value"] for o in d if o["name"] == a), "")' "$1" <<<"$BUILD_OPTS"; }
opt_dir() {
        local d
        d=$(opt "$1") || return 1
        [[ -n "$d" ]] || { echo "no meson option $1" >&2; return 1; }
        [[ "$d" == /* ]] || d=$(opt prefix)/$d
        printf '%s\n' "$d"
}

# stage_install BIN...: BIN, paths relative to BUILD, must be built (src/sandbox-runnerd, ...).
stage_install() {
        local bin
        [[ -n "$BUILD" && -d "$BUILD" ]] || { echo "no build dir (argument or MESON_BUILD_ROOT)"; return 1; }
        BUILD=$(cd "$BUILD" && pwd)
        for bin in "$@"; do
                [[ -x "$BUILD/$bin" ]] || { echo "$BUILD/$bin not built"; return 1; }
        done
        BUILD_OPTS=$(meson introspect "$BUILD" --buildoptions) || return 1
        DESTDIR=$STAGE meson install -C "$BUILD" --no-rebuild --quiet || return 1

        PREFIX=$(opt prefix)
        # shellcheck disable=SC2034  # for the tests
        LIBEXECDIR=$(opt_dir libexecdir) || return 1
        # shellcheck disable=SC2034  # for the tests
        CONFDIR=$(opt_dir sysconfdir)/sandbox-runner || return 1
        SERVICE_USER=$(opt service-user)
        POLKIT_MODE=$(opt polkit-transient-scopes)
}

# stage_path NAME [FIND-TESTS...]: the path, as installed (in the box), of the first staged
# file NAME; fails if there is none.
stage_path() {
        local name=$1 f
        shift
        f=$(cd "$STAGE" && find . -name "$name" "$@" | head -n1)
        [[ -n "$f" ]] || return 1
        printf '%s\n' "${f#.}"
}

stage_check_units() {
        local u
        for u in sandbox-runner.socket sandbox-runner.service sandbox-runner.slice; do
                stage_path "$u" -path '*/systemd/system/*' >/dev/null || { echo "$u not installed"; return 1; }
        done
}

# The polkit rule goes to -Dpolkitrulesdir, by default polkit's own datadir (polkit-gobject-1.pc)
# whatever the prefix: a build for /usr/local installs it where polkitd reads it
# (/usr/share/polkit-1/rules.d or /etc/polkit-1/rules.d). That is checked here, not repaired (a
# rule elsewhere made every execution fail with "Interactive authentication required").  Sets
# RULEFILE.
stage_check_polkit_rule() {
        local f
        f=$(stage_path "$RULE" -type f) ||
                { echo "$RULE not installed (polkit-transient-scopes=$POLKIT_MODE)"; return 1; }
        if [[ "$f" != "$RULESDIR/$RULE" && "$f" != "/etc/polkit-1/rules.d/$RULE" ]]; then
                echo "polkit rule installed as $f, which polkitd does not read (prefix $PREFIX)"
                return 1
        fi
        # shellcheck disable=SC2034  # for the tests
        RULEFILE=$f
}

# -----------------------------------------------------------------------------------------
# Box boot and provisioning

bx() { box_run "$BOX" "$@"; }

# Start the box (its pid namespace in BOX_PIDNS, for step_host_no_processes, as soon as its
# PID 1 runs) and wait until it has booted.
box_boot() {
        local pid1
        box_start "$BOX" >/dev/null || return 1
        if pid1=$(box_pid1 "$BOX"); then
                BOX_PIDNS=$(readlink "/proc/$pid1/ns/pid")
        fi
        box_wait "$BOX" 60
}

box_boot_info() { echo "box PID 1 = $(box_pid1 "$BOX"), state: $(bx systemctl is-system-running)"; }

step_boot() {
        box_boot || return 1
        box_boot_info
}

# Copy the staged tree in, create the service user and the tmpfiles. The daemons of these suites
# build no base environment (the environments suite does, and says so): a drop-in of the lowest
# order, which the tests' own drop-ins and an environments test (BOX_BOOTSTRAP=yes) override.
box_provision_base() {
        box_install "$BOX" "$STAGE" || return 1
        bx systemd-sysusers || return 1
        bx systemd-tmpfiles --create sandbox-runner.conf || return 1
        if [ "${BOX_BOOTSTRAP:-}" != yes ]; then
                printf '[Environments]\nBootstrap=\n' |
                        bx sh -c "mkdir -p '$CONFDIR/runner.conf.d' && cat >'$CONFDIR/runner.conf.d/05-test-no-bootstrap.conf'"
        fi
}

# Secrets, where the unit's LoadCredential= lines look for them.
box_secrets() {
        TOKEN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
        SIGNING_KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
        printf '%s' "$TOKEN" | bx sh -c 'umask 077; cat >/etc/credstore/sandbox-runner.api-token' || return 1
        printf '%s' "$SIGNING_KEY" | bx sh -c 'umask 077; cat >/etc/credstore/sandbox-runner.signing-key'
}

box_provision() {
        box_provision_base || return 1
        bx journalctl --update-catalog || return 1
        bx systemctl daemon-reload || return 1
        bx getent passwd "$SERVICE_USER" || { echo "user $SERVICE_USER not created"; return 1; }
        bx test -d /etc/credstore || { echo "/etc/credstore not created by tmpfiles"; return 1; }
        box_secrets
}

# journal_has PY-EXPR over L: retry a little, journald may lag behind.
journal_has() {
        local i
        for i in $(seq 1 20); do
                bx journalctl -u sandbox-runner.service -o json --no-pager 2>/dev/null |
                        jlines "$1" >/dev/null && return 0
                sleep 0.25
        done
        return 1
}

scope_units() {
        bx systemctl list-units --all --no-legend --plain "${SCOPE_PREFIX}*" | awk 'NF { print $1 }'
}

# Processes of the service user other than the daemon itself, its idle keepers and the sandboxes
# built ahead of runs. Idle keepers (src/keeper/): at most 2, children of the daemon in its own
# cgroup (not a scope), with no children of their own. Sandboxes built ahead ([Execution]
# Prebuilt=, src/execution/prebuilt.c; more after a burst with PrebuiltBurst=): each a keeper child
# of the daemon whose every descendant is the sandbox's bwrap (its last argument the exec helper,
# /proc/self/fd/11), that helper waiting for its run, or the bind's child the keeper prepared (a
# fork of the keeper named keeper-bind, src/keeper/keeper-bind.c).
# Anything else is printed as "PID ARGS".
stray_processes() {
        local main
        main=$(bx systemctl show -p MainPID --value sandbox-runner.service)
        bx sh -c '
                main=$1; user=$2
                desc() { local k; for k in $(ps --ppid "$1" -o pid=); do echo "$k"; desc "$k"; done; }
                prebuilt() {
                        local d a n=0
                        for d in $(desc "$1"); do
                                a=$(ps -o args= -p "$d") || continue
                                case "$a" in
                                /proc/self/fd/11|*bwrap\ *" -- /proc/self/fd/11") n=$((n + 1)) ;;
                                "sandbox-runner-keeper "*)
                                        [ "$(ps -o comm= -p "$d")" = keeper-bind ] || return 1 ;;
                                *) return 1 ;;
                                esac
                        done
                        [ "$n" -gt 0 ]
                }
                strays() {
                        local skip=" $main " idle=0 pid args
                        for pid in $(ps --ppid "$main" -o pid=); do
                                args=$(ps -o args= -p "$pid") || continue
                                [ "${args%% *}" = sandbox-runner-keeper ] || continue
                                if [ "$(cat /proc/$pid/cgroup 2>/dev/null)" = "$(cat /proc/$main/cgroup)" ] &&
                                   [ -z "$(ps --ppid "$pid" -o pid=)" ] && [ "$idle" -lt 2 ]; then
                                        idle=$((idle + 1)); skip="$skip$pid "
                                elif prebuilt "$pid"; then
                                        skip="$skip$pid $(desc "$pid" | tr "\n" " ")"
                                fi
                        done
                        ps -u "$user" -o pid=,args= | while read -r pid args; do
                                case "$skip" in *" $pid "*) continue ;; esac
                                echo "$pid $args"
                        done
                }
                # A sandbox built ahead may be half built at the first look (the pool builds in the
                # quiet after runs): look again before calling anything a stray.
                for try in 1 2 3 4 5; do
                        left=$(strays)
                        [ -z "$left" ] && exit 0
                        sleep 0.5
                done
                echo "$left"' sh "$main" "$SERVICE_USER"
}

# -----------------------------------------------------------------------------------------
# The client, run inside the box with the box's python3: bearer token and v1 signatures
# (API.md, Authentication) from the secrets of box_secrets; it talks to 127.0.0.1 only.

box_install_client() {
        printf '%s' "$TOKEN" | bx sh -c 'umask 077; cat >/root/sr-token' || return 1
        printf '%s' "$SIGNING_KEY" | bx sh -c 'umask 077; cat >/root/sr-key' || return 1
        { printf 'TIMEOUT = %s\n' "${BOX_CLIENT_TIMEOUT:-120}"; cat <<'EOF'; } | bx sh -c 'cat >/root/sr-client.py'
import hashlib, hmac, http.client, json, sys, time

TOKEN = open("/root/sr-token").read()
KEY = open("/root/sr-key", "rb").read()

def request(method, path, body=None, signed=False, timeout=TIMEOUT):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": "Bearer " + TOKEN}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if signed:
        ts = str(int(time.time()))
        s = "v1\n%s\n%s\n%s\n%s" % (ts, method, path, hashlib.sha256(data or b"").hexdigest())
        headers["X-Sandbox-Timestamp"] = ts
        headers["X-Sandbox-Signature"] = "v1=" + hmac.new(KEY, s.encode(), hashlib.sha256).hexdigest()
    c = http.client.HTTPConnection("127.0.0.1", 4311, timeout=timeout)
    t0 = time.monotonic()
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    raw = r.read()
    dt = time.monotonic() - t0
    c.close()
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = {"_raw": raw.decode("utf-8", "replace")}
    return r.status, doc, dt

cmd = sys.argv[1]
if cmd == "health":
    st, doc, dt = request("GET", "/health")
elif cmd == "get":                      # get PATH
    st, doc, dt = request("GET", sys.argv[2])
elif cmd == "post":                     # post PATH BODY-JSON (signed)
    st, doc, dt = request("POST", sys.argv[2], json.loads(sys.argv[3]), signed=True)
elif cmd == "bench":                    # bench N ID-PREFIX [PAUSE-MS]: N sequential `true` runs
    n, prefix = int(sys.argv[2]), sys.argv[3]
    pause = int(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 0
    lat, bad, paths = [], [], []
    for i in range(-1, n):              # -1: one warm-up run, not counted
        if pause and i >= 0:
            time.sleep(pause)           # the daemon idles: sandboxes are built ahead meanwhile
        body = {"executionId": "%s-%d" % (prefix, i + 1), "workspaceId": "bench",
                "command": "true", "timeoutMs": 30000}
        st, doc, dt = request("POST", "/execute-shell", body, signed=True)
        if st != 200 or doc.get("status") != "exited" or doc.get("exitCode") != 0:
            bad.append({"run": i + 1, "http": st, "status": doc.get("status"), "exitCode": doc.get("exitCode"),
                        "stderr": (doc.get("stderr") or "")[:120], "error": doc.get("error")})
        if i >= 0:
            lat.append(dt * 1000)
            paths.append(doc.get("sandbox"))   # "prebuilt" or "cold"
        enforced = doc.get("limits", {}).get("enforcedBy")
    print(json.dumps({"latMs": lat, "sandbox": paths, "nbad": len(bad), "bad": bad[:2], "enforcedBy": enforced}))
    sys.exit(0)
else:
    sys.exit("usage: health | get PATH | post PATH BODY | bench N PREFIX [PAUSE-MS]")
print(json.dumps({"http": st, "elapsedMs": round(dt * 1000, 1), "body": doc}))
EOF
}

box_client() { bx /usr/bin/python3 /root/sr-client.py "$@"; }

# client ARGS...: box_client into RES (the client's JSON: http, elapsedMs, body)
RES=
client() { RES=$(box_client "$@") || { echo "client failed: $RES"; return 1; }; }
r() { jprint "$@" <<<"$RES"; }
rt() { jtest "$@" <<<"$RES"; }

# health: GET /health through the client into HEALTH
HEALTH=
health() { HEALTH=$(box_client health); }

# restart_until EXPR: restart the daemon until its /health matches EXPR (polkitd reloads its
# rules asynchronously, on inotify)
restart_until() {
        local _
        for _ in $(seq 1 20); do
                bx systemctl restart sandbox-runner.service || return 1
                health && jtest "$1" <<<"$HEALTH" && return 0
                sleep 0.25
        done
        echo "after 20 restarts /health is still: $HEALTH"
        return 1
}
