#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# systemd-box.sh: boot a private systemd (PID 1 of its own namespaces) safely on a
# machine where systemd is installed but is not PID 1, and run commands in it.
# See DESIGN.md section 13.  Usable as a CLI:
#
#   systemd-box.sh start DIR      boot a box; state in DIR; prints the box's PID 1 (host pid)
#   systemd-box.sh wait DIR [SEC] wait until `systemctl is-system-running` says running/degraded
#   systemd-box.sh run DIR CMD... run CMD inside (all the box's namespaces and cgroups);
#                                 its exit status is passed through
#   systemd-box.sh stop DIR       SIGRTMIN+4 to the box's PID 1, wait, remove its cgroups;
#                                 idempotent, never fails hard, safe in a trap
#   systemd-box.sh install DIR STAGE
#                                 copy a `meson install` DESTDIR tree into the box's overlays
#   systemd-box.sh pid DIR        print the box's PID 1 (host pid) if it is running
#
# or as a library (`source systemd-box.sh`): box_start, box_wait, box_run, box_install,
# box_stop, box_pid1.
#
# What makes it safe for the host (every point matters; do not remove one):
#  * new pid, mount (propagation private), net, uts, ipc and cgroup namespaces;
#  * fresh tmpfs on /tmp, /var/tmp, /run, /dev/shm (and /root, /home): systemd's boot
#    clean-up (tmpfiles --remove --boot) would otherwise empty the host's /tmp;
#  * /etc, /var and /usr are overlays whose upper layers live on a tmpfs that exists only in
#    the box's mount namespace, so installing into the box never touches the host;
#  * everything else of the host's root file system (/work, /srv, /opt, ...) is read-only in
#    the box (a per-mount flag of the box's own mount namespace);
#  * a private /dev (tmpfs with freshly made nodes, own devpts instance), so nothing in the box
#    can chmod or trigger the host's device nodes; /dev/console is a pty logged by script(1);
#  * a fresh, read-only sysfs (it also shows the box's own network namespace), /proc/sys and
#    a few other kernel-global /proc files read-only (/proc/sys/net stays writable: the netns
#    is private), so no sysctl, binfmt, core_pattern, ... write can reach the kernel;
#  * `container=` in PID 1's environment: systemd then runs in container mode, which among
#    other things makes systemd-shutdown skip swapoff, loop/DM/MD detach and unmounting, and
#    refuses to start/stop swap units;
#  * the box gets its own child cgroup (sandbox-runner-box-<n>) in every hierarchy mounted on
#    the host, below the caller's current cgroup, and the trees are re-mounted inside the new
#    cgroup namespace, so systemd only ever writes below that child; `stop` removes it;
#  * units that touch hardware or kernel-global state (udev, modules, sysctl, binfmt, random
#    seed, repart, pcrphase, timesyncd, remount-fs, fsck, getty, ...) are masked, all
#    generators are disabled, /etc/fstab is empty and the host's enablement symlinks in
#    /etc/systemd/system/*.wants are hidden; the default target is box.target
#    (basic.target + dbus + journald).
#
# cgroups, finding on this machine (Debian 12, systemd 252, kernel with a hybrid layout: v1
# controllers at /sys/fs/cgroup/<ctrl>, name=systemd at /sys/fs/cgroup/systemd, an empty v2
# tree at /sys/fs/cgroup/unified): systemd decides the mode from what is mounted at
# /sys/fs/cgroup when it starts, so the systemd.unified_cgroup_hierarchy= switches have no
# effect here (they only steer what PID 1 mounts itself).  We re-mount exactly the host's
# layout (hybrid) inside the cgroup namespace.  A pure v2 box would get no controllers (they
# are all bound to v1 hierarchies on the host), so MemoryMax=/TasksMax= would not be enforced;
# with the hybrid layout systemd enforces them through the v1 memory and pids controllers.
#
# Console: PID 1's console output (boot status lines) goes to DIR/console.log, through a pty
# that script(1) allocates (systemd refuses a /dev/console that is not a tty).  Our own
# diagnostics go to stderr, and to DIR/box.log.

BOX_SELF=$(realpath -e "${BASH_SOURCE[0]}")
BOX_SYSTEMD=${BOX_SYSTEMD:-/lib/systemd/systemd}
BOX_BOOT_TIMEOUT=${BOX_BOOT_TIMEOUT:-60}
BOX_STOP_TIMEOUT=${BOX_STOP_TIMEOUT:-60}
BOX_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Units masked in the box: hardware, kernel-global state, hangs, or merely slow and useless.
BOX_MASK=(
        systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket
        systemd-udev-trigger.service systemd-udev-settle.service systemd-hwdb-update.service
        kmod-static-nodes.service systemd-modules-load.service modprobe@.service
        systemd-sysctl.service systemd-binfmt.service
        proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount
        sys-fs-fuse-connections.mount sys-kernel-config.mount sys-kernel-debug.mount
        sys-kernel-tracing.mount dev-hugepages.mount
        systemd-random-seed.service systemd-repart.service systemd-pcrphase.service
        systemd-pcrphase-sysinit.service systemd-pcrphase-initrd.service
        systemd-boot-update.service systemd-boot-system-token.service
        systemd-firstboot.service systemd-machine-id-commit.service
        systemd-remount-fs.service systemd-fsck-root.service systemd-fsck@.service
        systemd-quotacheck.service quotaon.service systemd-growfs-root.service
        systemd-timesyncd.service systemd-pstore.service ldconfig.service
        systemd-journald-audit.socket systemd-journal-catalog-update.service
        systemd-tmpfiles-clean.timer systemd-tmpfiles-clean.service
        systemd-ask-password-console.path systemd-ask-password-wall.path
        getty.target getty@.service serial-getty@.service console-getty.service
        container-getty@.service getty-static.service
        cryptsetup.target veritysetup.target integritysetup.target remote-fs.target
        swap.target apparmor.service auditd.service lvm2-monitor.service
        multipathd.service e2scrub_reap.service e2scrub_all.timer fstrim.timer
        apt-daily.timer apt-daily-upgrade.timer man-db.timer dpkg-db-backup.timer
)

box__log() { printf 'systemd-box: %s\n' "$*" >&2; }

box__dir() {
        # Resolve DIR; refuse places that the box hides or overlays (the state tmpfs and the
        # console pty are reached through DIR while the box's mounts are being set up).
        local d
        [[ -n "$1" ]] || { box__log "no DIR given"; return 2; }
        d=$(realpath -m -- "$1") || return 2
        [[ "$d" =~ ^[A-Za-z0-9._/+-]+$ ]] || { box__log "DIR must be a plain path: $d"; return 2; }
        case "$d/" in
        /etc/*|/usr/*|/var/*|/run/*|/dev/*|/proc/*|/sys/*|/lib*/*|/bin/*|/sbin/*|/)
                box__log "DIR must not be under /etc /usr /var /run /dev /proc /sys: $d"; return 2;;
        esac
        printf '%s\n' "$d"
}

# Start time (clock ticks since boot, field 22 of /proc/PID/stat) of PID, empty if gone.
box__starttime() {
        local s
        s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
        s=${s##*) }             # drop "pid (comm) ", comm may contain spaces
        set -- $s
        printf '%s\n' "${20}"
}

box__ppid() {
        local s
        s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
        s=${s##*) }
        set -- $s
        printf '%s\n' "$2"
}

# The box's PID 1 if it is still the process we started (guards against pid reuse).
box_pid1() {
        local dir pid start now
        dir=$(box__dir "$1") || return 2
        [[ -r "$dir/pid" && -r "$dir/pid.start" ]] || return 1
        pid=$(<"$dir/pid"); start=$(<"$dir/pid.start")
        [[ "$pid" =~ ^[0-9]+$ ]] || return 1
        now=$(box__starttime "$pid") || return 1
        [[ "$now" == "$start" ]] || return 1
        printf '%s\n' "$pid"
}

# List the host's cgroup hierarchies as "fstype<TAB>mountpoint<TAB>superoptions".
box__cgroup_mounts() {
        local line pre post mp fstype sopts
        while IFS= read -r line; do
                pre=${line%% - *}; post=${line#* - }
                read -r _ _ _ _ mp _ <<<"$pre"
                read -r fstype _ sopts <<<"$post"
                case "$fstype" in
                cgroup|cgroup2) printf '%s\t%s\t%s\n' "$fstype" "$mp" "$sopts";;
                esac
        done </proc/self/mountinfo
}

# Our own cgroup path in the hierarchy with fstype $1 and super options $2.
box__my_cgroup() {
        local fstype=$1 sopts=$2 id ctrls path c ok
        while IFS=: read -r id ctrls path; do
                if [[ "$fstype" == cgroup2 ]]; then
                        [[ "$id" == 0 && -z "$ctrls" ]] && { printf '%s\n' "$path"; return 0; }
                        continue
                fi
                [[ -n "$ctrls" ]] || continue
                ok=1
                for c in ${ctrls//,/ }; do
                        [[ ",$sopts," == *",$c,"* ]] || ok=0
                done
                (( ok )) && { printf '%s\n' "$path"; return 0; }
        done </proc/self/cgroup
        return 1
}

box__remove_cgroups() {
        local dir=$1 cg i rc=0
        [[ -r "$dir/cgroups" ]] || return 0
        while IFS= read -r cg; do
                [[ "$cg" == /sys/fs/cgroup/* && "${cg##*/}" == sandbox-runner-box-* ]] || continue
                for i in $(seq 1 50); do
                        [[ -d "$cg" ]] || break
                        # rmdir only, deepest first: a cgroup directory is removed by rmdir.
                        find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
                        [[ -d "$cg" ]] || break
                        sleep 0.1
                done
                if [[ -d "$cg" ]]; then
                        box__log "could not remove cgroup $cg (processes: $(cat "$cg/cgroup.procs" 2>/dev/null | tr '\n' ' '))"
                        rc=1
                fi
        done <"$dir/cgroups"
        (( rc == 0 )) && rm -f "$dir/cgroups"
        return $rc
}

box_start() {
        local dir name fstype mp sopts mine cg f pid i
        dir=$(box__dir "$1") || return 2
        [[ $EUID -eq 0 ]] || { box__log "must be root"; return 1; }
        for f in unshare nsenter script mount "$BOX_SYSTEMD"; do
                command -v "$f" >/dev/null || { box__log "missing $f"; return 1; }
        done
        if box_pid1 "$dir" >/dev/null; then
                box__log "a box is already running in $dir"; return 1
        fi
        mkdir -p "$dir/ovl" || return 1
        rm -f "$dir/pid" "$dir/pid.start" "$dir/script.pid" "$dir/console.log" "$dir/box.log"
        box__remove_cgroups "$dir" || return 1

        # One child cgroup per hierarchy, below our current cgroup there.
        name=sandbox-runner-box-$$-$RANDOM
        : >"$dir/cgroups"; : >"$dir/cgmounts"
        while IFS=$'\t' read -r fstype mp sopts; do
                [[ "$mp" == /sys/fs/cgroup/* || "$mp" == /sys/fs/cgroup ]] || continue
                mine=$(box__my_cgroup "$fstype" "$sopts") || { box__log "no cgroup of ours in $mp"; return 1; }
                cg="$mp${mine%/}/$name"
                mkdir "$cg" || { box__log "cannot create $cg"; box__remove_cgroups "$dir"; return 1; }
                printf '%s\n' "$cg" >>"$dir/cgroups"
                # v1 cpuset: a new cgroup has no CPUs/memory nodes; no task can join it until set.
                for f in cpuset.cpus cpuset.mems; do
                        if [[ -e "$cg/$f" && -z "$(cat "$cg/$f")" ]]; then
                                cat "$cg/../$f" >"$cg/$f" || { box__remove_cgroups "$dir"; return 1; }
                        fi
                done
                printf '%s\t%s\t%s\n' "$fstype" "${mp#/sys/fs/cgroup}" "$sopts" >>"$dir/cgmounts"
        done < <(box__cgroup_mounts)
        [[ -s "$dir/cgroups" ]] || { box__log "no cgroup hierarchy found"; return 1; }

        # A canary in the host's /tmp: `stop` reports loudly if the box removed it.
        printf 'sandbox-runner box canary %s\n' "$dir" >"/tmp/.$name.canary" &&
                printf '%s\n' "/tmp/.$name.canary" >"$dir/canary"

        # script(1) gives the box a pty for /dev/console and logs it to console.log.
        # unshare --kill-child: if unshare dies, the box's PID 1 gets SIGKILL (and with it the
        # whole pid namespace).
        (
                cd / || exit 1
                exec </dev/null >/dev/null 2>>"$dir/box.log"
                SHELL=/bin/sh exec script -q -e -f \
                        -c "exec unshare --pid --mount --net --uts --ipc --fork --kill-child --propagation private -- /bin/bash '$BOX_SELF' __init1 '$dir'" \
                        "$dir/console.log"
        ) &
        echo $! >"$dir/script.pid"

        for i in $(seq 1 200); do
                pid=$(box_pid1 "$dir") && break
                if ! kill -0 "$(<"$dir/script.pid")" 2>/dev/null; then
                        break
                fi
                sleep 0.05
        done
        if [[ -z "$pid" ]]; then
                box__log "box did not come up; console:"
                sed 's/^/  | /' "$dir/console.log" "$dir/box.log" >&2 2>/dev/null
                box_stop "$dir"
                return 1
        fi
        BOX_PID1=$pid
        printf '%s\n' "$pid"
}

# Inside, phase 1: PID 1 of the new pid namespace, host cgroup namespace, private mount ns.
box__init1() {
        set -euo pipefail
        local dir=$1 st cg
        # /proc is still the host's here, so /proc/self/stat shows our host pid.
        read -r st </proc/self/stat        # bash's own stat: a redirection, not a child
        local pid=${st%% *}
        local rest=${st##*) }
        set -- $rest
        printf '%s\n' "${20}" >"$dir/pid.start"
        printf '%s\n' "$pid" >"$dir/pid"
        # Join the box's cgroups (writing 0 moves the writer), then a new cgroup namespace
        # rooted there.
        while IFS= read -r cg; do
                echo 0 >"$cg/cgroup.procs"
        done <"$dir/cgroups"
        exec unshare --cgroup -- /bin/bash "$BOX_SELF" __init2 "$dir"
}

# Inside, phase 2: also in the new cgroup namespace.  Build the box's file system view and
# exec systemd.  Everything that needs DIR happens before /tmp gets its tmpfs.
box__init2() {
        set -euo pipefail
        local dir=$1 d fstype mp sopts o opts tty u
        tty=$(tty)

        # State tmpfs: overlay upper/work dirs and the console bind source.
        mount -t tmpfs -o mode=0700,nosuid,nodev box-state "$dir/ovl"
        for d in etc usr var; do
                mkdir -p "$dir/ovl/$d/upper" "$dir/ovl/$d/work"
        done
        touch "$dir/ovl/console"
        mount --bind "$tty" "$dir/ovl/console"

        for d in etc usr var; do
                mount -t overlay -o "lowerdir=/$d,upperdir=$dir/ovl/$d/upper,workdir=$dir/ovl/$d/work" "box-$d" "/$d"
        done

        # Private /dev.
        mount -t tmpfs -o mode=0755,nosuid,size=4m box-dev /dev
        mknod -m 0666 /dev/null c 1 3
        mknod -m 0666 /dev/zero c 1 5
        mknod -m 0666 /dev/full c 1 7
        mknod -m 0666 /dev/random c 1 8
        mknod -m 0666 /dev/urandom c 1 9
        mknod -m 0666 /dev/tty c 5 0
        mkdir -m 0755 /dev/pts /dev/shm /dev/mqueue /dev/net
        mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts /dev/pts
        ln -s pts/ptmx /dev/ptmx
        ln -s /proc/self/fd /dev/fd
        ln -s /proc/self/fd/0 /dev/stdin
        ln -s /proc/self/fd/1 /dev/stdout
        ln -s /proc/self/fd/2 /dev/stderr
        touch /dev/console
        mount --bind "$dir/ovl/console" /dev/console
        mount -t tmpfs -o mode=1777,nosuid,nodev box-shm /dev/shm
        # The overlays hold private clones of the state tmpfs: its mount under DIR can go.
        umount "$dir/ovl/console"
        umount -l "$dir/ovl"

        # /etc of the box (overlay: these writes stay in the box).
        box__setup_etc

        # Fresh /proc for the new pid namespace; kernel-global parts read-only.
        mount -t proc -o nosuid,nodev,noexec proc /proc
        for d in sys sysrq-trigger irq bus fs acpi scsi; do
                [[ -e /proc/$d ]] || continue
                mount --bind "/proc/$d" "/proc/$d"
                mount -o remount,bind,ro,nosuid,nodev,noexec "/proc/$d"
        done
        mount --bind /proc/sys/net /proc/sys/net
        mount -o remount,bind,rw,nosuid,nodev,noexec /proc/sys/net

        # Fresh read-only sysfs (shows our net namespace), cgroup trees of our cgroup namespace.
        mount -t sysfs -o ro,nosuid,nodev,noexec sysfs /sys
        local unified_root=0
        grep -q $'^cgroup2\t\t' "$dir/cgmounts" && unified_root=1   # pure v2 host (untested here)
        (( unified_root )) ||
                mount -t tmpfs -o mode=0755,nosuid,nodev,noexec,size=1m box-cgroup /sys/fs/cgroup
        while IFS=$'\t' read -r fstype mp sopts; do
                opts=
                for o in ${sopts//,/ }; do
                        case "$o" in rw|ro|release_agent=*) ;; *) opts+=${opts:+,}$o;; esac
                done
                mkdir -p "/sys/fs/cgroup$mp"
                if [[ "$fstype" == cgroup2 ]]; then
                        mount -t cgroup2 -o "nosuid,nodev,noexec${opts:+,$opts}" cgroup2 "/sys/fs/cgroup$mp"
                else
                        mount -t cgroup -o "nosuid,nodev,noexec,$opts" cgroup "/sys/fs/cgroup$mp"
                fi
        done <"$dir/cgmounts"
        (( unified_root )) || mount -o remount,ro,nosuid,nodev,noexec,mode=0755,size=1m /sys/fs/cgroup

        # Fresh /run, /tmp, /var/tmp (this hides DIR if it is under /tmp: we are done with it).
        mount -t tmpfs -o mode=0755,nosuid,nodev,size=20% box-run /run
        mount -t tmpfs -o mode=1777,nosuid,nodev box-tmp /tmp
        mount -t tmpfs -o mode=1777,nosuid,nodev box-vartmp /var/tmp
        # Home directories: tmpfs too, so that HOME=/root is writable and stays in the box.
        mount -t tmpfs -o mode=0700,nosuid,nodev box-root /root
        mount -t tmpfs -o mode=0755,nosuid,nodev box-home /home

        # The rest of the host's root file system is read-only in the box.  remount,bind
        # changes this mount's flags only: the host's mount and the superblock stay rw.
        mount -o remount,bind,ro /

        # Per-unit mounts (LoadCredential=, PrivateTmp=, ...) need shared propagation; the peer
        # groups made here are new, private to this namespace (we started from private).
        mount --make-rshared /

        exec env -i container=sandbox-runner-box PATH="$BOX_PATH" LANG=C.UTF-8 \
                "$BOX_SYSTEMD" --unit=box.target --show-status=yes </dev/console >/dev/console 2>&1
}

box__setup_etc() {
        local u g
        # Never write the host's /etc: only ever run on the box's overlay.
        [[ "$(stat -f -c %T /etc)" == overlayfs ]] || { echo "systemd-box: /etc is not an overlay" >&2; exit 1; }
        # Fresh machine id: the box's journal and units must not look like the host's.
        tr -d '-' </proc/sys/kernel/random/uuid >/etc/machine-id
        echo sr-box >/etc/hostname
        echo '# empty: the box mounts nothing from fstab' >/etc/fstab
        # Hide the host's enablement symlinks (and its aliases) from the box.
        rm -rf /etc/systemd/system/*.wants /etc/systemd/system/*.requires \
               /etc/systemd/system/dbus-org.freedesktop.timesync1.service
        for u in "${BOX_MASK[@]}"; do
                ln -sfn /dev/null "/etc/systemd/system/$u"
        done
        # Disable every generator (fstab, getty, gpt-auto, sysv, cryptsetup, ...).
        mkdir -p /etc/systemd/system-generators
        for g in /lib/systemd/system-generators/* /usr/lib/systemd/system-generators/*; do
                [[ -e "$g" ]] && ln -sfn /dev/null "/etc/systemd/system-generators/${g##*/}"
        done
        cat >/etc/systemd/system/box.target <<'EOF'
[Unit]
Description=sandbox-runner test box
Requires=basic.target
Wants=dbus.socket dbus.service systemd-journald.service
After=basic.target dbus.socket dbus.service systemd-journald.service
AllowIsolate=yes
EOF
        ln -sfn box.target /etc/systemd/system/default.target
        mkdir -p /etc/systemd/system.conf.d /etc/systemd/journald.conf.d
        cat >/etc/systemd/system.conf.d/50-box.conf <<'EOF'
[Manager]
DefaultTimeoutStartSec=30s
DefaultTimeoutStopSec=10s
ShowStatus=yes
LogColor=no
EOF
        cat >/etc/systemd/journald.conf.d/50-box.conf <<'EOF'
[Journal]
Storage=volatile
RateLimitIntervalSec=0
ForwardToConsole=no
ForwardToWall=no
EOF
}

box_wait() {
        local dir timeout=${2:-$BOX_BOOT_TIMEOUT} state i
        dir=$(box__dir "$1") || return 2
        for ((i = 0; i < timeout * 10; i++)); do
                box_pid1 "$dir" >/dev/null || { box__log "box is not running"; return 1; }
                state=$(box_run "$dir" systemctl is-system-running 2>/dev/null)
                case "$state" in
                running|degraded) return 0;;
                esac
                sleep 0.1
        done
        box__log "box did not finish booting within ${timeout}s (state: ${state:-unknown})"
        box_run "$dir" systemctl list-jobs --no-pager >&2 2>&1 || true
        return 1
}

box_run() {
        local dir pid
        dir=$(box__dir "$1") || return 2
        shift
        pid=$(box_pid1 "$dir") || { box__log "box is not running"; return 125; }
        (
                # Join the box's cgroups (its root in every hierarchy) so that the command sees
                # itself inside the box's cgroup namespace, then all its namespaces.
                while IFS= read -r cg; do
                        echo 0 >"$cg/cgroup.procs" 2>/dev/null || true
                done <"$dir/cgroups"
                exec nsenter -t "$pid" -a -- /usr/bin/env -i PATH="$BOX_PATH" HOME=/root \
                        LANG=C.UTF-8 TERM=dumb SYSTEMD_PAGER= SYSTEMD_COLORS=0 "$@"
        )
}

# Copy a staged install tree (DESTDIR of `meson install`) into the box.  Only /etc, /usr and
# /var are overlays, so only those are written (lib, lib64, bin, sbin go to /usr/... on a
# merged-/usr system); anything else in the tree is refused, never written to the host.
box_install() {
        local dir stage top fs
        dir=$(box__dir "$1") || return 2
        stage=$2
        [[ -d "$stage" ]] || { box__log "no staged tree $stage"; return 1; }
        for top in etc usr var; do
                fs=$(box_run "$dir" findmnt -n -o FSTYPE --mountpoint "/$top") || return 1
                [[ "$fs" == overlay ]] || { box__log "/$top in the box is '$fs', not an overlay"; return 1; }
        done
        for top in $(cd "$stage" && ls -A); do
                case "$top" in
                etc|usr|var)
                        tar -C "$stage" -cf - "$top" |
                                box_run "$dir" tar -C / --keep-directory-symlink --no-overwrite-dir -xf - || return 1;;
                lib|lib64|bin|sbin)
                        [[ "$(box_run "$dir" readlink "/$top")" == "usr/$top" ]] ||
                                { box__log "/$top is not a symlink to usr/$top"; return 1; }
                        tar -C "$stage/$top" -cf - . |
                                box_run "$dir" tar -C "/usr/$top" --keep-directory-symlink --no-overwrite-dir -xf - || return 1;;
                *)
                        box__log "staged tree has /$top, outside the box's overlays: refused"; return 1;;
                esac
        done
}

box_stop() {
        local dir pid spid upid i rc=0
        dir=$(box__dir "$1") || return 0
        [[ -d "$dir" ]] || return 0
        pid=$(box_pid1 "$dir")
        spid=$(cat "$dir/script.pid" 2>/dev/null)
        [[ "$spid" =~ ^[0-9]+$ ]] || spid=
        if [[ -n "$pid" ]]; then
                upid=$(box__ppid "$pid")
                kill -s SIGRTMIN+4 "$pid" 2>/dev/null
                for ((i = 0; i < BOX_STOP_TIMEOUT * 10; i++)); do
                        box_pid1 "$dir" >/dev/null || break
                        sleep 0.1
                done
                if box_pid1 "$dir" >/dev/null; then
                        box__log "box PID 1 $pid did not exit in ${BOX_STOP_TIMEOUT}s: SIGKILL"
                        kill -KILL "$pid" 2>/dev/null
                        [[ -n "$upid" && "$upid" != 1 ]] && kill -KILL "$upid" 2>/dev/null
                        for ((i = 0; i < 50; i++)); do
                                box_pid1 "$dir" >/dev/null || break
                                sleep 0.1
                        done
                fi
        elif [[ -n "$spid" ]] && kill -0 "$spid" 2>/dev/null; then
                # Still starting (or failed early): ending script ends unshare, which kills the
                # box (--kill-child).
                kill -TERM "$spid" 2>/dev/null
        fi
        if [[ -n "$spid" ]]; then
                for ((i = 0; i < 100; i++)); do
                        kill -0 "$spid" 2>/dev/null || break
                        sleep 0.1
                done
                if kill -0 "$spid" 2>/dev/null; then
                        kill -KILL "$spid" 2>/dev/null
                        sleep 0.2
                fi
                wait "$spid" 2>/dev/null
        fi
        box__remove_cgroups "$dir" || rc=1
        if [[ -r "$dir/canary" ]]; then
                local canary
                canary=$(<"$dir/canary")
                if [[ -f "$canary" ]]; then
                        rm -f "$canary" "$dir/canary"
                else
                        box__log "HOST /tmp CANARY $canary IS GONE: the box touched the host's /tmp"
                        rc=1
                fi
        fi
        # Nothing is ever mounted in the host's namespace; make sure of it.
        if grep -qF " $dir/" /proc/self/mountinfo; then
                box__log "host mount below $dir found; detaching"
                grep -F " $dir/" /proc/self/mountinfo | awk '{print $5}' | sort -r |
                        while read -r mp; do umount -l "$mp"; done
        fi
        rm -f "$dir/pid" "$dir/pid.start" "$dir/script.pid" "$dir/cgmounts"
        return $rc
}

box__main() {
        local cmd=${1:-}
        shift || true
        case "$cmd" in
        start) box_start "$@";;
        wait)  box_wait "$@";;
        run)   box_run "$@";;
        install) box_install "$@";;
        stop)  box_stop "$@";;
        pid)   box_pid1 "$@";;
        __init1) box__init1 "$@";;
        __init2) box__init2 "$@";;
        *) echo "usage: ${0##*/} start|wait|run|install|stop|pid DIR [ARGS...]" >&2; exit 2;;
        esac
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
        box__main "$@"
fi
