#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Set-up for a fresh Debian 12 machine, as root. Idempotent.
#   tests/setup.sh run    install what is missing, build, (re)start the runner on 127.0.0.1:4311
#   tests/setup.sh test   install what is missing, build, run the whole test suite
#                         (gcc build configured as the package is, ASan+UBSan build, clang build,
#                         clang libFuzzer build: tests/fuzz, briefly); fails on any skipped test
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

packages=(
        # build
        meson ninja-build pkg-config gcc clang libc6-dev
        libsystemd-dev libmicrohttpd-dev libseccomp-dev libjson-c-dev libcap-dev
        libcurl4-gnutls-dev nettle-dev libidn2-dev libhttp-parser-dev libwslay-dev scdoc
        # polkit's pkg-config file: where polkitd reads rules from (meson.build)
        libpolkit-gobject-1-dev
        # Jupyter kernels (issue 22): the daemon speaks ZMQ to them
        libzmq3-dev
        # run time
        bubblewrap systemd dbus polkitd
        # environments (DESIGN.md §14): python-base is built offline from these, r-base from R's
        python3-venv python3-numpy python3-pandas python3-scipy python3-matplotlib
        r-base-core r-cran-data.table
        # Jupyter kernels: the kernelspec python3 is the host's python3 with Debian's ipykernel, and
        # the document libraries agents use (DocsGPT's; python-pptx is not packaged in Debian 12);
        # the kernelspec ir (environment r-base) is Debian's IRkernel
        python3-ipykernel python3-docx python3-openpyxl python3-reportlab
        r-cran-irkernel
        # tests
        libcmocka-dev python3 curl iproute2 procps util-linux valgrind man-db
        etcd-server     # the fleet suite (issue 24): the members tests/helpers/etcd-cluster.py starts
        nodejs          # the fleet suite: runs s3rver, the S3 server tests/helpers/s3-server.sh starts
        python3-botocore        # the fleet suite: tests/helpers/sigv4-check.py, libcurl's SigV4 checked
        # bench-kernels.py: jupyter_server 1.23 (the unsandboxed floor); it and kernels.py: the Kernel
        # Gateway's WebSocket client (DocsGPT's)
        python3-jupyter-server python3-websocket
        # apparmor.sh: apparmor_parser's syntax check of the bwrap profile (nothing is loaded)
        apparmor
        # environments-online.py: the test CA and server certificates of its HTTPS index
        openssl
        # fuzz targets: the libFuzzer runtime of Debian 12's clang 14
        libclang-rt-14-dev
        # Debian package (tests/packaging): dpkg-buildpackage, dh and its meson/systemd/sysusers
        # helpers, lintian (the build dependencies are the build's above, plus python3)
        dpkg-dev debhelper lintian
)
# npm installs s3rver (install_s3rver); NodeSource's nodejs bundles its own and conflicts with Debian's
command -v npm >/dev/null || packages+=(npm)

die() { echo "setup.sh: $*" >&2; exit 1; }

install_packages() {
        local missing=() p
        for p in "${packages[@]}"; do
                dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
        done
        if [ ${#missing[@]} -gt 0 ]; then
                echo "Installing: ${missing[*]}"
                export DEBIAN_FRONTEND=noninteractive
                apt-get update -qq
                apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
                # etcd-server's package enables and starts a system etcd on 127.0.0.1:2379; the
                # fleet tests start members of their own on free ports, so the one this installed
                # is stopped and disabled (on a machine that had it before, nothing is touched)
                if [[ " ${missing[*]} " == *" etcd-server "* ]] && [ -d /run/systemd/system ]; then
                        systemctl disable --now etcd.service >/dev/null 2>&1 || true
                fi
        fi
}

# The fleet suite's S3 server (tests/helpers/s3-server.sh finds it here): the npm package s3rver,
# pinned, outside the tree; npm (the registry) is asked only when that version is not there yet.
s3rver_prefix=/usr/local/lib/sandbox-runner-tests
s3rver_version=3.7.1
install_s3rver() {
        local have
        have=$(node -p "require('$s3rver_prefix/node_modules/s3rver/package.json').version" 2>/dev/null) || true
        [ "$have" = "$s3rver_version" ] && return 0
        echo "Installing s3rver $s3rver_version into $s3rver_prefix"
        mkdir -p "$s3rver_prefix"
        npm install --prefix "$s3rver_prefix" --no-audit --no-fund --loglevel=error "s3rver@$s3rver_version" \
                >/dev/null || die "npm could not install s3rver $s3rver_version into $s3rver_prefix"
}

# The fleet suite's manifest checks (tests/integration/fleet-manifests.py, its helpers
# tests/helpers/k8s-validate.mjs and hcl2json.mjs find them here): the Kubernetes schemas as ajv
# validators (kubernetes-models), a YAML parser (yaml) and HashiCorp's HCL2 parser compiled to
# WebAssembly (@cdktf/hcl2json), pinned, in a prefix of their own beside s3rver's; npm (the
# registry) is asked only when one of these versions is not there yet.
manifest_tools_prefix=$s3rver_prefix/manifests
manifest_tools=(kubernetes-models@5.1.0 yaml@2.9.1 @cdktf/hcl2json@0.21.0)
install_manifest_tools() {
        local spec name have missing=0
        for spec in "${manifest_tools[@]}"; do
                name=${spec%@*}
                have=$(node -p "require('$manifest_tools_prefix/node_modules/$name/package.json').version" 2>/dev/null) || true
                [ "$have" = "${spec##*@}" ] || missing=1
        done
        [ $missing = 0 ] && return 0
        echo "Installing ${manifest_tools[*]} into $manifest_tools_prefix"
        mkdir -p "$manifest_tools_prefix"
        npm install --prefix "$manifest_tools_prefix" --save-exact --no-audit --no-fund --loglevel=error \
                "${manifest_tools[@]}" >/dev/null ||
                die "npm could not install ${manifest_tools[*]} into $manifest_tools_prefix"
}

# The gcc build "build", for both commands with the same options (`run` then `test` neither
# reconfigures nor rebuilds it): configured as the Debian package is (tests/packaging/debian/rules
# through dh's meson build system: --prefix=/usr --sysconfdir=/etc --localstatedir=/var), so that
# the whole suite runs once in a build whose paths are not /usr/local's; the other builds keep
# meson's default prefix. Nothing is installed from it: the daemon of `run` finds its helpers in
# the build tree beside it (src/util/helper-path.c), the tests install into a box or a DESTDIR.
gcc_prefix=/usr
gcc_options=(-Dtests=enabled -Dwerror=true
             "-Dprefix=$gcc_prefix" -Dsysconfdir=/etc -Dlocalstatedir=/var)

# setup_build DIR [meson options...]: configure once, reconfigure when options change.
setup_build() {
        local dir=$1; shift
        if [ -f "$dir/build.ninja" ]; then
                meson configure "$dir" "$@" >/dev/null
        else
                meson setup "$dir" "$@" >/dev/null
        fi
        ninja -C "$dir" >"$dir/ninja-output.log" 2>&1 || { tail -40 "$dir/ninja-output.log"; echo "setup.sh: build in $dir failed" >&2; return 1; }
}

# The service user, made from the sysusers.d file as a package's trigger would: started as root,
# the daemon runs as it (and so does every sandbox), and the test suites start daemons as it.
create_service_user() {
        systemd-sysusers "$top/build/units/sysusers.d/sandbox-runner.conf" >/dev/null
        getent passwd sandbox-runner >/dev/null || die "systemd-sysusers did not create the user sandbox-runner"
}

state=/var/lib/sandbox-runner
run_dir=/run/sandbox-runner
pidfile=$run_dir/dev.pid

stop_dev_daemon() {
        local pid
        [ -f "$pidfile" ] || return 0
        pid=$(cat "$pidfile")
        # Only ever stop the daemon this script started.
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q sandbox-runnerd; then
                kill -TERM "$pid" 2>/dev/null || true
                for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
        fi
        rm -f "$pidfile"
}

cmd_run() {
        install_packages
        setup_build build "${gcc_options[@]}"
        create_service_user
        stop_dev_daemon

        install -d -m 0700 "$state" "$state/credentials"
        install -d -m 0755 "$run_dir"
        for secret in api-token signing-key; do
                if [ ! -s "$state/credentials/$secret" ]; then
                        (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/credentials/$secret")
                        echo "Generated $state/credentials/$secret"
                fi
        done

        # The embedded defaults, no config file: --config points at an empty one. Without systemd as
        # PID 1 (a container) there are no transient scopes: the daemon, started as root, becomes
        # the user sandbox-runner and enforces the limits with cgroups of its own; AllowUnscoped=yes
        # lets it still run executions where even those cannot be had (then with rlimits only, and
        # /health says the limits are weaker).
        : >"$run_dir/dev.conf"
        if [ ! -d /run/systemd/system ]; then
                printf '[Execution]\nAllowUnscoped=yes\n' >"$run_dir/dev.conf"
                echo "No systemd on this machine: executions run without transient scopes (the daemon's own cgroups, or rlimits)."
        fi
        CREDENTIALS_DIRECTORY=$state/credentials STATE_DIRECTORY=$state RUNTIME_DIRECTORY=$run_dir \
                setsid "$top/build/src/sandbox-runnerd" --config "$run_dir/dev.conf" --listen 127.0.0.1:4311 \
                --log-target console </dev/null >>"$state/dev.log" 2>&1 &
        echo $! >"$pidfile"

        for _ in $(seq 100); do
                curl -fsS -o /dev/null http://127.0.0.1:4311/health 2>/dev/null && break
                sleep 0.1
        done
        curl -fsS http://127.0.0.1:4311/health >/dev/null || { tail -20 "$state/dev.log"; die "the runner did not come up"; }

        cat <<MSG
sandbox-runnerd is running on http://127.0.0.1:4311 (pid $(cat "$pidfile"), log: $state/dev.log).
  curl http://127.0.0.1:4311/health
  curl -H "Authorization: Bearer \$(cat $state/credentials/api-token)" http://127.0.0.1:4311/status
  $top/build/src/ctl/sandbox-runnerctl --token-file $state/credentials/api-token status
A rebuild (ninja -C $top/build) is picked up in place: the runner re-executes the new binary once
its runs are done (kill -HUP \$(cat $pidfile) does the same).
Stop it with: kill \$(cat $pidfile)
MSG
}

# Sum up meson's testlog.json of each build; print the plain closing line.
summarize() {
        /usr/bin/python3 - "$@" <<'PY'
import json, sys
ok = fail = skip = 0
for log in sys.argv[1:]:
    for line in open(log):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            ok += 1
        elif r == "SKIP":
            skip += 1
            print("skipped:", json.loads(line)["name"], "in", log)
        else:
            fail += 1
            print("failed:", json.loads(line)["name"], "in", log)
# A TAP subtest that skipped itself leaves its test OK in testlog.json: count those too.
import re, os
for log in sys.argv[1:]:
    txt = os.path.join(os.path.dirname(log), "testlog.txt")
    if os.path.exists(txt):
        for line in open(txt, errors="replace"):
            if re.match(r"^(not )?ok \d+\b.*#\s*skip", line, re.I):
                skip += 1
                print("skipped subtest:", line.strip(), "in", txt)
print(f"tests: {ok} passed, {fail} failed, {skip} skipped")
sys.exit(1 if fail or skip else 0)
PY
}

cmd_test() {
        install_packages
        install_s3rver
        install_manifest_tools
        local rc=0 logs=()

        echo "== gcc build (-Werror, --prefix=$gcc_prefix as the package), all suites"
        setup_build build "${gcc_options[@]}"
        create_service_user
        meson test -C build --print-errorlogs --num-processes 2 || rc=1
        logs+=(build/meson-logs/testlog.json)

        echo "== ASan+UBSan build: every suite but the private-systemd ones and \"once\" (tests/meson.build)"
        setup_build build-asan -Dtests=enabled -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
        meson test -C build-asan --print-errorlogs --num-processes 2 --no-suite systemd --no-suite once || rc=1
        logs+=(build-asan/meson-logs/testlog.json)

        echo "== clang build (-Werror): unit"
        if [ ! -f build-clang/build.ninja ]; then
                CC=clang meson setup build-clang -Dtests=enabled -Dwerror=true >/dev/null
        fi
        ninja -C build-clang >build-clang/ninja-output.log 2>&1 || { tail -40 build-clang/ninja-output.log; return 1; }
        meson test -C build-clang --print-errorlogs --num-processes 2 --suite unit || rc=1
        logs+=(build-clang/meson-logs/testlog.json)

        echo "== clang libFuzzer build (ASan+UBSan): fuzz, each target briefly over its seed corpus"
        CC=clang setup_build build-fuzz -Dfuzz=true -Dtests=disabled -Dwerror=true \
                -Db_sanitize=address,undefined -Db_lundef=false
        meson test -C build-fuzz --print-errorlogs --num-processes 2 --suite fuzz || rc=1
        logs+=(build-fuzz/meson-logs/testlog.json)

        echo "== install tree"
        rm -rf build/dest
        DESTDIR="$top/build/dest" meson install -C build --no-rebuild --quiet
        for f in libexec/sandbox-runnerd bin/sandbox-runnerctl; do
                [ -x "build/dest$gcc_prefix/$f" ] || { echo "missing from the install tree: $gcc_prefix/$f"; rc=1; }
        done
        # Nothing of a --prefix=/usr build under /usr/local (a path that ignores the prefix).
        [ -z "$(cd build/dest && find . -path ./usr/local -prune -print)" ] ||
                { echo "installed under /usr/local by a --prefix=$gcc_prefix build:"; (cd build/dest && find ./usr/local -type f); rc=1; }
        # polkitd reads its own datadir only: the rule goes there whatever the prefix.
        [ -f build/dest/usr/share/polkit-1/rules.d/50-sandbox-runner.rules ] ||
                { echo "the polkit rule is not where polkitd reads it: $(cd build/dest && find . -name '50-sandbox-runner.rules')"; rc=1; }
        # The AppArmor profile only with -Dapparmor=enabled (docs/apparmor.md).
        [ -z "$(cd build/dest && find . -name sandbox-runner-bwrap)" ] ||
                { echo "the AppArmor profile is installed without -Dapparmor=enabled"; rc=1; }

        summarize "${logs[@]}" || rc=1
        return $rc
}

[ "$(id -u)" = 0 ] || die "run me as root (sudo $0 ${1:-})"
case "${1:-}" in
run) cmd_run ;;
test) cmd_test ;;
*) die "usage: $0 run|test" ;;
esac
