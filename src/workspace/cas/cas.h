/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The content-addressed snapshot store of workspaces: objects, trees, refs, stat cache, gc. */
#pragma once

#include <stdint.h>
#include <stddef.h>

/*
 * On-disk layout below the store root (the daemon uses $STATE_DIRECTORY/cas):
 *
 *   objects/<2 hex>/<62 hex>            one file per distinct content, named by the lowercase hex
 *                                       SHA-256 of its bytes, mode 0444; trees are objects too
 *                                       (the 256 fan-out directories are created on first use)
 *   refs/workspace/<wsId>/<execId>      a ref (below)
 *   cache/<wsId>                        the stat cache of the workspace (below)
 *   tmp/                                in-progress writes; anything here is garbage once no
 *                                       operation runs, cas_gc() removes it
 *
 * Digests in the API are "sha256:" + 64 lowercase hex digits (71 chars + NUL: 72 bytes).
 *
 * Tree object (canonical, deterministic: equal trees give equal bytes, whatever the order the
 * files were created in): the line "sr-tree 1", then one line per entry, sorted by the raw bytes
 * of the name (memcmp order), every line ending in '\n', fields separated by one space:
 *
 *   f <mode> <size> <hex> <name>           regular file: <hex> is the object of its content
 *   d <mode> <size> <hex> <name>           directory: <hex> is its tree object, <size> the total
 *                                          bytes of the regular files below it
 *   l 0777 <size> - <name> <target>        symbolic link (never followed): <size> = target length
 *
 * <mode> is 4 octal digits of the permission bits (mode & 0777: setuid, setgid and sticky are
 * never recorded), <size> is decimal without leading zeros, <hex> 64 lowercase hex digits.
 * <name> and <target> are percent-encoded: every byte outside 0x21..0x7e, and '%', becomes
 * "%XX" (uppercase hex); no other byte is encoded. Names are 1..255 bytes, never "." or "..",
 * never contain '/'. Anything else (unsorted or duplicate names, other spellings) is a corrupt
 * tree (-EIO).
 *
 * Ref: canonical JSON, keys sorted, no whitespace, e.g.
 *   {"bytes":12,"createdAt":1700000000000,"executionId":"e1","tree":"sha256:<hex>"}
 * where bytes is the total size of the regular files of the tree.
 *
 * Stat cache (cache/<wsId>; private to this module, rewritten by every snapshot and restore):
 * "sr-statcache 1", one line per regular file "<dev> <ino> <size> <mtime_ns> <ctime_ns> <hex>
 * <path>" (path percent-encoded like names), then "end <count>". A file whose lstat() matches
 * all five numbers is not read again. Entries whose ctime is not older than the coarse clock at
 * the start of the snapshot are not recorded (a later write in the same clock tick could leave
 * the timestamps unchanged); ctime cannot be set by the sandbox. A damaged cache is ignored.
 *
 * Durability: objects are written to tmp/ and published in batches (up to 4096 objects or
 * 256 MiB): the batch is made durable (fsync() of each file, or one syncfs() of the store's file
 * system from 16 files on: one device flush instead of thousands), renamed into objects/, and
 * the object directories made durable the same way; trees follow the same path after every
 * file object they name; the ref is written last (tmp, fsync, rename, fsync of its directory).
 * An object is never visible under its name before its content is durable. Objects found in
 * place whose directory entry may not be durable yet (renamed by a process that died before
 * syncing the directory) are made durable by a syncfs() in cas_open(), or before the next ref
 * after a flush failed in this process; a process dying between rename and directory sync
 * while the daemon keeps running (a forked snapshot child) relies on the file system keeping
 * metadata operations in order (ext4, xfs do: the ref's fsync commits the earlier renames).
 * A crash at any point leaves every earlier ref readable and no ref naming a missing object;
 * the next snapshot reuses what was already published.
 *
 * Concurrency: snapshot, restore and fsck take a shared flock() on the store root, gc an
 * exclusive one (non-blocking: -EBUSY), so gc never deletes an object a running snapshot is
 * about to name. Lookups take no lock. Not thread-safe per Cas object.
 *
 * Ids (workspace, execution) follow workspace_id_valid(): 1–128 chars of [A-Za-z0-9._-], not
 * starting with '.'; anything else is -EINVAL. Paths given to lookups are relative, '/'
 * separated, without empty, "." or ".." components, at most 256 components of at most 255
 * bytes (-EINVAL otherwise).
 *
 * Common errnos: -EINVAL bad id/digest/path, -ENOENT unknown ref/tree/path, -ENOTDIR a path
 * component is not a directory, -EISDIR a file was asked for and the path is a directory,
 * -E2BIG a limit was hit, -EIO corrupt store (digest or size mismatch, malformed tree or ref,
 * a tree naming a missing object), -EBUSY gc while another operation holds the store.
 */

typedef struct Cas Cas;

/*
 * Limits applied to workspaces while snapshotting (and to trees while restoring): nesting
 * depth (path components), entries (files + dirs + symlinks + skipped), size of one file.
 * Names longer than 255 bytes are always -E2BIG.
 */
typedef struct CasLimits {
        unsigned max_depth;             /* default 256 */
        uint64_t max_entries;           /* default 5,000,000 */
        uint64_t max_file_size;         /* default 64 GiB */
} CasLimits;

#define CAS_DEFAULT_MAX_DEPTH 256U
#define CAS_DEFAULT_MAX_ENTRIES UINT64_C(5000000)
#define CAS_DEFAULT_MAX_FILE_SIZE (UINT64_C(64) << 30)

/*
 * cas_open() - open the store below the directory @root_fd (which stays the caller's: it is
 * duplicated), creating the layout if needed, and syncfs() its file system (see Durability).
 * Return: 0 or -errno.
 */
int cas_open(int root_fd, Cas **ret);

/* cas_free() - close the store. Accepts NULL. Return: NULL. */
Cas *cas_free(Cas *c);

/* cas_set_limits() - replace the limits; a zero field keeps the default. Return: 0. */
int cas_set_limits(Cas *c, const CasLimits *limits);

/*
 * Crash-point injection, for tests: the hook is called with one of the CAS_CRASH_* names at
 * each step that a real crash could interrupt; when it returns <0 the operation stops right
 * there and returns that value, leaving the store and the workspace exactly as a crash would
 * (temporary files and directories stay behind). NULL disables it.
 */
typedef int (*CasCrashHook)(const char *point, void *userdata);
void cas_set_crash_hook(Cas *c, CasCrashHook hook, void *userdata);

#define CAS_CRASH_OBJECT_WRITTEN "object-written"       /* an object's tmp file is written */
#define CAS_CRASH_OBJECTS_SYNCED "objects-synced"       /* a batch of tmp objects is fsync()ed */
#define CAS_CRASH_OBJECT_RENAMED "object-renamed"       /* one object renamed into objects/ */
#define CAS_CRASH_OBJECTS_PUBLISHED "objects-published" /* the batch's directories fsync()ed */
#define CAS_CRASH_TREE_WRITTEN "tree-written"           /* a tree's tmp file is written */
#define CAS_CRASH_REF_WRITTEN "ref-written"             /* the ref's tmp file, fsync()ed */
#define CAS_CRASH_REF_RENAMED "ref-renamed"             /* renamed, its directory not synced */
#define CAS_CRASH_REF_PUBLISHED "ref-published"         /* ref durable, stat cache not written */
#define CAS_CRASH_RESTORE_BUILT "restore-built"         /* new tree complete in the temp dir */
#define CAS_CRASH_RESTORE_EXCHANGED "restore-exchanged" /* swapped, old tree not removed */
#define CAS_CRASH_GC_REF_DELETED "gc-ref-deleted"       /* one ref deleted */
#define CAS_CRASH_GC_OBJECT_DELETED "gc-object-deleted" /* one unreferenced object deleted */

typedef struct CasSnapshotStats {
        uint64_t files, dirs, symlinks, skipped;  /* dirs: not counting the root */
        uint64_t bytes;                           /* total bytes of the regular files */
        uint64_t hashed_bytes;                    /* bytes read and hashed (stat-cache misses) */
        uint64_t new_objects;                     /* objects (files + trees) written */
} CasSnapshotStats;

/*
 * cas_snapshot() - publish the workspace open at @ws_fd (an O_DIRECTORY fd) as a snapshot and
 * write the ref workspace/@ws_id/@exec_id (replacing an existing one of that name, so a run
 * interrupted by a crash can simply be repeated).
 *
 * The walk never follows a symlink and never resolves a path twice: directories are opened
 * with openat(O_NOFOLLOW|O_DIRECTORY) below their parent's fd, files with openat(O_NOFOLLOW|
 * O_NONBLOCK) and checked with fstat() to still be the regular file lstat() saw. Symlinks
 * are recorded as their target text. FIFOs, sockets, devices, and entries the process may not
 * open (EACCES) are skipped and counted in @ret_stats->skipped. Hard links become separate
 * entries sharing one object. Must not run while something writes to the workspace. Holds one
 * fd per directory level (max_depth + a few) and one 256 KiB buffer.
 *
 * @created_ms: the ref's createdAt (unix ms). @ret_digest (optional): the root tree digest,
 * "sha256:<hex>", to free(). @ret_stats (optional).
 * Return: 0 or -errno: -EINVAL bad ids, -E2BIG a limit (depth, entries, name length, file
 * size), -EBUSY the workspace changed under the walk (a file replaced between lstat and open).
 */
int cas_snapshot(Cas *c, int ws_fd, const char *ws_id, const char *exec_id, uint64_t created_ms,
                 char **ret_digest, CasSnapshotStats *ret_stats);

/*
 * cas_ref_prepare() - create, ahead of the snapshot (while the run goes on), the file that will
 * become the ref workspace/@ws_id/@exec_id: ".<exec_id>.pre" in the workspace's ref directory,
 * which ref listings and the gc ignore. Creating a file that stays costs about half a millisecond
 * on a busy ext4; done here, it is not on the way to the answer. Return: its fd or -errno.
 * cas_snapshot_prepared() - cas_snapshot() writing the ref through that file (@prepared_fd is
 * taken over, closed, and the file removed if no ref came of it).
 * cas_ref_prepared_discard() - close @fd and remove the file unused.
 */
int cas_ref_prepare(Cas *c, const char *ws_id, const char *exec_id);
int cas_snapshot_prepared(Cas *c, int ws_fd, const char *ws_id, const char *exec_id, uint64_t created_ms,
                          int prepared_fd, char **ret_digest, CasSnapshotStats *ret_stats);
void cas_ref_prepared_discard(Cas *c, const char *ws_id, const char *exec_id, int fd);

typedef struct CasRef {
        char *exec_id;
        char *tree;             /* "sha256:<hex>" */
        uint64_t created_ms;
        uint64_t bytes;
} CasRef;

/*
 * cas_list_refs() - the refs of workspace @ws_id, newest (createdAt) first, ties by execution
 * id descending. A workspace without refs gives an empty list (*ret = NULL, *ret_n = 0).
 * Return: 0 or -errno; -EINVAL bad id, -EIO a malformed ref.
 */
int cas_list_refs(Cas *c, const char *ws_id, CasRef **ret, size_t *ret_n);
void cas_refs_free(CasRef *refs, size_t n);

/* cas_ref_done() - free the fields of one CasRef (as filled by cas_read_ref()). */
void cas_ref_done(CasRef *ref);

/* cas_read_ref() - read one ref. Return: 0, -EINVAL bad id, -ENOENT no such ref, -EIO malformed. */
int cas_read_ref(Cas *c, const char *ws_id, const char *exec_id, CasRef *ret);

/*
 * cas_ref_add() - write the ref workspace/@ws_id/@exec_id naming the existing tree @tree_digest
 * (replacing one of that name): what keeps a tree (and all it reaches) from the gc, as long as
 * the ref stays among the newest of its workspace. Takes the store's shared lock without waiting.
 * Return: 0 or -errno: -EINVAL bad id or digest, -ENOENT the tree is not (or no longer) in the
 * store, -EBUSY the gc holds the store (retry).
 */
int cas_ref_add(Cas *c, const char *ws_id, const char *exec_id, const char *tree_digest, uint64_t created_ms,
                uint64_t bytes);

/*
 * cas_refs_remove() - remove every ref of workspace @ws_id (its trees are then the next gc's, if
 * no other ref reaches them). Takes the store's shared lock without waiting.
 * Return: 0 (also when there was none) or -errno: -EINVAL bad id, -EBUSY the gc holds the store.
 */
int cas_refs_remove(Cas *c, const char *ws_id);

typedef struct CasEntry {
        char *name;
        int type;               /* DT_REG, DT_DIR, DT_LNK */
        uint32_t mode;          /* permission bits */
        uint64_t size;          /* file: bytes; dir: total bytes below; symlink: target length */
        char digest[72];        /* "sha256:<hex>" of the content (file) or tree (dir); "" symlink */
        char *target;           /* symlink target, else NULL */
} CasEntry;

/*
 * cas_tree_list() - the entries of directory @dir_path ("" = root) of tree @tree_digest, sorted
 * by name. Return: 0 or -errno: -EINVAL bad digest/path, -ENOENT unknown tree or path,
 * -ENOTDIR a component (or the path) is not a directory, -EIO corrupt tree.
 */
int cas_tree_list(Cas *c, const char *tree_digest, const char *dir_path, CasEntry **ret, size_t *ret_n);
void cas_entries_free(CasEntry *e, size_t n);

/*
 * cas_open_file() - open the content of regular file @path of tree @tree_digest: a read-only
 * (O_RDONLY|O_CLOEXEC) fd of the object, positioned at 0, its size and digest. The content is
 * not re-hashed (the digest is for the client to verify); its size is checked.
 * Return: 0 or -errno: -EINVAL, -ENOENT, -ENOTDIR, -EISDIR the path is a directory (or ""),
 * -ELOOP the path is a symlink (never followed), -EIO missing object or size mismatch.
 */
int cas_open_file(Cas *c, const char *tree_digest, const char *path, int *ret_fd, uint64_t *ret_size,
                  char ret_digest[static 72]);

/*
 * cas_restore() - make the workspace @ws_name (a directory entry of @parent_fd; need not exist)
 * exactly tree @tree_digest: files with their content and permission bits, directories,
 * symlinks (timestamps are not restored). The tree is built in the hidden sibling
 * ".<ws_name>.cas-restore-<16 hex>", synced (syncfs()), swapped in with
 * renameat2(RENAME_EXCHANGE) and the old tree removed: a crash leaves either the old or the new
 * tree under @ws_name, plus possibly such a sibling, which the next cas_restore() of @ws_name
 * removes (as it does when removing the old tree fails after the swap: that is not an error).
 * The root directory is 0700. The stat cache of @ws_name (taken as the workspace id) is
 * rewritten for the new files, so the next snapshot does not read them again.
 *
 * Fds the caller holds on the old workspace directory (and its flock() lease) still refer to
 * the old, now deleted, directory: reopen after a restore; a writer that was waiting for the
 * lease on the old directory must check, once it has it, that the name still leads to the
 * inode it locked. Must not run while something uses the workspace.
 * Return: 0 or -errno: -EINVAL, -ENOENT unknown tree, -ENOTDIR @ws_name is not a directory,
 * -EIO corrupt store, -E2BIG a limit.
 */
int cas_restore(Cas *c, const char *tree_digest, int parent_fd, const char *ws_name);

/*
 * cas_gc() - retention: keep the newest @keep_per_workspace refs of each workspace (0 = all),
 * delete the others, then every object no remaining ref reaches and everything in tmp/.
 * A ref whose tree cannot be read for a reason other than a missing object stops gc before it
 * deletes any object. @ret_freed_bytes (optional): bytes of the deleted files.
 * Return: 0 or -errno; -EBUSY another operation holds the store.
 */
int cas_gc(Cas *c, unsigned keep_per_workspace, uint64_t *ret_freed_bytes);

/*
 * cas_fsck() - check that every ref parses, and that its tree and every object it reaches
 * exist, trees hash to their name and file objects have the recorded size (file contents
 * are not re-hashed; cas_fsck_full() does that).
 * @ret_problem (optional): on -EUCLEAN, a description of the first problem, to free().
 * Return: 0 consistent, -EUCLEAN a problem was found, other -errno if the check failed.
 */
int cas_fsck(Cas *c, char **ret_problem);

/* cas_fsck_full() - cas_fsck(), and every reachable file object is re-hashed too. */
int cas_fsck_full(Cas *c, char **ret_problem);
