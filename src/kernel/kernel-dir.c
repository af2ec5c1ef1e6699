/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A kernel's directory <runtime>/kernels/<id> is bound writable at /run/kernel (the kernel binds
 * its ipc sockets there) and lives on the daemon's runtime tmpfs, which a hostile kernel could
 * fill (RLIMIT_FSIZE bounds one file, not their number). An inotify watch on it (sd-event) looks
 * at it whenever an entry is made, written or moved in: more entries than the five sockets, the
 * connection file and a spare, anything but sockets and regular files (a directory, a FIFO, a
 * symbolic link), or more than KERNEL_DIR_MAX_BYTES of regular files (size or blocks, whichever
 * is larger: a sparse file counts at its size), and the kernel is ended with reason
 * "misbehaved" and a journal entry saying what it made; the directory goes with it.
 *
 * A kernel's processes are killed asynchronously: one may still create files while the directory
 * is being removed. kernel_dir_remove() tries again every 100 ms until it is gone (a floating
 * event source that outlives the Kernel).
 */

#include <dirent.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel/kernel-internal.h"
#include "util/log-ids.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

#define KERNEL_DIR_RETRY_USEC (100 * USEC_PER_MSEC)
#define KERNEL_DIR_RETRIES 300

#define KERNEL_DIR_MASK (IN_CREATE | IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE)

typedef struct KernelDirUsage {
        unsigned entries;
        uint64_t bytes;
        const char *odd;                 /* the kind of an entry that has no business there */
} KernelDirUsage;

static const char *odd_kind(mode_t mode) {
        if (S_ISDIR(mode))
                return "directory";
        if (S_ISLNK(mode))
                return "symbolic link";
        if (S_ISFIFO(mode))
                return "FIFO";
        return "device or other file";
}

/* What the directory holds; stops counting once it is over a limit. Return: 0, or -errno when it
 * cannot be read (gone: the kernel is ending). */
static int kernel_dir_usage(Kernel *k, KernelDirUsage *u) {
        _cleanup_close_ int fd = openat(k->manager->dir_fd, k->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct dirent *de;
        DIR *d;

        *u = (KernelDirUsage) {};
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d)
                return -errno;
        fd = -EBADF;     /* the DIR's now */
        while ((de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;        /* removed meanwhile */
                u->entries++;
                if (S_ISREG(st.st_mode))
                        u->bytes += MAX((uint64_t) st.st_size, (uint64_t) st.st_blocks * 512);
                else if (!S_ISSOCK(st.st_mode))
                        u->odd = odd_kind(st.st_mode);
                if (u->odd || u->entries > KERNEL_DIR_MAX_ENTRIES || u->bytes > KERNEL_DIR_MAX_BYTES)
                        break;
        }
        closedir(d);
        return 0;
}

static int on_dir_event(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        Kernel *k = userdata;
        KernelDirUsage u;

        if (k->state == KERNEL_DEAD || kernel_dir_usage(k, &u) < 0)
                return 0;
        if (!u.odd && u.entries <= KERNEL_DIR_MAX_ENTRIES && u.bytes <= KERNEL_DIR_MAX_BYTES)
                return 0;
        log_struct(LOG_WARNING,
                   "SANDBOX_KERNEL_ID=%s", k->id,
                   "SANDBOX_WORKSPACE=%s", k->workspace_id,
                   "SANDBOX_KERNEL_DIR_ENTRIES=%u", u.entries,
                   "SANDBOX_KERNEL_DIR_BYTES=%" PRIu64, u.bytes,
                   "MESSAGE=Kernel '%s' filled its socket directory (%s%s%u entries, %" PRIu64 " bytes of files; "
                   "at most %u and %u are allowed): ending it.", k->id, u.odd ?: "", u.odd ? ", " : "",
                   u.entries, u.bytes, (unsigned) KERNEL_DIR_MAX_ENTRIES, (unsigned) KERNEL_DIR_MAX_BYTES);
        kernel_end(k, KERNEL_END_MISBEHAVED);
        return 0;
}

int kernel_dir_watch(Kernel *k) {
        _cleanup_close_ int fd = -EBADF;

        if (k->dir_watch)
                return 0;
        fd = openat(k->manager->dir_fd, k->id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* sd-event takes the inode from @fd (it keeps no reference to the descriptor). */
        return sd_event_add_inotify_fd(k->manager->event, &k->dir_watch, fd, KERNEL_DIR_MASK, on_dir_event, k);
}

typedef struct KernelDirRemoval {
        int parent_fd;
        unsigned tries;
        char id[];
} KernelDirRemoval;

/* The source's destroy callback: @x goes with its timer. */
static void removal_free(void *userdata) {
        KernelDirRemoval *x = userdata;

        safe_close(x->parent_fd);
        free(x);
}

static int on_removal_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        KernelDirRemoval *x = userdata;
        int r = rm_rf_at(x->parent_fd, x->id);

        if (r >= 0 || ++x->tries >= KERNEL_DIR_RETRIES) {
                if (r < 0)
                        log_warning_errno(r, "The directory of kernel '%s' could not be removed: %m", x->id);
                /* The only reference: freed once this callback returns, and @x with it. */
                sd_event_source_disable_unref(s);
                return 0;
        }
        (void) sd_event_source_set_time_relative(s, KERNEL_DIR_RETRY_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

void kernel_dir_remove(Kernel *k) {
        KernelManager *km = k->manager;
        _cleanup_free_ KernelDirRemoval *x = NULL;
        sd_event_source *s = NULL;

        if (rm_rf_at(km->dir_fd, k->id) >= 0)
                return;
        x = malloc(sizeof(*x) + strlen(k->id) + 1);
        if (!x)
                return;
        x->tries = 0;
        strcpy(x->id, k->id);
        x->parent_fd = fcntl(km->dir_fd, F_DUPFD_CLOEXEC, 3);
        if (x->parent_fd < 0 ||
            sd_event_add_time_relative(km->event, &s, CLOCK_MONOTONIC, KERNEL_DIR_RETRY_USEC, USEC_PER_MSEC,
                                       on_removal_retry, x) < 0) {
                log_warning("The directory of kernel '%s' could not be removed.", k->id);
                safe_close(x->parent_fd);
                return;
        }
        /* Owned by its own timer from now on (it outlives the kernel). */
        (void) sd_event_source_set_destroy_callback(s, removal_free);
        x = NULL;
}
