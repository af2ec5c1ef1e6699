/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The environments' on-disk store (DESIGN.md §14): everything under <state_dir>/environments/.
 * Owns the layout below, the meta.json form of an environment (EnvMeta), the atomic swap of the
 * live prefix, the revision records as files, the recovery after a crash, the trash and the
 * SHA-256-addressed copies of client wheels. Knows nothing of HTTP, sandboxes or provisioning;
 * may call util/ and environment/env-source.h.
 *
 *   environments/catalog.json                    instance-global settings in force
 *   environments/envs/<name>/meta.json           what the environment is and wants (EnvMeta)
 *   environments/envs/<name>/live -> r<N>        the live prefix, swapped with one rename()
 *   environments/envs/<name>/r<N>/               the prefix of revision N (never modified once published)
 *   environments/envs/<name>/revisions/<N>.json  the revision record (durable before the swap)
 *   environments/envs/<name>/build-<setupId>/    a prefix being built (removed on recovery)
 *   environments/wheels/<sha256>/<file>.whl      client wheels by SHA-256 (the file name kept: pip needs it)
 *   environments/trash/                          removed environments and old prefixes
 *
 * Every file is replaced atomically (a temporary ".#..." name in the same directory, fsync(),
 * rename(), fsync() of the directory); leftovers of a crash are removed by env_store_open()
 * (the store's own directories) and env_store_recover() (an environment's). A prefix is written
 * by sandboxed code: nothing below a prefix or a build directory is ever followed when it is
 * removed (util/fs-util.h rm_rf_at()).
 *
 * One daemon owns the tree, from one thread: the store takes no locks. Names reach paths only
 * after env_name_valid(), setup ids only after env_setup_id_valid().
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "environment/env-source.h"
#include "util/macro.h"

typedef struct EnvStore EnvStore;

/* The longest environment name, and the longest setup id. */
#define ENV_NAME_MAX 63
#define ENV_SETUP_ID_MAX 64
/* The longest display name, in bytes. */
#define ENV_DISPLAY_NAME_MAX 200

/*
 * env_display_name_valid() - a name an environment is shown by, beside its name: 1 to
 * ENV_DISPLAY_NAME_MAX bytes of valid UTF-8, no control character. Pure.
 */
bool env_display_name_valid(const char *s);

/* The longest wheel file name. */
#define ENV_WHEEL_FILE_MAX 255
/* The largest meta.json, revision record or catalog read back. */
#define ENV_STORE_JSON_MAX (4U * 1024U * 1024U)

/*
 * env_name_valid() - an environment name: [a-z0-9][a-z0-9._-]{0,62}, without "..", and not
 * "setup" (the route /environments/setup).
 */
bool env_name_valid(const char *name);

/* env_setup_id_valid() - a setup id as a path component: [A-Za-z0-9_-]{1,64}. */
bool env_setup_id_valid(const char *id);

/*
 * env_wheel_file_valid() - a plain wheel file name: [A-Za-z0-9._+-]+ ending in ".whl", not
 * starting with '.', at most ENV_WHEEL_FILE_MAX bytes.
 */
bool env_wheel_file_valid(const char *file);

/* env_sha256_valid() - a SHA-256 digest as the store writes it: 64 lowercase hex digits. */
bool env_sha256_valid(const char *hex);

/* A client wheel in the store: wheels/<sha256>/<file>. */
typedef struct EnvWheel {
        char *sha256;                   /* 64 lowercase hex digits */
        char *file;                     /* the wheel's file name (env_wheel_file_valid()) */
} EnvWheel;

/* env_wheel_done() - free the strings of @w and reset it. */
void env_wheel_done(EnvWheel *w);

/* What an environment is and wants: meta.json. */
typedef struct EnvMeta {
        char *name;
        char *display_name;             /* free text it is shown by (env_display_name_valid()), NULL = none */
        EnvKind kind;
        bool base;                      /* made by the daemon; read-only through the API */
        char **packages;                /* requested specifiers (python), Debian packages (base), R packages */
        char **debian_packages;         /* base environments: the Debian packages copied in */
        EnvWheel *wheels;
        size_t n_wheels;
        char *index_url;                /* NULL = none */
        char *preset;                   /* NULL = none */
        bool offline;
        char **channels;
        unsigned revision;              /* the live revision, 0 = none yet */
} EnvMeta;

/* env_meta_free() - free @m and all it owns (NULL is fine). Return: NULL. */
EnvMeta *env_meta_free(EnvMeta *m);
SR_DEFINE_FREE_FUNC(EnvMeta *, env_meta_free);

/*
 * env_meta_to_json() - the meta.json form of @m:
 *   {"name", "displayName"?, "kind": "python"|"r"|"conda", "base", "packages": [...],
 *    "debianPackages": [...], "wheels": [{"sha256", "file"}], "indexUrl"?, "preset"?, "offline",
 *    "channels": [...], "revision"}
 * ("displayName", "indexUrl" and "preset" only when set; NULL string lists are written as []).
 * Return: a new object, or NULL on OOM.
 */
json_object *env_meta_to_json(const EnvMeta *m);

/*
 * env_meta_from_json() - parse the meta.json form, strictly: "name" (env_name_valid()) and
 * "kind" are required; the others are optional ("displayName", "indexUrl" and "preset" may be
 * null); an unknown field, a wrong type, a string with a NUL byte, a display name that
 * env_display_name_valid() refuses, a bad wheel (hash or file name) or a revision past UINT_MAX
 * is -EBADMSG.
 * Return: 0 with a new *@ret, -EBADMSG or -ENOMEM.
 */
int env_meta_from_json(json_object *o, EnvMeta **ret);

/*
 * env_store_open() - open the store of @state_dir (an existing directory, an absolute path): creates
 * environments/ and its envs/, wheels/ and trash/ (0750) when missing, keeps fds on them, and
 * removes temporary files that a crash left in environments/ and wheels/.
 * Return: 0, -EINVAL (a relative @state_dir) or -errno.
 */
int env_store_open(const char *state_dir, EnvStore **ret);

/* env_store_free() - close @s (NULL is fine). Return: NULL. */
EnvStore *env_store_free(EnvStore *s);
SR_DEFINE_FREE_FUNC(EnvStore *, env_store_free);

/* env_store_root() - <state_dir>/environments. */
const char *env_store_root(EnvStore *s);

/*
 * env_store_write_catalog() - replace catalog.json atomically with @catalog (an object).
 * Return: 0, -EINVAL (not an object) or -errno.
 */
int env_store_write_catalog(EnvStore *s, json_object *catalog);

/*
 * env_store_list() - the names of the environments that have a meta.json or a setup.json (a first setup not
 * published yet), sorted bytewise
 * (NULL-terminated; an empty store gives an empty list, not NULL).
 * Return: 0 or -errno.
 */
int env_store_list(EnvStore *s, char ***ret_names);

/*
 * env_store_load() - the meta.json of @name.
 * Return: 0, -EINVAL (a bad name), -ENOENT (no such environment), -EBADMSG (not valid JSON, not
 * the meta.json form, or another name in it) or -errno.
 */
int env_store_load(EnvStore *s, const char *name, EnvMeta **ret);

/*
 * env_store_save() - write @m as envs/<name>/meta.json (the directory made if needed): a
 * temporary file, fsync(), rename(), fsync() of the directory.
 * Return: 0, -EINVAL (a bad name) or -errno.
 */
int env_store_save(EnvStore *s, const EnvMeta *m);

/*
 * env_store_build_begin() - a fresh, empty envs/<name>/build-<setup_id>/ (0755, so that the
 * sandbox user can read it later; one left from before is removed first); envs/<name>/ is made
 * if needed. Return: 0 with its absolute host path in *@ret_path, -EINVAL (a bad name or setup
 * id) or -errno.
 */
/*
 * env_store_save_setup() - envs/<name>/setup.json: what a queued or running setup builds
 * (@wanted, in meta.json's form, and @setup_id), written atomically before the setup is queued,
 * so that a restart finds it and builds it again. env_store_list() lists an environment that has
 * only this file (a first setup not published yet).
 * Return: 0, -EINVAL (a bad name or id), -errno.
 */
int env_store_save_setup(EnvStore *s, const EnvMeta *wanted, const char *setup_id);
/* env_store_load_setup() - setup.json's definition (its setupId dropped). Return: 0, -ENOENT, -EBADMSG. */
int env_store_load_setup(EnvStore *s, const char *name, EnvMeta **ret);
/* env_store_clear_setup() - the setup ended (published or failed): setup.json goes. Return: 0 or -errno. */
int env_store_clear_setup(EnvStore *s, const char *name);

int env_store_build_begin(EnvStore *s, const char *name, const char *setup_id, char **ret_path);

/*
 * env_store_publish() - the commit of a setup, in this order:
 *   1. revisions/<revision>.json := @record (an object; temporary file, fsync(), rename());
 *   2. build-<setup_id> -> r<revision> (rename(), no replace);
 *   3. a symlink live.new -> r<revision>, renamed over live: THE swap. Before it the old prefix
 *      is live, after it the new one;
 *   4. fsync() of the environment's directory;
 *   5. meta.json's "revision" := @revision.
 * A crash at any point leaves the old live prefix or the new one, never neither;
 * env_store_recover() then tidies what was half done. The environment's meta.json must exist.
 * Return: 0, -EINVAL (a bad name or setup id, revision 0, @record not an object), -ENOENT (no
 * such environment or build directory), -EEXIST (r<revision> exists) or -errno.
 */
int env_store_publish(EnvStore *s, const char *name, const char *setup_id, unsigned revision, json_object *record);

/*
 * env_store_build_abort() - remove build-<setup_id>, never following anything in it (a missing one
 * is fine). Return: 0, -EINVAL or -errno.
 */
int env_store_build_abort(EnvStore *s, const char *name, const char *setup_id);

/*
 * env_store_live() - the live revision of @name and the absolute host path of its prefix
 * (envs/<name>/r<N>: a run binds that path, not the symlink, so it keeps its prefix across a
 * later swap). Either output may be NULL.
 * Return: 0, -EINVAL (a bad name), -ENOENT (no environment or no live prefix yet), -EBADMSG
 * (the symlink is not "r<N>") or -errno.
 */
int env_store_live(EnvStore *s, const char *name, unsigned *ret_revision, char **ret_prefix_path);

/*
 * env_store_revisions() - every revision record of @name, by ascending revision, in a new JSON
 * array (empty when there is none yet).
 * Return: 0, -EINVAL, -ENOENT (no such environment), -EBADMSG (a record that is not JSON) or -errno.
 */
int env_store_revisions(EnvStore *s, const char *name, json_object **ret_array);

/*
 * env_store_recover() - at start-up, before any run: remove build-* directories, a stale
 * live.new and temporary files; move every prefix r<N> other than the live one to the trash;
 * remove revision records newer than the live revision (a setup that died before its swap); set
 * meta.json's revision to the live one if they differ (live wins: a crash between the swap and
 * the meta update). *@ret_revision (may be NULL) is the live revision, 0 for none.
 * Return: 0, -EINVAL, -ENOENT (no meta.json; the tidying is done anyway), -EBADMSG (a live symlink
 * that is not "r<N>" or points at nothing) or -errno.
 */
int env_store_recover(EnvStore *s, const char *name, unsigned *ret_revision);

/*
 * env_store_retire() - move the prefix r<revision> (not the live one) to the trash.
 * Return: 0, -EINVAL, -EBUSY (it is live), -ENOENT (no such prefix) or -errno.
 */
int env_store_retire(EnvStore *s, const char *name, unsigned revision);

/*
 * env_store_remove() - move envs/<name> into the trash with one rename(): the environment is gone
 * at once for env_store_list() and env_store_load(); runs in flight keep their bound prefix.
 * Return: 0, -EINVAL, -ENOENT or -errno.
 */
int env_store_remove(EnvStore *s, const char *name);

/*
 * env_store_trash_empty() - remove everything in trash/ (the caller knows that no run holds any of
 * it), never following a symlink inside. Return: 0 or -errno (the first error; the rest is tried).
 */
int env_store_trash_empty(EnvStore *s);

/*
 * env_store_wheel_add() - copy the regular file @fd (read from its start with pread(): its offset
 * is left alone) into wheels/<sha256>/<file_name>, hashing with SHA-256 while copying (temporary
 * file, fsync(), rename(); the file 0644 in a directory 0755, for the provisioning sandbox). An
 * existing one of the same hash and name is kept. *@ret (may be NULL) gets the hash and the name.
 * Return: 0, -EINVAL (not a plain wheel file name: env_wheel_file_valid(), or @fd not a regular
 * file) or -errno.
 */
int env_store_wheel_add(EnvStore *s, int fd, const char *file_name, EnvWheel *ret);

/*
 * env_store_wheel_path() - the absolute host path of a stored wheel.
 * Return: a new string, or NULL (OOM, or an invalid @w).
 */
char *env_store_wheel_path(EnvStore *s, const EnvWheel *w);
