/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspace file operations for the HTTP layer: path validation, reads, atomic writes, listings
 * and removal, all relative to a workspace directory fd.
 *
 * Threat model: every path is client-supplied, and the workspace tree is written by untrusted
 * sandbox code that may swap any file or directory for a symlink (or a FIFO, a socket, a hard
 * link) at any moment, also while a read runs. Therefore:
 *   - a path string is validated once (ws_path_validate()) and resolved once, from the workspace
 *     fd, with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 *     RESOLVE_NO_XDEV) — or, where the kernel lacks openat2 (ENOSYS, < 5.6), by an equivalent
 *     walk that opens one component at a time with O_PATH|O_NOFOLLOW and checks each fd;
 *   - no symlink is ever followed, not even one pointing inside the workspace: any symlink in a
 *     path, at any component, is refused with -ELOOP;
 *   - every check is made on the opened fd (fstat), never on the name, and the fd is what is
 *     read: swapping the name afterwards changes nothing;
 *   - writes go to an unnamed (O_TMPFILE) file in the target's directory, which is linked in and
 *     renamed over the target only on commit: readers see the old file or the whole new one.
 *
 * Common errnos of the functions below:
 *   -EINVAL        the path fails ws_path_validate() (also -ENAMETOOLONG, see there)
 *   -ENOENT        a component does not exist
 *   -ENOTDIR       a non-final component is not a directory (or, for a directory operation, the
 *                  final one is not)
 *   -ELOOP         a component is a symlink (or a /proc magic link)
 *   -EXDEV         a component is on another mount than the workspace (a mount point inside it)
 *   -EACCES/-EPERM permission denied by the file system
 *   -EAGAIN        openat2 saw too many concurrent renames to guarantee a safe lookup; retry
 *   -ENOMEM        out of memory
 * Suggested HTTP mapping (api/api-files.c): EINVAL/ENAMETOOLONG 400; ELOOP/EXDEV/EMLINK/EBADFD/
 * EACCES/EPERM 403; ENOENT 404; EISDIR/ENOTDIR/ENOTEMPTY/EEXIST 409; EFBIG/E2BIG 413;
 * EDQUOT/ENOSPC 507; EAGAIN/EWOULDBLOCK 503.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Longest accepted path in bytes (PATH_MAX less the terminating NUL) and component (NAME_MAX). */
#define WS_PATH_MAX 4095
#define WS_NAME_MAX 255

/* Most entries ws_list_dir() returns; a larger directory is refused with -E2BIG. */
#define WS_LIST_MAX_ENTRIES 100000

/* Prefix of the named temporary files of the O_TMPFILE fallback; reserved (refused in paths). */
#define WS_UPLOAD_TMP_PREFIX ".sandbox-upload-"

/*
 * ws_path_validate_n() - check the client-supplied workspace path @path of @n bytes. Pure.
 * Accepted: a relative path of components separated by single '/', without a leading or trailing
 * '/', where no component is empty, "." or starts with ".." (so neither ".." nor "..x"), nor
 * starts with WS_UPLOAD_TMP_PREFIX; no NUL (an embedded NUL within @n is refused), no control
 * byte (0x01-0x1f, 0x7f), no backslash; strict UTF-8 (no overlong forms, no surrogates); each
 * component at most WS_NAME_MAX bytes, the whole at most WS_PATH_MAX bytes. The empty path means
 * the workspace root and is accepted only with @allow_empty.
 * Percent-encoding is NOT decoded here: the HTTP layer decodes exactly once before calling, so
 * "%2e%2e" is a literal six-byte file name, accepted, and it names a file inside the workspace,
 * never the parent. Names containing '%' are accepted (sandbox code creates them, e.g. wget's
 * "a%20b.pdf", and they must stay downloadable). Nothing else may decode the path again.
 * Device-like names ("dev/null", "CON", "nul") are plain names inside the workspace.
 * Return: 0 if valid, -EINVAL if malformed, -ENAMETOOLONG if a component or the whole is too long.
 */
int ws_path_validate_n(const char *path, size_t n, bool allow_empty);

/* ws_path_validate() - ws_path_validate_n() on the NUL-terminated @path (NULL is -EINVAL). */
int ws_path_validate(const char *path, bool allow_empty);

/*
 * ws_open_beneath() - resolve the validated @path (the empty path is the root itself) below the
 * directory @ws_fd without following any symlink or crossing a mount, and open it with @flags
 * (O_CLOEXEC is added; O_CREAT/O_TMPFILE are not allowed). A symlink as the final component is
 * refused with -ELOOP, also with O_PATH. With O_DIRECTORY, a final non-directory is -ENOTDIR.
 * Return: a new fd or -errno (the common errnos above).
 */
int ws_open_beneath(int ws_fd, const char *path, int flags);

/*
 * ws_file_open_read() - open the regular file @path of the workspace @ws_fd for reading.
 * The open is O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_NOCTTY (a FIFO never blocks it); then fstat() on
 * the fd decides, and O_NONBLOCK is cleared on success. The bytes read later are those of the
 * inode checked here, whatever the sandbox renames afterwards. Content may still change while it
 * is read if a sandbox runs in this workspace (use the snapshot store for a consistent copy), and
 * the file may grow: callers stop after st_size (or @max_size) bytes whatever read() offers.
 * Return: 0 with *@ret_fd (O_CLOEXEC, offset 0) and, if @ret_st is not NULL, its stat; else
 *   -EISDIR    the path is a directory
 *   -EBADFD    a FIFO, socket or device node (or any other non-regular file)
 *   -EMLINK    st_nlink > 1: a hard link, which may share its inode with a file outside
 *   -EFBIG     larger than @max_size bytes
 *   -EWOULDBLOCK  another process (the sandbox) holds a write lease on the file: a blocking
 *              open would wait /proc/sys/fs/lease-break-time (45 s) for it
 *   or a common errno above (-ELOOP for a symlink anywhere in the path).
 */
int ws_file_open_read(int ws_fd, const char *path, uint64_t max_size, int *ret_fd, struct stat *ret_st);

/*
 * ws_file_sha256() - SHA-256 of the content of @fd read with pread() from offset 0 to EOF (the
 * fd's own offset is left alone). Return: 0 with @ret filled, -EFBIG if more than @max bytes,
 * -errno on a read error.
 */
int ws_file_sha256(int fd, uint64_t max, uint8_t ret[32]);

/*
 * ws_repr_digest() - the value of a "Repr-Digest" header (RFC 9530) for the SHA-256 @d:
 * "sha-256=:<base64>:". Return: 0 with a new string in *@ret_header_value, or -ENOMEM.
 */
int ws_repr_digest(const uint8_t d[32], char **ret_header_value);

/*
 * WsWriter - one atomic upload in progress. The data goes to an unnamed O_TMPFILE file in the
 * target's directory (fallback where the file system lacks O_TMPFILE: a named file
 * WS_UPLOAD_TMP_PREFIX + 6 random characters in that directory, created O_EXCL, visible in
 * listings while the upload runs); files are created 0600, directories 0700.
 */
typedef struct WsWriter WsWriter;

/*
 * ws_writer_begin() - start writing the file @path (not empty) of the workspace @ws_fd, at most
 * @max_bytes bytes. With @mkdirs, missing parent directories are created (0700), one component
 * at a time, each opened back without following symlinks; they are removed again if the upload
 * is aborted (if still empty). The target itself is not touched until ws_writer_commit().
 * Return: 0 with *@ret, or -EISDIR if the target is an existing directory, -ENOENT for a missing
 *   parent without @mkdirs, -ENOTDIR if a parent is a file, or a common errno above.
 */
int ws_writer_begin(int ws_fd, const char *path, uint64_t max_bytes, bool mkdirs, WsWriter **ret);

/*
 * ws_writer_write() - append @n bytes. Return: 0, or -EFBIG if the total would exceed
 * max_bytes, or -errno from the file system (-ENOSPC, -EDQUOT, -EIO). After any failure the
 * writer is spent: the temporary file is already discarded and every later write or commit
 * returns the same error.
 */
int ws_writer_write(WsWriter *w, const void *p, size_t n);

/*
 * ws_writer_commit() - fsync the data, put it in place under the target name atomically (link
 * into the directory under a fresh temporary name, then renameat() over the target) and fsync
 * the directory. An existing regular file is replaced; an existing symlink is replaced by the
 * file (the symlink itself, never what it points to). If @ret_sha256 is not NULL it receives
 * the SHA-256 of the bytes written. On failure nothing is left behind.
 * Return: 0, -EISDIR if the target is (now) a directory, the writer's earlier error, or -errno.
 * The writer must still be freed with ws_writer_free(); a second commit is -EALREADY.
 */
int ws_writer_commit(WsWriter *w, uint8_t ret_sha256[32]);

/* ws_writer_commit_noreplace() - ws_writer_commit(), but an existing target (of any type) is left
 * alone: -EEXIST (renameat2(RENAME_NOREPLACE), atomic against every other writer); the writer is
 * spent then, nothing is left behind. */
int ws_writer_commit_noreplace(WsWriter *w, uint8_t ret_sha256[32]);

/* ws_writer_sha256() - the SHA-256 of the bytes accepted so far (the writer goes on). */
void ws_writer_sha256(const WsWriter *w, uint8_t ret[32]);

/* ws_writer_chmod() - the permission bits (at most 0777) the file gets on commit (it is created
 * 0600). Return: 0, -EINVAL, -EALREADY after the commit, the writer's error, or -errno. */
int ws_writer_chmod(WsWriter *w, mode_t mode);

/* ws_writer_abort() - discard the upload: the temporary file and any directory created by
 * ws_writer_begin() that is still empty are removed; later writes and commits return
 * -ECANCELED. Idempotent; a no-op after a commit. */
void ws_writer_abort(WsWriter *w);

/* ws_writer_free() - abort (if not committed) and free. Accepts NULL; returns NULL. */
WsWriter *ws_writer_free(WsWriter *w);
static inline void ws_writer_freep(WsWriter **w) {
        *w = ws_writer_free(*w);
}

/* ws_writer_written() - bytes accepted so far. */
uint64_t ws_writer_written(const WsWriter *w);

typedef enum WsEntryType {
        WS_ENTRY_FILE,
        WS_ENTRY_DIR,
        WS_ENTRY_SYMLINK,
        WS_ENTRY_OTHER,                         /* FIFO, socket, device */
        _WS_ENTRY_TYPE_MAX,
        _WS_ENTRY_TYPE_INVALID = -EINVAL,
} WsEntryType;

/* ws_entry_type_to_string() - "file", "dir", "symlink", "other"; NULL if out of range. */
const char *ws_entry_type_to_string(WsEntryType t);

typedef struct WsEntry {
        char *name;             /* raw bytes as stored: may be invalid UTF-8 or hold control bytes */
        bool name_valid;        /* the name passes ws_path_validate() as a single component: only
                                 * then can a client address it; escape or skip the others */
        WsEntryType type;
        uint64_t size;          /* st_size for files and symlinks, 0 otherwise */
        int64_t mtime_usec;     /* modification time, µs since the epoch */
} WsEntry;

/*
 * ws_list_dir() - the entries of the directory @dir_path ("" = the workspace root), without "."
 * and "..", sorted by name (bytewise), each lstat()ed relative to the opened directory (an entry
 * that vanishes meanwhile is skipped). Return: 0 with a new array in *@ret (free with
 * ws_entries_free()) and its length in *@ret_n, -E2BIG if the directory has more than
 * WS_LIST_MAX_ENTRIES entries, -ENOTDIR if it is not a directory, or a common errno above.
 */
int ws_list_dir(int ws_fd, const char *dir_path, WsEntry **ret, size_t *ret_n);

/* ws_list_dir_max() - ws_list_dir() with its own cap: -E2BIG past @max_entries entries. */
int ws_list_dir_max(int ws_fd, const char *dir_path, size_t max_entries, WsEntry **ret, size_t *ret_n);

/* ws_entries_free() - free an array from ws_list_dir(). Accepts NULL; returns NULL. */
WsEntry *ws_entries_free(WsEntry *e, size_t n);

/*
 * ws_remove() - remove the file, symlink (the link itself) or empty directory @path (not empty).
 * Return: 0, -ENOTEMPTY for a non-empty directory, or a common errno above.
 */
int ws_remove(int ws_fd, const char *path);

/*
 * Test hooks (unit tests only; the daemon never calls them): WS_TEST_NO_OPENAT2 makes every
 * resolution take the openat2-ENOSYS fallback; WS_TEST_NO_TMPFILE makes writers take the named
 * temporary file path as if O_TMPFILE were unsupported. ws_files_test_set() replaces the set.
 */
enum {
        WS_TEST_NO_OPENAT2 = 1 << 0,
        WS_TEST_NO_TMPFILE = 1 << 1,
};
void ws_files_test_set(unsigned flags);
