/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's skill packages (notes §11; docs/api.md 15.7): POST
 * /skill-packages checks a bundle (each file's size and SHA-256, SKILL.md, each skill's package
 * hash), stores it under its bundle id (<state>/sd-skills/<64 hex>: directories 0555, files 0444,
 * no symlinks, and .skill-bundle.json listing every file) and answers its root; GET
 * /skill-packages/{id} and every execution that names the root verify the stored files again
 * before use; executions bind it read-only at /skills. Built in a hidden temporary directory
 * and renamed into place: a refused or interrupted upload leaves nothing. May call core/,
 * workspace/ and the http/ transport.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nettle/base64.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/sd-internal.h"
#include "core/manager.h"
#include "execution/execution.h"
#include "http/http-server.h"
#include "sandbox/sandbox-argv.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "workspace/workspace.h"
#include "workspace/ws-files.h"

#define SKILLS_DIR "sd-skills"
#define BUNDLE_FILE ".skill-bundle.json"
#define SKILLS_MAX 64
#define SKILL_FILES_MAX 4096

/* ---- checks (pure) --------------------------------------------------------------------------- */

static bool skill_id_valid(const char *s) {
        /* ^[a-z0-9]+(-[a-z0-9]+)*$ */
        bool prev_dash = true;

        if (!s || !*s || strlen(s) > 128)
                return false;
        for (; *s; s++) {
                if (*s == '-') {
                        if (prev_dash)
                                return false;
                        prev_dash = true;
                } else if ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9'))
                        prev_dash = false;
                else
                        return false;
        }
        return !prev_dash;
}

static bool hex64_valid(const char *s) {
        if (!s || strlen(s) != 64)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

static void sha256_hex(struct sha256_ctx *ctx, char ret[static 65]) {
        uint8_t d[SHA256_DIGEST_SIZE];

        sha256_digest(ctx, sizeof(d), d);
        for (size_t i = 0; i < sizeof(d); i++)
                (void) snprintf(ret + 2 * i, 3, "%02x", d[i]);
}

static int base64_strict_decode(const char *s, size_t n, uint8_t **ret, size_t *ret_size) {
        struct base64_decode_ctx ctx;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size = 0;

        /* Groups of four, padding only at the end (nettle alone would also skip spaces). */
        if (n % 4 != 0)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '/' ||
                      (s[i] == '=' && i >= n - 2 && (i == n - 1 || s[n - 1] == '='))))
                        return -EBADMSG;
        buf = malloc(BASE64_DECODE_LENGTH(n) + 1);
        if (!buf)
                return -ENOMEM;
        base64_decode_init(&ctx);
        if (!base64_decode_update(&ctx, &size, buf, n, s) || !base64_decode_final(&ctx))
                return -EBADMSG;
        *ret = STEAL(buf);
        *ret_size = size;
        return 0;
}


static int compare_by(json_object *const *a, json_object *const *b, const char *key) {
        const char *x = json_get_string(*a, key), *y = json_get_string(*b, key);

        /* Code-unit order of their ids and paths: bytewise for the ASCII ids, and for UTF-8 paths
         * the same as UTF-16 outside the astral planes. */
        return strcmp(x ?: "", y ?: "");
}

static int compare_ids(const void *a, const void *b) {
        return compare_by(a, b, "id");
}

static int compare_paths(const void *a, const void *b) {
        return compare_by(a, b, "path");
}

/* The bundle id: SHA-256 hex of their identity string, the array sorted by id of
 * {hash, id, revision, version} in that key order, without spaces (json-c's plain form). */
static int bundle_id(json_object *skills, char ret[static 65]) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();
        struct sha256_ctx ctx;
        const char *s;

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(skills); i++) {
                json_object *k = json_object_array_get_idx(skills, i), *o = json_object_new_object(), *rev;

                if (!o || !json_object_object_get_ex(k, "revision", &rev))
                        return json_object_put(o), -ENOMEM;
                json_object_object_add(o, "hash", json_object_new_string(json_get_string(k, "hash")));
                json_object_object_add(o, "id", json_object_new_string(json_get_string(k, "id")));
                json_object_object_add(o, "revision", json_object_new_int64(json_object_get_int64(rev)));
                json_object_object_add(o, "version", json_object_new_string(json_get_string(k, "version")));
                json_object_array_add(a, o);
        }
        json_object_array_sort(a, compare_ids);
        s = json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s)
                return -ENOMEM;
        sha256_init(&ctx);
        sha256_update(&ctx, strlen(s), (const uint8_t *) s);
        sha256_hex(&ctx, ret);
        return 0;
}

/* One package's hash: per file sorted by path, "<bytes of path>:<path>:<size>:" then its bytes. */
typedef struct PackageHash {
        struct sha256_ctx ctx;
} PackageHash;

static void package_hash_file(PackageHash *h, const char *path, uint64_t size) {
        char head[64];
        int n;

        n = snprintf(head, sizeof(head), "%zu:", strlen(path));
        sha256_update(&h->ctx, (size_t) n, (const uint8_t *) head);
        sha256_update(&h->ctx, strlen(path), (const uint8_t *) path);
        n = snprintf(head, sizeof(head), ":%" PRIu64 ":", size);
        sha256_update(&h->ctx, (size_t) n, (const uint8_t *) head);
}

/* ---- storage --------------------------------------------------------------------------------- */

static int skills_dir_open(Manager *m, bool create) {
        _cleanup_free_ char *p = NULL;
        int fd;

        if (asprintf(&p, "%s/" SKILLS_DIR, m->state_dir) < 0)
                return -ENOMEM;
        if (create && mkdir(p, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

/* Count the entries below @dir of @root_fd: regular files with one link and mode 0444, and
 * directories; anything else (a symlink, a FIFO) is -EIO. */
static int count_files(int root_fd, const char *dir, size_t *n, unsigned depth) {
        WsEntry *entries = NULL;
        size_t k = 0;
        int r;

        if (depth > 64)
                return -EIO;
        r = ws_list_dir_max(root_fd, dir, SKILL_FILES_MAX, &entries, &k);
        if (r < 0)
                return r;
        for (size_t i = 0; r >= 0 && i < k; i++) {
                _cleanup_free_ char *p = NULL;

                if (depth == 0 && streq(entries[i].name, BUNDLE_FILE))
                        continue;
                if (asprintf(&p, "%s%s%s", dir, *dir ? "/" : "", entries[i].name) < 0)
                        r = -ENOMEM;
                else if (entries[i].type == WS_ENTRY_DIR)
                        r = count_files(root_fd, p, n, depth + 1);
                else if (entries[i].type == WS_ENTRY_FILE)
                        (*n)++;
                else
                        r = -EIO;
        }
        ws_entries_free(entries, k);
        return r;
}

static bool sig_equal(const SdpSkillSig *a, const struct stat *st) {
        return a->dev == st->st_dev && a->ino == st->st_ino && a->size == st->st_size &&
               a->mtime_nsec == (int64_t) st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec &&
               a->ctime_nsec == (int64_t) st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static void sig_set(SdpSkillSig *a, const struct stat *st) {
        *a = (SdpSkillSig) {
                .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size,
                .mtime_nsec = (int64_t) st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
                .ctime_nsec = (int64_t) st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec,
        };
}

/* One stored file against its manifest entry @f: mode 0444, size, and (unless @cached says the
 * inode is unchanged since it was hashed) its SHA-256; its signature into @sig. */
static int file_verify(int root, const char *sid, json_object *f, const SdpSkillSig *cached, SdpSkillSig *sig) {
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -EBADF;
        json_object *sz;
        struct stat st;
        uint8_t d[32];
        char hex[65];
        int r;

        if (!json_object_object_get_ex(f, "size", &sz) || !json_get_string(f, "path") || !json_get_string(f, "hash") ||
            asprintf(&p, "%s/%s", sid, json_get_string(f, "path")) < 0)
                return -EIO;
        r = ws_file_open_read(root, p, SDP_SKILLS_BODY_MAX, &fd, &st);
        if (r < 0 || (st.st_mode & 07777) != 0444 || (uint64_t) st.st_size != (uint64_t) json_object_get_int64(sz))
                return -EIO;
        sig_set(sig, &st);
        if (cached && sig_equal(cached, &st))
                return 0;
        r = ws_file_sha256(fd, (uint64_t) st.st_size, d);
        if (r < 0)
                return -EIO;
        for (size_t b = 0; b < 32; b++)
                (void) snprintf(hex + 2 * b, 3, "%02x", d[b]);
        return streq(hex, json_get_string(f, "hash")) ? 0 : -EIO;
}

int sdp_skills_verify(const char *state_dir, const char *id, const SdpSkillSig *cached, size_t n_cached,
                      SdpSkillSig **ret_sigs, size_t *ret_n) {
        _cleanup_(json_object_putp) json_object *rec = NULL;
        _cleanup_close_ int root = -EBADF;
        _cleanup_free_ char *text = NULL, *path = NULL;
        _cleanup_free_ SdpSkillSig *sigs = NULL;
        json_object *skills, *v;
        size_t size, expected = 0, found = 0, n_alloc = 64;
        struct stat st;
        int r;

        if (asprintf(&path, "%s/" SKILLS_DIR "/%s", state_dir, id) < 0)
                return -ENOMEM;
        root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        /* The manifest's signature first (entry 0), then read: a change after it shows next time. */
        if (fstatat(root, BUNDLE_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return -EIO;
        sigs = calloc(n_alloc, sizeof(*sigs));
        if (!sigs)
                return -ENOMEM;
        sig_set(&sigs[0], &st);
        if (n_cached == 0 || !sig_equal(&cached[0], &st))
                cached = NULL, n_cached = 0;
        r = read_file_at(root, BUNDLE_FILE, SDP_SKILLS_BODY_MAX, &text, &size);
        if (r < 0)
                return -EIO;
        rec = json_tokener_parse(text);
        if (!rec || !json_object_object_get_ex(rec, "id", &v) || !streq(json_object_get_string(v), id) ||
            !json_object_object_get_ex(rec, "skills", &skills) || !json_object_is_type(skills, json_type_array) ||
            json_object_array_length(skills) > SKILLS_MAX)
                return -EIO;
        for (size_t i = 0; i < json_object_array_length(skills); i++) {
                json_object *k = json_object_array_get_idx(skills, i), *files;
                const char *sid = json_get_string(k, "id");

                if (!skill_id_valid(sid) || !json_object_object_get_ex(k, "files", &files) ||
                    !json_object_is_type(files, json_type_array) || json_object_array_length(files) > SKILL_FILES_MAX)
                        return -EIO;
                for (size_t j = 0; j < json_object_array_length(files); j++) {
                        if (++expected >= n_alloc) {
                                SdpSkillSig *g = reallocarray(sigs, n_alloc * 2, sizeof(*sigs));

                                if (!g)
                                        return -ENOMEM;
                                sigs = g;
                                n_alloc *= 2;
                        }
                        r = file_verify(root, sid, json_object_array_get_idx(files, j),
                                        expected < n_cached ? &cached[expected] : NULL, &sigs[expected]);
                        if (r < 0)
                                return r;
                }
        }
        /* Nothing besides: no extra file, no symlink. */
        r = count_files(root, "", &found, 0);
        if (r < 0 || found != expected)
                return -EIO;
        /* Used now: its time of last use for the retention (sd-skill-store.c). */
        (void) futimens(root, (const struct timespec[2]) { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_NOW } });
        if (ret_sigs) {
                *ret_sigs = STEAL(sigs);
                *ret_n = expected + 1;
        }
        return 0;
}

static int package_verify(Manager *m, const char *id) {
        return sdp_skills_verify(m->state_dir, id, NULL, 0, NULL, NULL);
}

static int package_root(Manager *m, const char *id, char **ret) {
        return asprintf(ret, "%s/" SKILLS_DIR "/%s", m->state_dir, id) < 0 ? -ENOMEM : 0;
}

void sdp_skills_reply(Manager *m, HttpRequest *req, const char *id, bool held, unsigned status) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_free_ char *root = NULL;

        if (!o || (held && package_root(m, id, &root) < 0))
                return sdp_reply_error(req, 500, "Out of memory");
        json_object_object_add(o, "id", json_object_new_string(id));
        if (held)
                json_object_object_add(o, "root", json_object_new_string(root));
        sdp_reply_json(req, status, o);
}

uint64_t sdp_skills_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens) {
        return SDP_SKILLS_BODY_MAX;
}

/* Write one skill's files below @tmp_fd (already checked): "<skill id>/<path>", mode 0444. */
static int write_skill(int tmp_fd, const char *sid, json_object *files, json_object *decoded) {
        for (size_t j = 0; j < json_object_array_length(files); j++) {
                json_object *f = json_object_array_get_idx(files, j);
                json_object *bytes = json_object_array_get_idx(decoded, j);
                _cleanup_(ws_writer_freep) WsWriter *w = NULL;
                _cleanup_free_ char *p = NULL;
                int r;

                if (asprintf(&p, "%s/%s", sid, json_get_string(f, "path")) < 0)
                        return -ENOMEM;
                r = ws_writer_begin(tmp_fd, p, UINT64_MAX, true, &w);
                if (r >= 0)
                        r = ws_writer_write(w, json_object_get_string(bytes), (size_t) json_object_get_string_len(bytes));
                if (r >= 0)
                        r = ws_writer_chmod(w, 0444);
                if (r >= 0)
                        r = ws_writer_commit_noreplace(w, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Directories @mode: 0555 after the files are in (nobody adds anything later), 0700 to remove. */
int sdp_skills_seal_dirs(int fd, const char *dir, mode_t mode, unsigned depth) {
        _cleanup_close_ int dfd = -EBADF;
        WsEntry *entries = NULL;
        size_t n = 0;
        int r;

        r = ws_list_dir(fd, dir, &entries, &n);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *p = NULL;

                if (entries[i].type != WS_ENTRY_DIR)
                        continue;
                if (asprintf(&p, "%s%s%s", dir, *dir ? "/" : "", entries[i].name) < 0)
                        r = -ENOMEM;
                else
                        r = depth > 64 ? -E2BIG : sdp_skills_seal_dirs(fd, p, mode, depth + 1);
        }
        ws_entries_free(entries, n);
        if (r < 0)
                return r;
        dfd = ws_open_beneath(fd, dir, O_RDONLY | O_DIRECTORY);
        if (dfd < 0)
                return dfd;
        return fchmod(dfd, mode) < 0 ? negative_errno() : 0;
}

/* Check the whole bundle; the decoded bytes of each skill's files go to @decoded (one array of
 * strings per skill). Return: NULL, or the refusal (static text or @why). */
static const char *bundle_check(json_object *skills, json_object *decoded, char why[static 256]) {
        size_t n = json_object_array_length(skills);

        if (n == 0 || n > SKILLS_MAX)
                return "skills must list 1 to 64 skills";
        for (size_t i = 0; i < n; i++) {
                json_object *k = json_object_array_get_idx(skills, i), *files, *rev, *bytes;
                const char *sid = json_get_string(k, "id");
                PackageHash h;
                bool skill_md = false;
                char hex[65];

                if (!json_object_is_type(k, json_type_object) || !skill_id_valid(sid))
                        return "Each skill needs an id of lowercase letters, digits and single dashes";
                for (size_t j = 0; j < i; j++)
                        if (streq(sid, json_get_string(json_object_array_get_idx(skills, j), "id")))
                                return "Duplicate skill id";
                if (!json_object_object_get_ex(k, "revision", &rev) || !json_object_is_type(rev, json_type_int) ||
                    json_object_get_int64(rev) < 1)
                        return "Each skill needs an integer revision of at least 1";
                if (!json_get_string(k, "version") || !hex64_valid(json_get_string(k, "hash")))
                        return "Each skill needs a version and a 64 hex hash";
                if (!json_object_object_get_ex(k, "files", &files) || !json_object_is_type(files, json_type_array) ||
                    json_object_array_length(files) == 0 || json_object_array_length(files) > SKILL_FILES_MAX)
                        return "Each skill needs its files";
                bytes = json_object_new_array();
                if (!bytes || json_object_array_add(decoded, bytes) < 0)
                        return "Out of memory";
                json_object_array_sort(files, compare_paths);
                sha256_init(&h.ctx);
                for (size_t j = 0; j < json_object_array_length(files); j++) {
                        json_object *f = json_object_array_get_idx(files, j), *sz, *c;
                        const char *path = json_get_string(f, "path"), *content = json_get_string(f, "content");
                        _cleanup_free_ uint8_t *data = NULL;
                        struct sha256_ctx fh;
                        size_t size;

                        if (!sdp_path_valid(path) || !content || !hex64_valid(json_get_string(f, "hash")) ||
                            !json_object_object_get_ex(f, "size", &sz) || !json_object_is_type(sz, json_type_int))
                                return "Each skill file needs a valid path, base64 content, size and hash";
                        if (j > 0 && streq(path, json_get_string(json_object_array_get_idx(files, j - 1), "path")))
                                return "Duplicate skill file path";
                        if (base64_strict_decode(content, strlen(content), &data, &size) < 0)
                                return "Skill file content must be base64";
                        if ((uint64_t) json_object_get_int64(sz) != size) {
                                (void) snprintf(why, 256, "Skill file size mismatch: %.64s/%.128s", sid, path);
                                return why;
                        }
                        sha256_init(&fh);
                        sha256_update(&fh, size, data);
                        sha256_hex(&fh, hex);
                        if (!streq(hex, json_get_string(f, "hash"))) {
                                (void) snprintf(why, 256, "Skill file hash mismatch: %.64s/%.128s", sid, path);
                                return why;
                        }
                        package_hash_file(&h, path, size);
                        sha256_update(&h.ctx, size, data);
                        skill_md = skill_md || streq(path, "SKILL.md");
                        c = json_object_new_string_len((const char *) data, (int) size);
                        if (!c || json_object_array_add(bytes, c) < 0)
                                return "Out of memory";
                }
                if (!skill_md)
                        return "Each skill package requires SKILL.md";
                sha256_hex(&h.ctx, hex);
                if (!streq(hex, json_get_string(k, "hash"))) {
                        (void) snprintf(why, 256, "Skill package hash mismatch: %.64s", sid);
                        return why;
                }
        }
        return NULL;
}

/* The record kept beside the files: the bundle without the contents. */
static json_object *bundle_record(const char *id, json_object *skills) {
        json_object *rec = json_object_new_object(), *list = json_object_new_array();

        if (!rec || !list) {
                json_object_put(rec);
                json_object_put(list);
                return NULL;
        }
        json_object_object_add(rec, "id", json_object_new_string(id));
        for (size_t i = 0; i < json_object_array_length(skills); i++) {
                json_object *k = json_object_array_get_idx(skills, i), *o = json_object_new_object(), *files, *fl, *v;

                if (!o)
                        break;
                json_object_object_add(o, "id", json_object_new_string(json_get_string(k, "id")));
                if (json_object_object_get_ex(k, "revision", &v))
                        json_object_object_add(o, "revision", json_object_get(v));
                json_object_object_add(o, "version", json_object_new_string(json_get_string(k, "version")));
                json_object_object_add(o, "hash", json_object_new_string(json_get_string(k, "hash")));
                fl = json_object_new_array();
                (void) json_object_object_get_ex(k, "files", &files);
                for (size_t j = 0; fl && j < json_object_array_length(files); j++) {
                        json_object *f = json_object_array_get_idx(files, j), *e = json_object_new_object();

                        if (!e)
                                break;
                        json_object_object_add(e, "path", json_object_new_string(json_get_string(f, "path")));
                        if (json_object_object_get_ex(f, "size", &v))
                                json_object_object_add(e, "size", json_object_get(v));
                        json_object_object_add(e, "hash", json_object_new_string(json_get_string(f, "hash")));
                        json_object_array_add(fl, e);
                }
                json_object_object_add(o, "files", fl);
                json_object_array_add(list, o);
        }
        json_object_object_add(rec, "skills", list);
        return rec;
}

void sdp_skills_post(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *decoded = json_object_new_array(), *rec = NULL;
        _cleanup_close_ int dfd = -EBADF, tmp_fd = -EBADF;
        json_object *skills;
        const char *refusal;
        char id[65], why[256], tmp[64];
        uint64_t rnd = 0;
        int r;

        if (!decoded)
                return sdp_reply_error(req, 500, "Out of memory");
        if (!json_object_object_get_ex(body, "skills", &skills) || !json_object_is_type(skills, json_type_array))
                return sdp_reply_error(req, 400, "skills must be an array");
        refusal = bundle_check(skills, decoded, why);
        if (refusal)
                return sdp_reply_error(req, 400, "%s", refusal);
        r = bundle_id(skills, id);
        if (r < 0)
                return sdp_reply_error(req, 500, "Out of memory");
        if (package_verify(m, id) >= 0)
                return sdp_skills_reply(m, req, id, true, 200);
        sdp_skills_forget(id);

        /* Built aside, renamed into place: a package is whole or absent. */
        dfd = skills_dir_open(m, true);
        if (dfd < 0)
                return sdp_reply_error(req, 500, "The skill store cannot be opened: %s", strerror(-dfd));
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                return sdp_reply_error(req, 500, "No random bytes for the skill store's temporary name: %m");
        (void) snprintf(tmp, sizeof(tmp), ".tmp-%016" PRIx64, rnd);
        if (mkdirat(dfd, tmp, 0700) < 0)
                return sdp_reply_error(req, 500, "The skill store cannot be written: %m");
        tmp_fd = openat(dfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = tmp_fd < 0 ? negative_errno() : 0;
        for (size_t i = 0; r >= 0 && i < json_object_array_length(skills); i++) {
                json_object *k = json_object_array_get_idx(skills, i), *files;

                (void) json_object_object_get_ex(k, "files", &files);
                r = write_skill(tmp_fd, json_get_string(k, "id"), files, json_object_array_get_idx(decoded, i));
        }
        rec = r >= 0 ? bundle_record(id, skills) : NULL;
        if (r >= 0)
                r = rec ? json_write_file_atomic_at(tmp_fd, BUNDLE_FILE, rec, JSON_C_TO_STRING_PLAIN, 0444) : -ENOMEM;
        if (r >= 0)
                r = sdp_skills_seal_dirs(tmp_fd, "", 0555, 0);
        if (r >= 0 && renameat(dfd, tmp, dfd, id) >= 0)
                tmp_fd = safe_close(tmp_fd);
        else {
                if (r >= 0) {
                        r = negative_errno();
                        /* Another request stored the same bundle meanwhile: theirs is as good. */
                        if (r == -EEXIST || r == -ENOTEMPTY)
                                r = package_verify(m, id);
                }
                /* Make the leftovers removable again, then remove them. */
                if (tmp_fd >= 0)
                        (void) sdp_skills_seal_dirs(tmp_fd, "", 0700, 0);
                (void) rm_rf_at(dfd, tmp);
        }
        if (r < 0)
                return sdp_reply_error(req, 500, "The skill package cannot be stored: %s", strerror(-r));
        (void) fsync(dfd);
        sdp_skills_prune(m, dfd, id);
        sdp_skills_reply(m, req, id, true, 200);
}

/* ---- in executions --------------------------------------------------------------------------- */

void sdp_skills_env(json_object *env) {
        json_object_object_add(env, "SCIENCEDISCOVERY_SKILLS_DIR", json_object_new_string(SDP_SKILLS_PATH));
        json_object_object_add(env, "SCIENCEDISCOVERY_SKILL_EXTENSIONS_DIR",
                               json_object_new_string(SDP_SKILL_EXTENSIONS_PATH));
}

/* The workspace's .sciencediscovery/skill-extensions, made where missing: one component at a
 * time from the workspace's fd, never through a symlink (the sandbox may have placed one). */
static void extensions_dir_make(Manager *m, const char *ws) {
        _cleanup_close_ int ws_fd = -EBADF, fd = -EBADF;

        ws_fd = workspace_open(m->workspaces_fd, ws);
        if (ws_fd < 0)
                return;
        (void) mkdirat(ws_fd, ".sciencediscovery", 0700);
        fd = openat(ws_fd, ".sciencediscovery", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                (void) mkdirat(fd, "skill-extensions", 0700);
}

int sdp_skills_attach(Manager *m, Execution *e, const char *dir, const char *ws) {
        extensions_dir_make(m, ws);
        /* The link is read inside the sandbox: it reaches only the sandbox's own /workspace,
         * whatever the payload makes of the directory (a host-side bind would follow it). */
        if (sdp_skills_hold(e, dir) < 0 || execution_add_bind(e, dir, SDP_SKILLS_PATH, false) < 0 ||
            execution_add_symlink(e, SANDBOX_WORKSPACE "/" SDP_SKILL_EXTENSIONS_DIR, SDP_SKILL_EXTENSIONS_PATH) < 0)
                return -ENOMEM;
        return 0;
}
