/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The environments' on-disk store (env-store.h): the directories, atomic file replacement, build
 * directories, the publication of a prefix and its atomic swap, recovery and the trash. The
 * meta.json form is in env-store-meta.c, the client wheels in env-store-wheel.c.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "environment/env-store-internal.h"
#include "environment/env-store.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/strv.h"

#define DIR_MODE 0750
#define ENV_STORE_JSON_FLAGS (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)
#define FILE_MODE 0640

/* ---- helpers (env-store-internal.h shares two with env-store-wheel.c) ---------------------------- */

int env_store_random_name(const char *prefix, char **ret) {
        uint64_t v;

        if (getrandom(&v, sizeof(v), 0) != (ssize_t) sizeof(v))
                return negative_errno();
        return asprintf(ret, "%s%016" PRIx64, prefix, v) < 0 ? -ENOMEM : 0;
}

/* mkdirat() with @mode whatever the umask; an existing directory is fine. */
static int mkdir_mode_at(int dfd, const char *name, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;

        if (mkdirat(dfd, name, mode) < 0)
                return errno == EEXIST ? 0 : negative_errno();
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        return fchmod(fd, mode) < 0 ? negative_errno() : 1;
}

static int open_dir_at(int dfd, const char *name) {
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        return fd < 0 ? negative_errno() : fd;
}

int env_store_mkdir_open(int dfd, const char *name, mode_t mode) {
        int r = mkdir_mode_at(dfd, name, mode);

        return r < 0 ? r : open_dir_at(dfd, name);
}

static int read_json_at(int dfd, const char *name, json_object **ret) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = read_file_at(dfd, name, ENV_STORE_JSON_MAX, &data, &size);
        if (r == -EIO || r == -E2BIG)
                return -EBADMSG;                /* not a regular file, or far too large */
        if (r < 0)
                return r;
        return json_parse_text(data, size, ret);
}

/* Remove the temporary files (ENV_STORE_TMP_PREFIX) a crash left in @dfd. */
static int remove_tmp_files(int dfd) {
        _cleanup_(dir_names_done) DirNames names = {};
        int r;

        r = dir_read_names(dfd, NULL, 0, &names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < names.n; i++)
                if (strneq(names.v[i], ENV_STORE_TMP_PREFIX, strlen(ENV_STORE_TMP_PREFIX)) &&
                    unlinkat(dfd, names.v[i], 0) < 0 && errno != ENOENT)
                        return negative_errno();
        return 0;
}

/* Move @name of @dfd into the trash under a fresh name "<label>.<random>", with one rename(). */
static int move_to_trash(EnvStore *s, int dfd, const char *name, const char *label) {
        int r;

        for (unsigned attempt = 0; attempt < 16; attempt++) {
                _cleanup_free_ char *prefix = NULL, *target = NULL;

                if (asprintf(&prefix, "%s.", label) < 0)
                        return -ENOMEM;
                r = env_store_random_name(prefix, &target);
                if (r < 0)
                        return r;
                if (renameat2(dfd, name, s->trash_fd, target, RENAME_NOREPLACE) >= 0)
                        return fsync(s->trash_fd) < 0 || fsync(dfd) < 0 ? negative_errno() : 0;
                if (errno != EEXIST)
                        return negative_errno();
        }
        return -EEXIST;
}

static int parse_revision(const char *s, const char *suffix, unsigned *ret) {
        size_t n = strlen(s), k = strlen(suffix);
        unsigned long v = 0;

        if (n <= k || !streq(s + n - k, suffix) || n - k > 10 || s[0] == '0')
                return -EINVAL;
        for (size_t i = 0; i < n - k; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long) (s[i] - '0');
        }
        if (v == 0 || v > UINT_MAX)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

/* "r<N>" -> N. */
static int parse_prefix_name(const char *s, unsigned *ret) {
        return s[0] == 'r' ? parse_revision(s + 1, "", ret) : -EINVAL;
}

static int open_env_dir(EnvStore *s, const char *name) {
        if (!env_name_valid(name))
                return -EINVAL;
        return open_dir_at(s->envs_fd, name);
}

/* ---- the store ----------------------------------------------------------------------------------- */

int env_store_open(const char *state_dir, EnvStore **ret) {
        _cleanup_(env_store_freep) EnvStore *s = NULL;
        _cleanup_close_ int state_fd = -EBADF;
        int r;

        if (!state_dir || state_dir[0] != '/')
                return -EINVAL;
        s = calloc(1, sizeof(EnvStore));
        if (!s)
                return -ENOMEM;
        *s = (EnvStore) { .root_fd = -EBADF, .envs_fd = -EBADF, .wheels_fd = -EBADF, .trash_fd = -EBADF };
        if (asprintf(&s->root, "%s/environments", state_dir) < 0) {
                s->root = NULL;
                return -ENOMEM;
        }
        state_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (state_fd < 0)
                return negative_errno();
        s->root_fd = env_store_mkdir_open(state_fd, "environments", DIR_MODE);
        if (s->root_fd < 0)
                return s->root_fd;
        s->envs_fd = env_store_mkdir_open(s->root_fd, "envs", DIR_MODE);
        if (s->envs_fd < 0)
                return s->envs_fd;
        s->wheels_fd = env_store_mkdir_open(s->root_fd, "wheels", DIR_MODE);
        if (s->wheels_fd < 0)
                return s->wheels_fd;
        s->trash_fd = env_store_mkdir_open(s->root_fd, "trash", DIR_MODE);
        if (s->trash_fd < 0)
                return s->trash_fd;
        r = remove_tmp_files(s->root_fd);
        if (r < 0)
                return r;
        r = remove_tmp_files(s->wheels_fd);
        if (r < 0)
                return r;
        *ret = STEAL(s);
        return 0;
}

EnvStore *env_store_free(EnvStore *s) {
        if (!s)
                return NULL;
        (void) safe_close(s->root_fd);
        (void) safe_close(s->envs_fd);
        (void) safe_close(s->wheels_fd);
        (void) safe_close(s->trash_fd);
        free(s->root);
        return mfree(s);
}

const char *env_store_root(EnvStore *s) {
        return s->root;
}

int env_store_write_catalog(EnvStore *s, json_object *catalog) {
        if (!json_object_is_type(catalog, json_type_object))
                return -EINVAL;
        return json_write_file_atomic_at(s->root_fd, "catalog.json", catalog, ENV_STORE_JSON_FLAGS, FILE_MODE);
}

int env_store_list(EnvStore *s, char ***ret_names) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_strv_free_ char **l = NULL;
        int r;

        r = dir_read_names(s->envs_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        l = calloc(names.n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0, k = 0; i < names.n; i++) {
                _cleanup_close_ int fd = -EBADF;
                struct stat st;

                if (!env_name_valid(names.v[i]))
                        continue;
                fd = open_dir_at(s->envs_fd, names.v[i]);
                if (fd < 0)
                        continue;               /* not a directory: nothing of ours */
                /* meta.json, or only setup.json: a new environment whose first setup has not
                 * published yet. */
                if ((fstatat(fd, "meta.json", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) &&
                    (fstatat(fd, "setup.json", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)))
                        continue;
                l[k++] = STEAL(names.v[i]);
        }
        *ret_names = STEAL(l);
        return 0;
}

/* meta.json (@setup: setup.json, less its "setupId": a new setup gets a new id) of @env_fd as
 * the EnvMeta of @name. */
static int load_file_at(int env_fd, bool setup, const char *name, EnvMeta **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        int r;

        r = read_json_at(env_fd, setup ? "setup.json" : "meta.json", &o);
        if (r < 0)
                return r;
        if (setup)
                json_object_object_del(o, "setupId");
        r = env_meta_from_json(o, &m);
        if (r < 0)
                return r;
        if (!streq(m->name, name))
                return -EBADMSG;
        *ret = STEAL(m);
        return 0;
}

static int load_at(int env_fd, const char *name, EnvMeta **ret) {
        return load_file_at(env_fd, false, name, ret);
}

int env_store_load(EnvStore *s, const char *name, EnvMeta **ret) {
        _cleanup_close_ int fd = -EBADF;

        fd = open_env_dir(s, name);
        if (fd < 0)
                return fd == -ENOTDIR || fd == -ELOOP ? -ENOENT : fd;
        return load_at(fd, name, ret);
}

static int save_at(int env_fd, const EnvMeta *m) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        o = env_meta_to_json(m);
        if (!o)
                return -ENOMEM;
        return json_write_file_atomic_at(env_fd, "meta.json", o, ENV_STORE_JSON_FLAGS, FILE_MODE);
}

int env_store_save(EnvStore *s, const EnvMeta *m) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!env_name_valid(m->name) || !env_kind_to_string(m->kind))
                return -EINVAL;
        r = mkdir_mode_at(s->envs_fd, m->name, DIR_MODE);
        if (r < 0)
                return r;
        fd = open_dir_at(s->envs_fd, m->name);
        if (fd < 0)
                return fd;
        r = save_at(fd, m);
        if (r < 0)
                return r;
        return fsync(s->envs_fd) < 0 ? negative_errno() : 0;
}

int env_store_save_setup(EnvStore *s, const EnvMeta *wanted, const char *setup_id) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!env_name_valid(wanted->name) || !env_setup_id_valid(setup_id))
                return -EINVAL;
        o = env_meta_to_json(wanted);
        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "setupId", json_object_new_string(setup_id));
        r = mkdir_mode_at(s->envs_fd, wanted->name, DIR_MODE);
        if (r < 0)
                return r;
        fd = open_dir_at(s->envs_fd, wanted->name);
        if (fd < 0)
                return fd;
        r = json_write_file_atomic_at(fd, "setup.json", o, ENV_STORE_JSON_FLAGS, FILE_MODE);
        if (r < 0)
                return r;
        return fsync(s->envs_fd) < 0 ? negative_errno() : 0;
}

int env_store_load_setup(EnvStore *s, const char *name, EnvMeta **ret) {
        _cleanup_close_ int fd = -EBADF;

        fd = open_env_dir(s, name);
        if (fd < 0)
                return fd == -ENOTDIR || fd == -ELOOP ? -ENOENT : fd;
        return load_file_at(fd, true, name, ret);
}

int env_store_clear_setup(EnvStore *s, const char *name) {
        _cleanup_close_ int fd = -EBADF;

        fd = open_env_dir(s, name);
        if (fd < 0)
                return fd;
        return unlinkat(fd, "setup.json", 0) < 0 && errno != ENOENT ? negative_errno() : 0;
}

/* ---- builds, publication, the live prefix -------------------------------------------------------- */

int env_store_build_begin(EnvStore *s, const char *name, const char *setup_id, char **ret_path) {
        _cleanup_free_ char *build = NULL, *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!env_name_valid(name) || !env_setup_id_valid(setup_id))
                return -EINVAL;
        if (asprintf(&build, "build-%s", setup_id) < 0)
                return -ENOMEM;
        r = mkdir_mode_at(s->envs_fd, name, DIR_MODE);
        if (r < 0)
                return r;
        fd = open_dir_at(s->envs_fd, name);
        if (fd < 0)
                return fd;
        r = rm_rf_at(fd, build);
        if (r < 0)
                return r;
        r = mkdir_mode_at(fd, build, ENV_STORE_PREFIX_MODE);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/envs/%s/%s", s->root, name, build) < 0)
                return -ENOMEM;
        *ret_path = STEAL(path);
        return 0;
}

int env_store_build_abort(EnvStore *s, const char *name, const char *setup_id) {
        _cleanup_free_ char *build = NULL;
        _cleanup_close_ int fd = -EBADF;

        if (!env_setup_id_valid(setup_id))
                return -EINVAL;
        fd = open_env_dir(s, name);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        if (asprintf(&build, "build-%s", setup_id) < 0)
                return -ENOMEM;
        return rm_rf_at(fd, build);
}

/* The step of env_store_publish() that writes revisions/<N>.json. */
static int publish_record(int env_fd, unsigned revision, json_object *record) {
        _cleanup_close_ int rev_fd = -EBADF;
        char file[32];

        rev_fd = env_store_mkdir_open(env_fd, "revisions", DIR_MODE);
        if (rev_fd < 0)
                return rev_fd;
        (void) snprintf(file, sizeof(file), "%u.json", revision);
        return json_write_file_atomic_at(rev_fd, file, record, ENV_STORE_JSON_FLAGS, FILE_MODE);
}

int env_store_publish_upto(EnvStore *s, const char *name, const char *setup_id, unsigned revision,
                           json_object *record, EnvPublishStep upto) {
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        _cleanup_close_ int fd = -EBADF;
        char build[sizeof("build-") + ENV_SETUP_ID_MAX], prefix[16];
        struct stat st;
        int r;

        if (!env_setup_id_valid(setup_id) || revision == 0 || !json_object_is_type(record, json_type_object))
                return -EINVAL;
        fd = open_env_dir(s, name);
        if (fd < 0)
                return fd == -ENOTDIR || fd == -ELOOP ? -ENOENT : fd;
        r = load_at(fd, name, &m);
        if (r < 0)
                return r;
        (void) snprintf(build, sizeof(build), "build-%s", setup_id);
        (void) snprintf(prefix, sizeof(prefix), "r%u", revision);
        if (fstatat(fd, prefix, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                return -EEXIST;
        if (errno != ENOENT)
                return negative_errno();
        if (fstatat(fd, build, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;

        /* 1. The record, durable before anything points at the prefix. */
        r = publish_record(fd, revision, record);
        if (r < 0 || upto == ENV_PUBLISH_RECORD)
                return r;
        /* 2. The prefix under its final name: nothing writes to it from now on. */
        if (renameat2(fd, build, fd, prefix, RENAME_NOREPLACE) < 0)
                return negative_errno();
        if (upto == ENV_PUBLISH_PREFIX)
                return 0;
        /* 3. The new symlink beside the old one. */
        if (unlinkat(fd, "live.new", 0) < 0 && errno != ENOENT)
                return negative_errno();
        if (symlinkat(prefix, fd, "live.new") < 0)
                return negative_errno();
        if (upto == ENV_PUBLISH_SYMLINK)
                return 0;
        /* 4. THE swap: one rename() replaces live; before it the old prefix is live, after it the new. */
        if (renameat(fd, "live.new", fd, "live") < 0)
                return negative_errno();
        if (upto == ENV_PUBLISH_SWAP)
                return 0;
        if (fsync(fd) < 0)
                return negative_errno();
        if (upto == ENV_PUBLISH_SYNC)
                return 0;
        /* 5. meta.json follows; until it does, recovery lets live win. */
        m->revision = revision;
        return save_at(fd, m);
}

int env_store_publish(EnvStore *s, const char *name, const char *setup_id, unsigned revision, json_object *record) {
        return env_store_publish_upto(s, name, setup_id, revision, record, ENV_PUBLISH_META);
}

/* The live revision of the environment @env_fd: 0 with *@ret, -ENOENT (no live) or -EBADMSG. */
static int live_at(int env_fd, unsigned *ret) {
        char target[32];
        struct stat st;
        ssize_t n;
        unsigned rev;

        n = readlinkat(env_fd, "live", target, sizeof(target));
        if (n < 0)
                return errno == EINVAL ? -EBADMSG : negative_errno();
        if ((size_t) n >= sizeof(target))
                return -EBADMSG;
        target[n] = '\0';
        if (parse_prefix_name(target, &rev) < 0)
                return -EBADMSG;
        if (fstatat(env_fd, target, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                return -EBADMSG;
        *ret = rev;
        return 0;
}

int env_store_live(EnvStore *s, const char *name, unsigned *ret_revision, char **ret_prefix_path) {
        _cleanup_close_ int fd = -EBADF;
        unsigned rev;
        int r;

        fd = open_env_dir(s, name);
        if (fd < 0)
                return fd == -ENOTDIR || fd == -ELOOP ? -ENOENT : fd;
        r = live_at(fd, &rev);
        if (r < 0)
                return r;
        if (ret_prefix_path && asprintf(ret_prefix_path, "%s/envs/%s/r%u", s->root, name, rev) < 0)
                return -ENOMEM;
        if (ret_revision)
                *ret_revision = rev;
        return 0;
}

static int cmp_unsigned(const void *a, const void *b) {
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;

        return x < y ? -1 : x > y;
}

/* The revision numbers of the records in @rev_fd, ascending, in a new array. */
static int record_numbers(int rev_fd, unsigned **ret, size_t *ret_n) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_free_ unsigned *v = NULL;
        size_t n = 0;
        int r;

        r = dir_read_names(rev_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        v = calloc(names.n + 1, sizeof(unsigned));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < names.n; i++)
                if (parse_revision(names.v[i], ".json", &v[n]) >= 0)
                        n++;
        qsort(v, n, sizeof(unsigned), cmp_unsigned);
        *ret = STEAL(v);
        *ret_n = n;
        return 0;
}

int env_store_revisions(EnvStore *s, const char *name, json_object **ret_array) {
        _cleanup_(json_object_putp) json_object *a = NULL;
        _cleanup_close_ int fd = -EBADF, rev_fd = -EBADF;
        _cleanup_free_ unsigned *v = NULL;
        size_t n = 0;
        int r;

        fd = open_env_dir(s, name);
        if (fd < 0)
                return fd == -ENOTDIR || fd == -ELOOP ? -ENOENT : fd;
        a = json_object_new_array();
        if (!a)
                return -ENOMEM;
        rev_fd = open_dir_at(fd, "revisions");
        if (rev_fd == -ENOENT) {
                *ret_array = STEAL(a);
                return 0;
        }
        if (rev_fd < 0)
                return rev_fd;
        r = record_numbers(rev_fd, &v, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                json_object *o = NULL;
                char file[32];

                (void) snprintf(file, sizeof(file), "%u.json", v[i]);
                r = read_json_at(rev_fd, file, &o);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                if (json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
        }
        *ret_array = STEAL(a);
        return 0;
}

/* ---- recovery, retirement, removal, trash --------------------------------------------------------- */

/*
 * Remove build-*, live.new and temporary files; with @trash_prefixes, move every r<N> but r<@live>
 * to the trash.
 */
static int recover_tidy(EnvStore *s, int env_fd, const char *name, bool trash_prefixes, unsigned live) {
        _cleanup_(dir_names_done) DirNames names = {};
        int r;

        r = dir_read_names(env_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < names.n; i++) {
                const char *e = names.v[i];
                unsigned rev;

                if (strneq(e, "build-", strlen("build-")))
                        r = rm_rf_at(env_fd, e);
                else if (streq(e, "live.new") || strneq(e, ENV_STORE_TMP_PREFIX, strlen(ENV_STORE_TMP_PREFIX)))
                        r = unlinkat(env_fd, e, 0) < 0 && errno != ENOENT ? negative_errno() : 0;
                else if (trash_prefixes && parse_prefix_name(e, &rev) >= 0 && rev != live) {
                        _cleanup_free_ char *label = NULL;

                        if (asprintf(&label, "%s-%s", name, e) < 0)
                                return -ENOMEM;
                        r = move_to_trash(s, env_fd, e, label);
                } else
                        r = 0;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Remove the records of revisions past @live (setups that died before their swap) and temporary files. */
static int recover_records(int env_fd, unsigned live) {
        _cleanup_close_ int rev_fd = -EBADF;
        _cleanup_free_ unsigned *v = NULL;
        size_t n = 0;
        int r;

        rev_fd = open_dir_at(env_fd, "revisions");
        if (rev_fd == -ENOENT)
                return 0;
        if (rev_fd < 0)
                return rev_fd;
        r = remove_tmp_files(rev_fd);
        if (r < 0)
                return r;
        r = record_numbers(rev_fd, &v, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                char file[32];

                if (v[i] <= live)
                        continue;
                (void) snprintf(file, sizeof(file), "%u.json", v[i]);
                if (unlinkat(rev_fd, file, 0) < 0 && errno != ENOENT)
                        return negative_errno();
        }
        return fsync(rev_fd) < 0 ? negative_errno() : 0;
}

int env_store_recover(EnvStore *s, const char *name, unsigned *ret_revision) {
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        _cleanup_close_ int fd = -EBADF;
        unsigned live = 0;
        int r;

        fd = open_env_dir(s, name);
        if (fd < 0)
                return fd == -ENOTDIR || fd == -ELOOP ? -ENOENT : fd;
        r = live_at(fd, &live);
        if (r == -EBADMSG) {
                /* A broken live link: which prefix is live is unknown, so no prefix is touched. */
                (void) recover_tidy(s, fd, name, false, 0);
                return -EBADMSG;
        }
        if (r < 0 && r != -ENOENT)
                return r;
        r = recover_tidy(s, fd, name, true, live);
        if (r < 0)
                return r;
        r = recover_records(fd, live);
        if (r < 0)
                return r;
        if (fsync(fd) < 0)
                return negative_errno();

        r = load_at(fd, name, &m);
        if (r < 0)
                return r;
        if (m->revision != live) {
                m->revision = live;
                r = save_at(fd, m);
                if (r < 0)
                        return r;
        }
        if (ret_revision)
                *ret_revision = live;
        return 0;
}

int env_store_retire(EnvStore *s, const char *name, unsigned revision) {
        _cleanup_free_ char *label = NULL;
        _cleanup_close_ int fd = -EBADF;
        char prefix[16];
        unsigned live = 0;
        struct stat st;
        int r;

        if (revision == 0)
                return -EINVAL;
        fd = open_env_dir(s, name);
        if (fd < 0)
                return fd == -ENOTDIR || fd == -ELOOP ? -ENOENT : fd;
        r = live_at(fd, &live);
        if (r < 0 && r != -ENOENT)
                return r;
        if (r >= 0 && live == revision)
                return -EBUSY;
        (void) snprintf(prefix, sizeof(prefix), "r%u", revision);
        if (fstatat(fd, prefix, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOENT;
        if (asprintf(&label, "%s-%s", name, prefix) < 0)
                return -ENOMEM;
        return move_to_trash(s, fd, prefix, label);
}

int env_store_remove(EnvStore *s, const char *name) {
        struct stat st;

        if (!env_name_valid(name))
                return -EINVAL;
        if (fstatat(s->envs_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOENT;
        return move_to_trash(s, s->envs_fd, name, name);
}

int env_store_trash_empty(EnvStore *s) {
        _cleanup_(dir_names_done) DirNames names = {};
        int r, ret = 0;

        r = dir_read_names(s->trash_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        for (size_t i = 0; i < names.n; i++) {
                r = rm_rf_at(s->trash_fd, names.v[i]);
                if (r == -ENOTDIR)
                        r = unlinkat(s->trash_fd, names.v[i], 0) < 0 && errno != ENOENT ? negative_errno() : 0;
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}
