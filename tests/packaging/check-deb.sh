#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP checks of the built Debian package without installing it:
#   - its files (dpkg-deb -c): the daemon and its helpers in /usr/libexec, the CLI in /usr/bin, the
#     units in the unit directory of this system's systemd.pc (Debian 12: /lib/systemd/system, the
#     one dh_installsystemd of debhelper 13.11 handles) and nowhere else, the sysusers.d and
#     tmpfiles.d files, the journal catalog where systemd's dpkg trigger watches, the polkit rule
#     where polkitd reads it, every man page compressed, nothing under /usr/local; every ExecStart=
#     of a unit names a program the package ships;
#   - its maintainer scripts (dpkg-deb -e), read and run: each one under sh -n, then run with
#     logging stand-ins for systemctl, deb-systemd-invoke, deb-systemd-helper, systemd-sysusers and
#     systemd-tmpfiles in a private mount namespace whose /run has /run/systemd/system (systemd
#     "running") -- install, upgrade with the service active and inactive, remove -- and, for purge,
#     with DPKG_ROOT pointing at a scratch root (what is removed only there, what is kept).
# Nothing of the host is changed: the stand-ins are first in PATH, the scripts' rm/rmdir act under
# DPKG_ROOT or not at all.
#
# Usage: check-deb.sh DEB
# Fails (no skip) when a tool it needs is missing. Run by tests/integration/systemd-package.sh on
# the package it built (check_deb_main can also be sourced: tests/helpers/tap-lib.sh counts).

# check_deb_main DEB: the checks, as TAP lines through tap-lib.sh's ok/not_ok (N and FAILED).
check_deb_main() {
        local deb=$1 t
        CD_WORK=$(mktemp -d "${TMPDIR:-/tmp}/check-deb.XXXXXX") || return 1
        # tap-lib.sh's diag_outputs reads $WORK/out and $WORK/err.
        WORK=$CD_WORK
        : >"$WORK/out"
        : >"$WORK/err"

        for t in dpkg-deb pkg-config unshare sh; do
                check "'$t' is installed" sh -c "command -v '$t' >/dev/null"
        done
        if ! dpkg-deb -I "$deb" >/dev/null 2>&1; then
                not_ok "'$deb' is a Debian package"
                return 0
        fi
        ok "'$deb' is a Debian package"

        check_deb_fields "$deb"
        check_deb_files "$deb"
        check_deb_scripts "$deb"
}

check_deb_fields() {
        local deb=$1 dep
        check "Package is sandbox-runner" test "$(dpkg-deb -f "$deb" Package)" = sandbox-runner
        for dep in bubblewrap polkitd dbus systemd libsystemd0 libseccomp2; do
                check "Depends names $dep" sh -c "dpkg-deb -f '$deb' Depends | tr ',' '\n' | grep -q '^ *$dep\\b'"
        done
        check "Installed-Size is given" sh -c "[ \"\$(dpkg-deb -f '$deb' Installed-Size)\" -gt 0 ]"
}

# in_deb PATH: the package ships PATH (as dpkg-deb -c writes it, without the leading ".")
in_deb() {
        grep -qxF "$1" "$WORK/files"
}

check_deb_files() {
        local deb=$1 unitdir f page unit prog trig
        dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|; s|/$||' | sort >"$WORK/files"
        dpkg-deb -x "$deb" "$WORK/root"

        check "the daemon is /usr/libexec/sandbox-runnerd, executable" test -x "$WORK/root/usr/libexec/sandbox-runnerd"
        for f in sandbox-runner-egress sandbox-runner-bridge sandbox-runner-npu sandbox-runner-keeper sandbox-runner-exec \
                 sandbox-runner-provision.py; do
                check "its helper /usr/libexec/$f, executable" test -x "$WORK/root/usr/libexec/$f"
        done
        check "the CLI is /usr/bin/sandbox-runnerctl, executable" test -x "$WORK/root/usr/bin/sandbox-runnerctl"

        unitdir=$(pkg-config --variable=systemdsystemunitdir systemd)
        check "systemd.pc names a unit directory ('$unitdir')" test -n "$unitdir"
        for unit in sandbox-runner.socket sandbox-runner-sciencediscovery.socket sandbox-runner.service sandbox-runner.slice \
                    sandbox-runner-egress@.socket sandbox-runner-egress@.service sandbox-runner-npu@.service; do
                check "unit $unit in $unitdir" in_deb "$unitdir/$unit"
        done
        check "no unit outside $unitdir" sh -c "! grep -E '/systemd/system/.' '$WORK/files' | grep -vq '^$unitdir/'"
        for unit in sandbox-runner.service sandbox-runner-egress@.service sandbox-runner-npu@.service; do
                prog=$(sed -n 's/^ExecStart=[-@:+!]*\([^ ]*\).*/\1/p' "$WORK/root$unitdir/$unit")
                check "$unit runs '$prog', a program of the package" sh -c "[ -n '$prog' ] && [ -x '$WORK/root$prog' ]"
        done

        check "sysusers.d file /usr/lib/sysusers.d/sandbox-runner.conf makes the user sandbox-runner" \
                grep -qE '^u +sandbox-runner ' "$WORK/root/usr/lib/sysusers.d/sandbox-runner.conf"
        check "tmpfiles.d file /usr/lib/tmpfiles.d/sandbox-runner.conf makes /etc/sandbox-runner" \
                grep -qE '^d +/etc/sandbox-runner ' "$WORK/root/usr/lib/tmpfiles.d/sandbox-runner.conf"
        check "the catalog is /usr/lib/systemd/catalog/sandbox-runner.catalog" \
                in_deb /usr/lib/systemd/catalog/sandbox-runner.catalog
        trig=/var/lib/dpkg/info/systemd.triggers
        check "systemd's dpkg trigger watches /usr/lib/systemd/catalog ($trig)" \
                grep -qE '^interest(-noawait)? +/usr/lib/systemd/catalog$' "$trig"
        check "the polkit rule is /usr/share/polkit-1/rules.d/50-sandbox-runner.rules" \
                in_deb /usr/share/polkit-1/rules.d/50-sandbox-runner.rules
        for page in man1/sandbox-runnerctl.1 man5/sandbox-runner.conf.5 man8/sandbox-runnerd.8 \
                    man8/sandbox-runner-egress.8 man8/sandbox-runner-bridge.8 man8/sandbox-runner-npu.8; do
                check "man page $page, compressed" in_deb "/usr/share/man/$page.gz"
        done
        check "no uncompressed man page" sh -c "! grep -E '^/usr/share/man/man[0-9]/.*[^z]\$' '$WORK/files' | grep -q ."
        check "nothing under /usr/local" sh -c "! grep -q '^/usr/local' '$WORK/files'"
        check "nothing under /etc (configuration comes from tmpfiles.d and the operator)" \
                sh -c "! grep -q '^/etc' '$WORK/files'"
}

# The stand-ins: each logs its name and arguments (quotes dropped) to $CD_LOG and answers as told:
# systemctl is-active succeeds when $CD_ACTIVE is 1; deb-systemd-helper was-enabled succeeds and
# debian-installed fails (a first install; the upgrade runs need nothing else of it).
make_stand_ins() {
        local bin=$WORK/bin name
        mkdir -p "$bin"
        for name in systemctl deb-systemd-invoke deb-systemd-helper systemd-sysusers systemd-tmpfiles; do
                cat >"$bin/$name" <<EOF
#!/bin/sh
echo "$name \$*" >>"\$CD_LOG"
case "$name \$*" in
        "systemctl --quiet is-active "*|"systemctl is-active "*) [ "\${CD_ACTIVE:-0}" = 1 ] ;;
        "deb-systemd-helper debian-installed "*) exit 1 ;;
        *) exit 0 ;;
esac
EOF
                chmod +x "$bin/$name"
        done
}

# In a private mount namespace: a fresh /run with /run/systemd/system (systemd "running"), and /etc
# and /var overlays whose upper layers lie on that tmpfs, so that whatever a script (or a faulty
# one: rm -rf /var/lib/sandbox-runner on remove) writes or deletes there never reaches the host.
# shellcheck disable=SC2016  # expanded by the inner sh
CD_NS_SETUP='set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/system
for d in etc var; do
        mkdir -p "/run/cd-ov/$d/upper" "/run/cd-ov/$d/work"
        mount -t overlay overlay -o "lowerdir=/$d,upperdir=/run/cd-ov/$d/upper,workdir=/run/cd-ov/$d/work" "/$d"
done
[ -z "${CD_BEFORE:-}" ] || sh -c "$CD_BEFORE"
set +e
sh "$@"
rc=$?
[ -z "${CD_AFTER:-}" ] || sh -c "$CD_AFTER" >"$CD_AFTER_OUT" 2>&1 || rc=99
exit $rc'

# run_script NAME ARGS...: the maintainer script NAME with ARGS in that namespace, the stand-ins
# first in PATH, no DPKG_ROOT; log in $WORK/log. CD_BEFORE, a command run in the namespace before
# the script; CD_AFTER, one run after it (its output in $WORK/after; RC 99 when it fails).
run_script() {
        local name=$1 ns
        shift
        : >"$WORK/log"
        : >"$WORK/after"
        if [ "$(id -u)" -eq 0 ]; then ns=(unshare --mount --propagation private); else ns=(unshare --user --map-root-user --mount); fi
        "${ns[@]}" env -u DPKG_ROOT CD_LOG="$WORK/log" CD_ACTIVE="${CD_ACTIVE:-0}" CD_BEFORE="${CD_BEFORE:-}" CD_AFTER="${CD_AFTER:-}" \
                CD_AFTER_OUT="$WORK/after" PATH="$WORK/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
                sh -c "$CD_NS_SETUP" sh "$WORK/ctl/$name" "$@" >"$WORK/out" 2>"$WORK/err"
        RC=$?
}

# run_script_root NAME ARGS...: the same with DPKG_ROOT=$WORK/dpkgroot (the scripts skip systemd
# there) and the host's /run.
run_script_root() {
        local name=$1
        shift
        : >"$WORK/log"
        env DPKG_ROOT="$WORK/dpkgroot" CD_LOG="$WORK/log" PATH="$WORK/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
                sh "$WORK/ctl/$name" "$@" >"$WORK/out" 2>"$WORK/err"
        RC=$?
}

logged() { grep -qxF "$1" "$WORK/log"; }
not_logged() { ! grep -qE "$1" "$WORK/log"; }
# logged_before A B: line A is in the log before line B
logged_before() {
        local a b
        a=$(grep -nxF "$1" "$WORK/log" | head -n 1 | cut -d: -f1)
        b=$(grep -nxF "$2" "$WORK/log" | tail -n 1 | cut -d: -f1)
        [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]
}
diag_log() { sed 's/^/# log: /' "$WORK/log"; }
# check_log "description" command...: like check, with the stand-ins' log as diagnostics
check_log() {
        local desc=$1
        shift
        if "$@"; then ok "$desc"; else not_ok "$desc"; diag_log; diag_outputs; fi
}

check_deb_scripts() {
        local deb=$1 s root svc_start
        dpkg-deb -e "$deb" "$WORK/ctl"
        for s in postinst prerm postrm; do
                check "maintainer script $s is there" test -x "$WORK/ctl/$s"
                check "$s passes sh -n" sh -n "$WORK/ctl/$s"
        done
        check "no preinst (nothing is stopped before an upgrade)" test ! -e "$WORK/ctl/preinst"
        check "postrm never removes the system user" sh -c "! grep -Eq 'userdel|deluser|groupdel|delgroup' '$WORK/ctl/postrm'"
        make_stand_ins
        host_paths > "$WORK/host-before"
        # Any start, restart, enable or stop of the service or the templates, by any of the tools.
        svc_start='(deb-systemd-invoke|systemctl) .*(start|restart|try-restart|enable).*sandbox-runner(\.service|-egress@|-npu@)|deb-systemd-helper enable .*sandbox-runner(\.service|-egress@|-npu@)'

        # First install.
        CD_ACTIVE=0 run_script postinst configure
        expect_rc 0 "postinst configure (first install)"
        check_log "install: the user from the sysusers.d file" logged "systemd-sysusers sandbox-runner.conf"
        check_log "install: tmpfiles.d applied" logged "systemd-tmpfiles --create sandbox-runner.conf"
        check_log "install: the socket enabled" logged "deb-systemd-helper enable sandbox-runner.socket"
        check_log "install: the socket started after a daemon-reload" \
                logged_before "systemctl --system daemon-reload" "deb-systemd-invoke start sandbox-runner.socket"
        check_log "install: the service and the templates neither started nor enabled" not_logged "$svc_start"
        check_log "install: no reload" not_logged "reload sandbox-runner"
        check_log "install: the ScienceDiscovery dialect's socket neither enabled nor started" \
                not_logged "(deb-systemd-invoke|systemctl) .*(start|restart).*sandbox-runner-sciencediscovery|deb-systemd-helper enable .*sandbox-runner-sciencediscovery"

        # Upgrade, the daemon running: reloaded (after the daemon-reload that loads its new unit),
        # never stopped or restarted; the socket left up.
        CD_ACTIVE=1 run_script postinst configure 0.1.0-1
        expect_rc 0 "postinst configure 0.1.0-1 (upgrade, service active)"
        check_log "upgrade: the running service is asked to reload after the daemon-reload" \
                logged_before "systemctl --system daemon-reload" "deb-systemd-invoke reload sandbox-runner.service"
        check_log "upgrade: nothing stopped or restarted" not_logged "(stop|restart)"
        check_log "upgrade: the service and the templates neither started nor enabled" not_logged "$svc_start"
        CD_ACTIVE=0 run_script postinst configure 0.1.0-1
        expect_rc 0 "postinst configure 0.1.0-1 (upgrade, service inactive)"
        check_log "upgrade: an inactive service is not reloaded" not_logged "reload sandbox-runner"
        CD_ACTIVE=1 run_script prerm upgrade 0.1.1-1
        expect_rc 0 "prerm upgrade 0.1.1-1"
        check_log "upgrade: the old prerm stops nothing" not_logged "(stop|restart)"

        # Remove.
        CD_ACTIVE=1 run_script prerm remove
        expect_rc 0 "prerm remove"
        check_log "remove: socket, service and every template instance stopped" \
                logged "deb-systemd-invoke stop sandbox-runner.socket sandbox-runner-sciencediscovery.socket sandbox-runner.service sandbox-runner-egress@*.socket sandbox-runner-egress@*.service sandbox-runner-npu@*.service sandbox-runner.slice"
        run_script postrm remove
        expect_rc 0 "postrm remove"
        check_log "remove: daemon-reload" logged "systemctl --system daemon-reload"
        check_log "remove: no unit state purged" not_logged "purge"

        # The state where the service keeps it (in the namespace's overlays): kept on remove,
        # removed on purge; the operator's secret kept.
        local state='mkdir -p /var/lib/sandbox-runner/workspaces/w1 /run/sandbox-runner/egress /etc/credstore
echo state >/var/lib/sandbox-runner/workspaces/w1/f; echo secret >/etc/credstore/sandbox-runner.api-token'
        CD_BEFORE=$state CD_AFTER='test -f /var/lib/sandbox-runner/workspaces/w1/f && test -d /run/sandbox-runner/egress' \
                run_script postrm remove
        expect_rc 0 "postrm remove: /var/lib/sandbox-runner and /run/sandbox-runner kept"
        CD_BEFORE=$state CD_AFTER='test ! -e /var/lib/sandbox-runner && test ! -e /run/sandbox-runner && test -f /etc/credstore/sandbox-runner.api-token' \
                run_script postrm purge
        expect_rc 0 "postrm purge: /var/lib/sandbox-runner and /run/sandbox-runner removed, /etc/credstore/sandbox-runner.api-token kept"

        # The same under DPKG_ROOT (a scratch root); the operator's files kept.
        root=$WORK/dpkgroot
        mkdir -p "$root/var/lib/sandbox-runner/workspaces/w1" "$root/run/sandbox-runner/egress" \
                 "$root/etc/sandbox-runner/runner.conf.d" "$root/etc/credstore"
        echo state >"$root/var/lib/sandbox-runner/workspaces/w1/f"
        echo secret >"$root/etc/credstore/sandbox-runner.api-token"
        run_script_root postrm remove
        expect_rc 0 "postrm remove (DPKG_ROOT)"
        check "remove: the state is kept" test -f "$root/var/lib/sandbox-runner/workspaces/w1/f"
        run_script_root postrm purge
        expect_rc 0 "postrm purge (DPKG_ROOT)"
        check "purge: /var/lib/sandbox-runner removed" test ! -e "$root/var/lib/sandbox-runner"
        check "purge: /run/sandbox-runner removed" test ! -e "$root/run/sandbox-runner"
        check "purge: the empty /etc/sandbox-runner removed" test ! -e "$root/etc/sandbox-runner"
        check "purge: the operator's secret in /etc/credstore kept" test -f "$root/etc/credstore/sandbox-runner.api-token"
        check_log "purge: the units' enablement state purged" \
                sh -c "grep -qxF 'deb-systemd-helper purge sandbox-runner.socket' '$WORK/log' && grep -qxF 'deb-systemd-helper purge sandbox-runner.service' '$WORK/log'"
        mkdir -p "$root/etc/sandbox-runner/runner.conf.d"
        echo '[Execution]' >"$root/etc/sandbox-runner/runner.conf.d/local.conf"
        run_script_root postrm purge
        expect_rc 0 "postrm purge again, an operator's drop-in in /etc/sandbox-runner/runner.conf.d"
        check "purge: the operator's drop-in kept" test -f "$root/etc/sandbox-runner/runner.conf.d/local.conf"

        host_paths >"$WORK/host-after"
        check "the host's own paths are as before the runs" cmp -s "$WORK/host-before" "$WORK/host-after"
}

# What the scripts could touch on the host (they never should): the state, runtime and configuration
# paths, listed recursively with their modification times.
host_paths() {
        local p
        for p in /var/lib/sandbox-runner /run/sandbox-runner /etc/sandbox-runner /etc/credstore; do
                if [ -e "$p" ]; then find "$p" -printf '%p %T@\n' 2>&1; else echo "$p absent"; fi
        done
}

check_deb_cleanup() {
        [ -n "${CD_WORK:-}" ] && rm -rf "$CD_WORK"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
        set -u
        # shellcheck source=../helpers/tap-lib.sh
        . "$(dirname "$0")/../helpers/tap-lib.sh"
        if [ $# -ne 1 ]; then
                echo "usage: check-deb.sh DEB" >&2
                exit 2
        fi
        trap check_deb_cleanup EXIT
        check_deb_main "$1"
        echo "1..$N"
        [ "$FAILED" -eq 0 ]
fi
