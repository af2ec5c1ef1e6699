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
 * Steps 1 and 2 up to the clone need only the sandbox, not the request: once the sandbox is ready
 * the daemon may ask for them ahead (KEEPER_BIND_PREPARE_MAGIC), and a child prepared so waits for
 * the bind with its namespaces joined, which takes the fork and most of the system calls off the
 * request path. It serves that sandbox's one bind (same pid 1, same shape) and nothing else.
 * A mount made so is the only one at /workspace (no slot, no stack, no propagation to or from
 * it); the sandbox sees that one directory and nothing else of the host. The clone is of one
 * directory, not recursive: nothing mounted below it on the host comes along.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
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

/* What the child holds between its two steps. */
typedef struct BindTargets {
        int mnt_ns, ws_target, code_target;
        bool code;
} BindTargets;

/* Step 1 and the start of step 2, in the child: the sandbox's namespaces and mount points opened
 * (from the host), then its user namespace joined and a mount namespace of our own made in it.
 * Return: 0 or an errno. */
static int bind_open(pid_t init_pid, bool code, BindTargets *t) {
        char path[64];
        int user_ns, root;

        *t = (BindTargets) { .mnt_ns = -1, .ws_target = -1, .code_target = -1, .code = code };
        (void) snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int) init_pid);
        t->mnt_ns = open(path, O_RDONLY | O_CLOEXEC);
        if (t->mnt_ns < 0)
                return errno;
        user_ns = ioctl(t->mnt_ns, NS_GET_USERNS);
        if (user_ns < 0)
                return errno;
        (void) snprintf(path, sizeof(path), "/proc/%d/root", (int) init_pid);
        root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return errno;
        t->ws_target = openat(root, SANDBOX_WORKSPACE_REL, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (t->ws_target < 0)
                return errno;
        if (code) {
                t->code_target = openat(root, SANDBOX_CODE_REL, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (t->code_target < 0)
                        return errno;
        }
        (void) close(root);
        if (setns(user_ns, CLONE_NEWUSER) < 0 || unshare(CLONE_NEWNS) < 0)
                return errno;
        (void) close(user_ns);
        return 0;
}

/* The rest of step 2 and step 3: the clones made, the sandbox's mount namespace joined, the
 * clones moved onto their mount points. Return: 0 or an errno. */
static int bind_finish(const KeeperBind *b, const BindTargets *t) {
        int ws_tree, code_tree = -1;

        ws_tree = clone_tree(b->ws_path, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true, b->ws_dev, b->ws_ino);
        if (ws_tree < 0)
                return -ws_tree;
        if (t->code) {
                code_tree = clone_tree(b->code_path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                                       false, 0, 0);
                if (code_tree < 0)
                        return -code_tree;
        }
        if (setns(t->mnt_ns, CLONE_NEWNS) < 0)
                return errno;
        if (move_mount_(ws_tree, "", t->ws_target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return errno;
        if (t->code && move_mount_(code_tree, "", t->code_target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return errno;
        return 0;
}

static bool bind_valid(const KeeperBind *b, uint32_t magic) {
        return b->magic == magic && b->init_pid > 1 &&
               memchr(b->ws_path, '\0', sizeof(b->ws_path)) != NULL &&
               memchr(b->code_path, '\0', sizeof(b->code_path)) != NULL &&
               (magic == KEEPER_BIND_PREPARE_MAGIC || b->ws_path[0] == '/') &&
               (b->code_path[0] == '\0' || b->code_path[0] == '/');
}

/* The child prepared ahead (keeper_bind_prepare()): its pid, where the bind goes to it, where its
 * word comes from, and what it was prepared for. */
static struct {
        pid_t pid;
        int request_fd, answer_fd;
        pid_t init_pid;
        bool code;
} prepared = { .request_fd = -1, .answer_fd = -1 };

static void prepared_close(void) {
        if (prepared.request_fd >= 0)
                (void) close(prepared.request_fd);
        if (prepared.answer_fd >= 0)
                (void) close(prepared.answer_fd);
        prepared.request_fd = prepared.answer_fd = -1;
        prepared.pid = 0;
}

void keeper_bind_abandon(void) {
        if (prepared.pid > 0)
                (void) kill(prepared.pid, SIGKILL);
        prepared_close();
}

/* Read exactly @size bytes. Return: true if all came. */
static bool read_all(int fd, void *buf, size_t size) {
        for (size_t done = 0; done < size;) {
                ssize_t k = read(fd, (char *) buf + done, size - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return false;
                done += (size_t) k;
        }
        return true;
}

/* The prepared child: opened and joined, it waits for the bind (or the end of the pipe). */
static _Noreturn void prepared_child(pid_t init_pid, bool code, int request_fd, int answer_fd) {
        static KeeperBind b;
        BindTargets t;
        int e;

        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        (void) prctl(PR_SET_NAME, "keeper-bind");   /* ps -o comm: what it is (its args: the keeper's) */
        e = bind_open(init_pid, code, &t);
        if (!read_all(request_fd, &b, sizeof(b)))
                _exit(0);   /* not used */
        if (e == 0 && (!bind_valid(&b, KEEPER_BIND_MAGIC) || b.init_pid != init_pid || (b.code_path[0] != '\0') != code))
                e = EINVAL;
        if (e == 0)
                e = bind_finish(&b, &t);
        _exit(write(answer_fd, &e, sizeof(e)) == (ssize_t) sizeof(e) ? 0 : 1);
}

int keeper_bind_prepare(const KeeperBind *p) {
        int req[2], ans[2];
        pid_t pid;

        if (!bind_valid(p, KEEPER_BIND_PREPARE_MAGIC) || prepared.pid > 0)
                return -EINVAL;
        if (pipe2(req, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(ans, O_CLOEXEC) < 0) {
                int r = -errno;
                (void) close(req[0]);
                (void) close(req[1]);
                return r;
        }
        pid = fork();
        if (pid == 0) {
                (void) close(req[1]);
                (void) close(ans[0]);
                prepared_child(p->init_pid, p->code_path[0] != '\0', req[0], ans[1]);
        }
        (void) close(req[0]);
        (void) close(ans[1]);
        if (pid < 0) {
                int r = -errno;
                (void) close(req[1]);
                (void) close(ans[0]);
                return r;
        }
        prepared.pid = pid;
        prepared.request_fd = req[1];
        prepared.answer_fd = ans[0];
        prepared.init_pid = p->init_pid;
        prepared.code = p->code_path[0] != '\0';
        return 0;
}

/* The bind through the prepared child. Return: its errno (0: bound), or -1 if it could not be
 * asked (it is gone: a new child then does the whole bind). */
static int bind_prepared(const KeeperBind *b) {
        const char *p = (const char *) b;
        int e = -1;

        if (prepared.pid <= 0 || prepared.init_pid != b->init_pid || prepared.code != (b->code_path[0] != '\0')) {
                keeper_bind_abandon();
                return -1;
        }
        for (size_t done = 0; done < sizeof(*b);) {
                ssize_t k = write(prepared.request_fd, p + done, sizeof(*b) - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        keeper_bind_abandon();
                        return -1;
                }
                done += (size_t) k;
        }
        if (!read_all(prepared.answer_fd, &e, sizeof(e)))
                e = EIO;   /* it took the bind and died: the bind may be half done, never again */
        prepared_close();   /* reaped later, with the sandbox */
        return e;
}

/* In a new child: the whole bind. Return: 0 or an errno. */
static int bind_child(const KeeperBind *b) {
        BindTargets t;
        int e;

        e = bind_open(b->init_pid, b->code_path[0] != '\0', &t);
        return e != 0 ? e : bind_finish(b, &t);
}

int keeper_bind(const KeeperBind *b) {
        int p[2], e = 0;
        ssize_t k;
        pid_t pid;

        if (!bind_valid(b, KEEPER_BIND_MAGIC))
                return -EINVAL;
        e = bind_prepared(b);
        if (e >= 0)
                return -e;
        e = 0;
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
