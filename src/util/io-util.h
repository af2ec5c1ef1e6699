/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Blocking I/O on file descriptors: read()/write() loops that retry after EINTR and continue
 * after short counts, a whole small file read (below a directory fd, or bounded by a size limit),
 * fsync() of a directory entry. Generic helpers: no policy, no logging; they call only libc.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * loop_read() - read() into @buf until @n bytes are read or end of file, retrying after EINTR
 * and continuing after short reads. Meant for blocking fds (EAGAIN is an error like any other).
 * Return: the bytes read (fewer than @n only at end of file) or -errno.
 */
ssize_t loop_read(int fd, void *buf, size_t n);

/* loop_pread() - loop_read() with pread() from offset @off on: the file position stays as it is. */
ssize_t loop_pread(int fd, void *buf, size_t n, uint64_t off);

/*
 * errno_from_ssize() - the negative result of loop_read() (any -errno as ssize_t) as an int, to
 * return it: errno values are below 4096, which the compiler cannot know from a plain cast.
 */
static inline int errno_from_ssize(ssize_t n) {
        return n < -4095 ? -EIO : (int) n;
}

/*
 * loop_write() - write() all @n bytes of @buf, retrying after EINTR and continuing after short
 * writes. Return: 0, or -errno (-EIO if write() returns 0).
 */
int loop_write(int fd, const void *buf, size_t n);

/* The prefix of write_file_atomic_at()'s temporary names (a store's clean-up removes them). */
#define ATOMIC_TMP_PREFIX ".#"

/*
 * write_file_atomic_at() - @size bytes of @data as @name of @dfd, mode @mode, atomically: a
 * temporary file ATOMIC_TMP_PREFIX + 16 random hex digits (so concurrent writers of one
 * directory never meet), fsync(), rename() over @name, fsync(@dfd). On failure the temporary
 * file is removed and @name is unchanged. Return: 0 or -errno.
 */
int write_file_atomic_at(int dfd, const char *name, const void *data, size_t size, mode_t mode);

/* fsync_at() - open @name of @dfd (never following a symlink) and fsync() it. Return: 0 or -errno. */
int fsync_at(int dfd, const char *name);

/*
 * read_file_at() - the whole regular file @name of @dfd (opened O_NOFOLLOW|O_NONBLOCK), at most
 * @max bytes, into a NUL-terminated buffer to free(). A file that is not regular (or a symlink)
 * is -EIO, one over @max -E2BIG, one that changed size while being read -EIO.
 * Return: 0 or -errno.
 */
int read_file_at(int dfd, const char *name, uint64_t max, char **ret, size_t *ret_size);

typedef enum ReadFileFlags {
        /* Read up to @max + 1 bytes whatever fstat() said: a file with more (it grew) is -EFBIG. */
        READ_FILE_UP_TO_MAX = 1 << 0,
        /* The buffer is zeroed first and wiped before it is freed on failure (secrets). */
        READ_FILE_SECRET    = 1 << 1,
} ReadFileFlags;

/*
 * read_file_limited() - the whole regular file @path (relative to @dfd, or AT_FDCWD), opened with
 * O_RDONLY|O_CLOEXEC|@open_flags, at most @max bytes, into a NUL-terminated buffer to free().
 * Without READ_FILE_UP_TO_MAX the size fstat() reported is read (a file that grew meanwhile is
 * cut there). A file that is not regular is -EBADFD, one over @max -EFBIG. @ret_size may be NULL
 * (a text file: the NUL ends it). Return: 0 or -errno (those of open(), fstat() and read() as they are).
 */
int read_file_limited(int dfd, const char *path, int open_flags, size_t max, ReadFileFlags flags,
                      char **ret, size_t *ret_size);
