/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The late bind of a sandbox built ahead of its run (exec-request.h, KeeperBind): its workspace
 * (and its code) mounted into the sandbox once the request is known, with no privilege but the
 * one the daemon's uid has anyway: the ownership of the sandbox's user namespace.
 *
 * A child of the keeper:
 *  1. opens, from the host, the sandbox's mount namespace, the user namespace that owns it
 *     (NS_GET_USERNS), and the mount points /workspace (and the code file) of the sandbox's tree
 *     (through /proc/<pid 1>/root, O_PATH, no symlink followed): still empty, nothing of the
 *     payload has run;
 *  2. joins that user namespace (as its owner's uid it has every capability there) and makes a
 *     mount namespace of its own in it, a copy of the daemon's, where it may clone mounts:
 *     open_tree(OPEN_TREE_CLONE) of the workspace by its path, checked to be the very directory
 *     whose lease the daemon holds (device and inode), made nosuid and nodev as bwrap's --bind
 *     makes it (the code: read-only too);
 *  3. joins the sandbox's mount namespace and moves the detached tree onto /workspace.
 * A mount made so is the only one at /workspace (no slot, no stack, no propagation to or from
 * it); the sandbox sees that one directory and nothing else of the host. The clone is of one
 * directory, not recursive: nothing mounted below it on the host comes along.
 */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/mount.h>
#include <linux/nsfs.h>

#include "exec-request.h"
#include "keeper-bind.h"

#define SANDBOX_WORKSPACE_REL "workspace"
#define SANDBOX_CODE_REL ".sandbox/code"

#ifndef MOUNT_ATTR_SIZE_VER0
#define MOUNT_ATTR_SIZE_VER0 32
#endif

static int open_tree_(int dfd, const char *path, unsigned flags) {
        return (int) syscall(SYS_open_tree, dfd, path, flags);
}

static int move_mount_(int from_dfd, const char *from, int to_dfd, const char *to, unsigned flags) {
        return (int) syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}

static int mount_setattr_(int dfd, const char *path, unsigned flags, struct mount_attr *a) {
        return (int) syscall(SYS_mount_setattr, dfd, path, flags, a, sizeof(*a));
}

/* A detached clone of the directory or file at @path (no symlink at its end), with @attr set;
 * with @dev/@ino, it must be that inode. Return: its fd, or -errno. */
static int clone_tree(const char *path, uint64_t attr, bool check, uint64_t dev, uint64_t ino) {
        struct mount_attr a = { .attr_set = attr };
        struct stat st;
        int fd;

        fd = open_tree_(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || (check && ((uint64_t) st.st_dev != dev || (uint64_t) st.st_ino != ino))) {
                (void) close(fd);
                return -ESTALE;
        }
        if (mount_setattr_(fd, "", AT_EMPTY_PATH, &a) < 0) {
                int r = -errno;
                (void) close(fd);
                return r;
        }
        return fd;
}

/* In the child: the whole bind. Return: 0 or an errno. */
static int bind_child(const KeeperBind *b) {
        char path[64];
        int mnt_ns, user_ns, root, ws_target, code_target = -1, ws_tree, code_tree = -1;
        bool code = b->code_path[0] != '\0';

        (void) snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int) b->init_pid);
        mnt_ns = open(path, O_RDONLY | O_CLOEXEC);
        if (mnt_ns < 0)
                return errno;
        user_ns = ioctl(mnt_ns, NS_GET_USERNS);
        if (user_ns < 0)
                return errno;
        (void) snprintf(path, sizeof(path), "/proc/%d/root", (int) b->init_pid);
        root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return errno;
        ws_target = openat(root, SANDBOX_WORKSPACE_REL, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws_target < 0)
                return errno;
        if (code) {
                code_target = openat(root, SANDBOX_CODE_REL, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (code_target < 0)
                        return errno;
        }

        if (setns(user_ns, CLONE_NEWUSER) < 0 || unshare(CLONE_NEWNS) < 0)
                return errno;
        ws_tree = clone_tree(b->ws_path, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true, b->ws_dev, b->ws_ino);
        if (ws_tree < 0)
                return -ws_tree;
        if (code) {
                code_tree = clone_tree(b->code_path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                       false, 0, 0);
                if (code_tree < 0)
                        return -code_tree;
        }
        if (setns(mnt_ns, CLONE_NEWNS) < 0)
                return errno;
        if (move_mount_(ws_tree, "", ws_target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return errno;
        if (code && move_mount_(code_tree, "", code_target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return errno;
        return 0;
}

int keeper_bind(const KeeperBind *b) {
        int p[2], e = 0;
        ssize_t k;
        pid_t pid;

        if (b->magic != KEEPER_BIND_MAGIC || b->init_pid <= 1 || b->ws_path[0] != '/' ||
            memchr(b->ws_path, '\0', sizeof(b->ws_path)) == NULL ||
            memchr(b->code_path, '\0', sizeof(b->code_path)) == NULL ||
            (b->code_path[0] != '\0' && b->code_path[0] != '/'))
                return -EINVAL;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                e = errno;
                (void) close(p[0]);
                (void) close(p[1]);
                return -e;
        }
        if (pid == 0) {
                (void) close(p[0]);
                e = bind_child(b);
                /* Said before the exit: the end of the child's own mount namespace (an unmount of
                 * all its mounts and an RCU grace period, milliseconds) is nobody's wait. */
                _exit(write(p[1], &e, sizeof(e)) == (ssize_t) sizeof(e) ? 0 : 1);
        }
        (void) close(p[1]);
        do
                k = read(p[0], &e, sizeof(e));
        while (k < 0 && errno == EINTR);
        (void) close(p[0]);
        /* Reaped later, with the sandbox (the keeper reaps all its children at the end). */
        if (k != (ssize_t) sizeof(e))
                return -EIO;
        return -e;
}
