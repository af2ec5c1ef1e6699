/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Bringing the watcher's index in line with the tree: one name (node_update()), one directory
 * (quota_dir_sync(), quota_dir_refresh()), opening an indexed directory beneath the root by its index path
 * (quota_dir_open()), and putting the inotify watch on a directory (quota_watch_add()). Everything the index
 * learns from disk is read here, through fds opened beneath the workspace root without following
 * symlinks. Calls quota-index.c and util/.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/dirent-util.h"
#include "util/macro.h"
#include "workspace/quota-internal.h"

/* Events that can change the blocks of a name, or which inode a name refers to. IN_EXCL_UNLINK:
 * writes through a name already unlinked cannot be attributed by name anyway (an inode still
 * linked elsewhere is caught by the sweep), so do not queue their events. */
#define QUOTA_WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | \
                          IN_CLOSE_WRITE | IN_ATTRIB | IN_ONLYDIR | IN_EXCL_UNLINK)

int quota_watch_add(QuotaWatch *w, int fd) {
        char path[sizeof("/proc/self/fd/") + 12];
        int wd;

        if (w->n_watches >= w->limits.max_watches) {
                w->want_degrade = true;
                return -ENOSPC;
        }
        /* Through the magic link: exactly the inode we opened and checked, no path walk. */
        (void) snprintf(path, sizeof(path), "/proc/self/fd/%i", fd);
        wd = inotify_add_watch(w->fd, path, QUOTA_WATCH_MASK);
        if (wd < 0) {
                /* ENOSPC: max_user_watches; ENOMEM; ENOENT: no /proc. Only the index depends on it. */
                w->want_degrade = true;
                return negative_errno();
        }
        return wd;
}

/*
 * The first step of node_update(): stat @name in @parent (open at @pfd) and, if it is a directory
 * to descend into, open it. What needs nothing more is done here: a name gone, a parent we may not
 * search, a directory below the depth cap, an indexed and watched directory (@old) that is not to
 * be re-read. Return: 1 with @ret_st and @ret_fd (-EBADF for a non-directory, or a directory we
 * may not open) to go on; 0 if done; -EAGAIN if the name kept changing type under us; or a fatal
 * -errno.
 */
static int node_lookup(QuotaWatch *w, Dir *parent, int pfd, const char *name, Node *old, bool recursive,
                       uint32_t gen, struct stat *ret_st, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        for (unsigned attempt = 0;; attempt++) {
                if (attempt >= 3)
                        return -EAGAIN;

                w->restats++;
                if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT) {
                                if (old)
                                        quota_node_drop(w, old);
                                return 0;
                        }
                        if (errno == EACCES) {
                                quota_dir_set_unreadable(w, parent, true);
                                return 0;
                        }
                        return negative_errno();
                }
                if (!S_ISDIR(st.st_mode))
                        break;
                if (parent->depth >= w->limits.max_depth) {
                        quota_dir_set_truncated(w, parent, true);
                        if (old)
                                quota_node_drop(w, old);
                        return 0;
                }
                if (!recursive && old && old->dir && old->dir->wd >= 0 && !old->dir->unreadable &&
                    inode_is(old->inode, &st)) {
                        /* The indexed, watched directory: its content is kept current by its own
                         * watch; only its own blocks may have changed. (Were it deleted and the
                         * inode number reused, its IN_IGNORED, still queued, brings us back.) */
                        old->gen = gen;
                        watch_set_inode_bytes(w, old->inode, stat_bytes(&st));
                        return 0;
                }
                fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0)
                        break;
                if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
                        continue;               /* changed between stat and open: look again */
                if (errno != EACCES)
                        return negative_errno();
                break;                          /* a directory we may not open: unreadable */
        }

        *ret_st = st;
        *ret_fd = STEAL_FD(fd);
        return 1;
}

/* A non-directory @name in @parent, described by @st, indexed as @old or not at all. */
static int node_update_file(QuotaWatch *w, Dir *parent, Node *old, const char *name, const struct stat *st,
                            uint32_t gen) {
        int r;

        if (old && old->dir) {
                quota_node_drop(w, old);
                old = NULL;
        }
        if (old) {
                old->gen = gen;
                r = quota_node_set_inode(w, old, st);
                if (r < 0)
                        return r;
                quota_sparse_update(w, old, st);
                return 0;
        }
        if (quota_index_full(w))
                return 0;
        r = quota_node_new_file(w, parent, name, st, &old);
        if (r < 0)
                return r;
        old->gen = gen;
        quota_sparse_update(w, old, st);
        return 0;
}

/* A directory @name in @parent that we may not open (EACCES): count the directory's own blocks,
 * flag its content as unknown (what is indexed below it stays, for when it becomes readable
 * again). */
static int node_update_unreadable_dir(QuotaWatch *w, Dir *parent, Node *old, const char *name,
                                      const struct stat *st, uint32_t gen) {
        Dir *d;
        int r;

        if (old && old->dir && inode_is(old->inode, st)) {
                old->gen = gen;
                quota_dir_set_unreadable(w, old->dir, true);
                return quota_node_set_inode(w, old, st);
        }
        if (old)
                quota_node_drop(w, old);
        if (quota_index_full(w))
                return 0;
        r = quota_node_new_dir(w, parent, name, st, -1, &d);
        if (r < 0)
                return r;
        d->node->gen = gen;
        quota_dir_set_unreadable(w, d, true);
        return 0;
}

/* The indexed directory @d (the kernel handed out its existing watch) is now @name in @parent,
 * open at @dir_fd (taken over) and described by @st: re-attach it there, read it if @recursive
 * or if it was unreadable. */
static int dir_update_known(QuotaWatch *w, Dir *d, Dir *parent, Node *old, const char *name, int dir_fd,
                            const struct stat *st, bool recursive, uint32_t gen) {
        _cleanup_close_ int fd = dir_fd;
        int r;

        if (d == parent || quota_dir_is_below(w, parent, d)) {
                /* The index thinks @parent is inside @d: it missed a move. */
                w->need_resync = true;
                return 0;
        }
        if (old && old != d->node)
                quota_node_drop(w, old);
        r = quota_dir_move(w, d, parent, name);
        if (r < 0)
                return r;
        d->node->gen = gen;
        r = quota_node_set_inode(w, d->node, st);
        if (r < 0)
                return r;
        if (!recursive && !d->unreadable)
                return 0;
        quota_dir_set_unreadable(w, d, false);
        return quota_dir_sync(w, d, STEAL_FD(fd), recursive);
}

/* A directory @name in @parent, open at @dir_fd (taken over), indexed as @old or not at all:
 * watch it, then re-attach it if the index knows it by its watch, else index it anew and read
 * it. */
static int node_update_dir(QuotaWatch *w, Dir *parent, Node *old, const char *name, int dir_fd, bool recursive,
                           uint32_t gen) {
        _cleanup_close_ int fd = dir_fd;
        struct stat st;
        Dir *d;
        int r, wd;

        w->restats++;
        if (fstat(fd, &st) < 0)
                return negative_errno();

        wd = quota_watch_add(w, fd);
        if (wd < 0)
                return 0;                       /* degrading: the index is about to go */

        /* The same directory as an indexed one? (The kernel hands out its existing watch.) */
        d = quota_wd_find(w, wd);
        if (d)
                return dir_update_known(w, d, parent, old, name, STEAL_FD(fd), &st, recursive, gen);

        if (old)
                quota_node_drop(w, old);
        if (quota_index_full(w)) {
                (void) inotify_rm_watch(w->fd, wd);
                return 0;
        }
        r = quota_node_new_dir(w, parent, name, &st, wd, &d);
        if (r < 0) {
                (void) inotify_rm_watch(w->fd, wd);
                return r;
        }
        d->node->gen = gen;
        /* New here (created, or moved in whole): its watch is in place, now read what it holds. */
        return quota_dir_sync(w, d, STEAL_FD(fd), true);
}

/*
 * Bring @name in @parent (open at @pfd) in line with the tree. New directories are watched, then
 * scanned; known ones (same watch descriptor) are re-attached where they are now, and scanned
 * only if @recursive. Return: 0, -EAGAIN if the name kept changing type under us (retry later),
 * or a fatal -errno.
 */
static int node_update(QuotaWatch *w, Dir *parent, int pfd, const char *name, bool recursive, uint32_t gen) {
        Node *old = quota_node_find(w, parent, name);
        struct stat st;
        int r, fd;

        r = node_lookup(w, parent, pfd, name, old, recursive, gen, &st, &fd);
        if (r <= 0)
                return r;
        if (!S_ISDIR(st.st_mode))
                return node_update_file(w, parent, old, name, &st, gen);
        if (fd < 0)
                return node_update_unreadable_dir(w, parent, old, name, &st, gen);
        return node_update_dir(w, parent, old, name, fd, recursive, gen);
}

/*
 * Re-read the directory @d, open at @fd (taken over): every name is updated, names gone are
 * dropped. Subdirectories already indexed are descended into only if @recursive.
 */
int quota_dir_sync(QuotaWatch *w, Dir *d, int fd, bool recursive) {
        _cleanup_(closedirp) DIR *dir = NULL;
        uint32_t gen = ++w->gen;
        struct dirent *de;
        int r;

        r = opendir_fd(fd, &dir);
        if (r < 0)
                return r;

        quota_dir_set_truncated(w, d, false);
        for (;;) {
                if (w->want_degrade)
                        return 0;

                r = readdir_no_dot(dir, &de);
                if (r == 0)
                        break;
                if (r == -EACCES) {
                        quota_dir_set_unreadable(w, d, true);
                        return 0;
                }
                if (r < 0)
                        return r;

                r = node_update(w, d, dirfd(dir), de->d_name, recursive, gen);
                if (r == -EAGAIN) {
                        quota_dir_mark_dirty(w, d, de->d_name);
                        Node *n = quota_node_find(w, d, de->d_name);
                        if (n)
                                n->gen = gen;   /* keep it until the retry */
                        continue;
                }
                if (r < 0)
                        return r;
        }

        /* What was not seen is gone. Unless the directory turned out unreadable half-way. */
        if (!d->unreadable && !w->want_degrade)
                for (Node *c = d->children, *next; c; c = next) {
                        next = c->sib_next;
                        if (c->gen != gen)
                                quota_node_drop(w, c);
                }
        return 0;
}

/*
 * Open the indexed directory @d beneath the root, without following symlinks, and check that it
 * is still the indexed inode. Return: the fd; -ESTALE if the index path no longer leads to it
 * (a rename whose events are still queued); -ENOLINK if @d is detached from the index (in limbo);
 * -EACCES; other -errno.
 */
int quota_dir_open(QuotaWatch *w, Dir *d) {
        _cleanup_free_ Node **chain = NULL;
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        size_t n = 0;

        chain = calloc(w->limits.max_depth + 2, sizeof(Node *));
        buf = malloc(PATH_MAX);
        if (!chain || !buf)
                return -ENOMEM;

        for (Dir *i = d; i != w->root; i = i->node->parent) {
                if (!i->node->parent || i->node->parent == &w->limbo)
                        return -ENOLINK;        /* detached this tick: found again, or destroyed */
                if (n > w->limits.max_depth)
                        return -ESTALE;
                chain[n++] = i->node;
        }

        fd = openat(w->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();

        while (n > 0) {
                size_t len = 0;
                int nfd;

                /* As many components as fit in one path (a deep tree is longer than PATH_MAX). */
                do {
                        const char *c = chain[n - 1]->name;
                        size_t l = strlen(c);

                        if (len > 0 && len + 1 + l >= PATH_MAX)
                                break;
                        if (len > 0)
                                buf[len++] = '/';
                        memcpy(buf + len, c, l);
                        len += l;
                        n--;
                } while (n > 0 && w->use_openat2);
                buf[len] = '\0';

                if (w->use_openat2) {
                        struct open_how how = {
                                .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
                        };

                        nfd = (int) syscall(SYS_openat2, fd, buf, &how, sizeof(how));
                        if (nfd < 0 && (errno == ENOSYS || errno == EPERM) && w->use_openat2) {
                                /* Kernel < 5.6 or a seccomp filter: one component at a time. */
                                w->use_openat2 = false;
                                return -EAGAIN;
                        }
                } else
                        nfd = openat(fd, buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0) {
                        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV ||
                            errno == EAGAIN)
                                return -ESTALE;
                        return negative_errno();
                }
                (void) safe_close(fd);
                fd = nfd;
        }

        w->restats++;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!inode_is(d->node->inode, &st))
                return -ESTALE;
        return STEAL_FD(fd);
}

/* Process one directory of the dirty set (all of it with @all, else @names). Return: 0, -ESTALE
 * or -ENOLINK to retry, or a fatal -errno. */
int quota_dir_refresh(QuotaWatch *w, Dir *d, bool all, char **names, size_t n_names) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        fd = quota_dir_open(w, d);
        if (fd == -EAGAIN)
                fd = quota_dir_open(w, d);            /* the openat2() fallback just kicked in */
        if (fd == -EACCES) {
                quota_dir_set_unreadable(w, d, true);
                return 0;
        }
        if (fd < 0)
                return fd;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        r = quota_node_set_inode(w, d->node, &st);    /* the directory's own blocks grow with its entries */
        if (r < 0)
                return r;

        if (d->wd < 0) {
                /* Unreadable before, or its watch was lost: watch it again and read it whole. */
                int wd = quota_watch_add(w, fd);

                if (wd < 0)
                        return 0;
                if (quota_wd_find(w, wd)) {
                        (void) inotify_rm_watch(w->fd, wd);
                        w->need_resync = true;
                        return 0;
                }
                r = hashmap_add(&w->wds, &d->link, (uint64_t) wd);
                if (r < 0) {
                        (void) inotify_rm_watch(w->fd, wd);
                        return r;
                }
                d->wd = wd;
                w->n_watches++;
                quota_dir_set_unreadable(w, d, false);
                return quota_dir_sync(w, d, STEAL_FD(fd), true);
        }

        if (all || d->truncated || d->unreadable) {
                quota_dir_set_unreadable(w, d, false);
                return quota_dir_sync(w, d, STEAL_FD(fd), false);
        }

        for (size_t i = 0; i < n_names && !w->want_degrade; i++) {
                r = node_update(w, d, fd, names[i], false, w->gen);
                if (r == -EAGAIN) {
                        quota_dir_mark_dirty(w, d, names[i]);
                        continue;
                }
                if (r < 0)
                        return r;
        }
        return 0;
}
