/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/environment/env-store.h on a temporary state directory: the name rules,
 * meta.json's round trip and strict parsing, save/load/list, build -> publish -> live, every
 * crash point of the swap followed by recovery, retire, remove and the trash, client wheels by
 * SHA-256, and removals that must not follow a symlink out of a build directory or a prefix.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <sys/stat.h>
#include <unistd.h>

#include "environment/env-store-internal.h"
#include "environment/env-store.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/strv.h"
#include "test-dir.h"

#define HASH_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static void write_file(int dfd, const char *name, const void *data, size_t size) {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, size), (ssize_t) size);
        (void) close(fd);
}

static bool exists_at(int dfd, const char *path) {
        struct stat st;

        return fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) >= 0;
}

static size_t count_entries(int dfd, const char *path) {
        _cleanup_(dir_names_done) DirNames l = {};
        _cleanup_close_ int fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        assert_true(fd >= 0);
        assert_int_equal(dir_read_names(fd, NULL, 0, &l), 0);
        return l.n;
}

static EnvStore *open_store(TestDir *d) {
        EnvStore *s = NULL;

        assert_int_equal(env_store_open(d->path, &s), 0);
        return s;
}

/* A python environment @name saved with no revision. */
static void save_env(EnvStore *s, const char *name) {
        EnvMeta m = { .name = (char *) name, .kind = ENV_KIND_PYTHON };

        assert_int_equal(env_store_save(s, &m), 0);
}

static json_object *record_new(unsigned revision) {
        json_object *o = json_object_new_object();

        assert_non_null(o);
        assert_int_equal(json_object_object_add(o, "revision", json_object_new_int64(revision)), 0);
        assert_int_equal(json_object_object_add(o, "createdAt", json_object_new_string("2024-01-01T00:00:00Z")), 0);
        return o;
}

/* The "revision" of the @i-th record of @revs. */
static int record_revision(json_object *revs, size_t i) {
        return json_object_get_int(json_object_object_get(json_object_array_get_idx(revs, i), "revision"));
}

/* Build revision @rev of @name (a file "bin/marker" holding the revision) and publish it up to @upto. */
static int build_and_publish(EnvStore *s, const char *name, const char *id, unsigned rev, EnvPublishStep upto) {
        _cleanup_(json_object_putp) json_object *rec = record_new(rev);
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        char text[16];

        assert_int_equal(env_store_build_begin(s, name, id, &path), 0);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(mkdirat(fd, "bin", 0755), 0);
        (void) snprintf(text, sizeof(text), "%u", rev);
        write_file(fd, "bin/marker", text, strlen(text));
        return env_store_publish_upto(s, name, id, rev, rec, upto);
}

/* ---- names and meta.json ------------------------------------------------------------------------- */

static void test_names(void **state) {
        static const struct {
                const char *name;
                bool ok;
        } cases[] = {
                { "python-base", true },
                { "r-base", true },
                { "a", true },
                { "0", true },
                { "my_env.v2", true },
                { "a.b-c_d", true },
                { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true },    /* 63 */
                { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false },   /* 64 */
                { "", false },
                { "setup", false },                     /* the route /environments/setup */
                { "setup2", true },
                { "Python", false },
                { "-x", false },
                { ".x", false },
                { "_x", false },
                { "a..b", false },
                { "a/b", false },
                { "..", false },
                { "a b", false },
                { "a\n", false },
                { "\xc3\xa9", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                if (env_name_valid(cases[i].name) != cases[i].ok)
                        fail_msg("env_name_valid('%s') != %d", cases[i].name, cases[i].ok);
        }
        assert_false(env_name_valid(NULL));

        assert_true(env_setup_id_valid("a1B2-c_3"));
        assert_false(env_setup_id_valid(""));
        assert_false(env_setup_id_valid("a/b"));
        assert_false(env_setup_id_valid(".."));
        assert_false(env_setup_id_valid("a.b"));
        assert_false(env_setup_id_valid(NULL));

        assert_true(env_sha256_valid(HASH_ABC));
        assert_false(env_sha256_valid("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
        assert_false(env_sha256_valid("ba7816bf"));
        assert_false(env_sha256_valid(NULL));
}

static void test_display_names(void **state) {
        char long_ok[ENV_DISPLAY_NAME_MAX + 1], too_long[ENV_DISPLAY_NAME_MAX + 2];

        memset(long_ok, 'x', ENV_DISPLAY_NAME_MAX);
        long_ok[ENV_DISPLAY_NAME_MAX] = '\0';
        memset(too_long, 'x', ENV_DISPLAY_NAME_MAX + 1);
        too_long[ENV_DISPLAY_NAME_MAX + 1] = '\0';
        assert_true(env_display_name_valid("Sci Env"));
        assert_true(env_display_name_valid("Protein fold (v2) \xc3\xa9"));
        assert_true(env_display_name_valid(long_ok));
        assert_false(env_display_name_valid(too_long));
        assert_false(env_display_name_valid(""));
        assert_false(env_display_name_valid(NULL));
        assert_false(env_display_name_valid("a\tb"));
        assert_false(env_display_name_valid("a\x7f"));
        assert_false(env_display_name_valid("\xc3"));          /* cut UTF-8 */
        assert_false(env_display_name_valid("\xed\xa0\x80"));  /* a surrogate */
}

static void test_wheel_names(void **state) {
        static const struct {
                const char *file;
                bool ok;
        } cases[] = {
                { "tinya-1.0-py3-none-any.whl", true },
                { "pkg_b-2.0+local.1-py3-none-any.whl", true },
                { "x.whl", true },
                { ".whl", false },
                { ".hidden-1.0-py3-none-any.whl", false },
                { "../x.whl", false },
                { "a/b.whl", false },
                { "x.tar.gz", false },
                { "x.WHL", false },
                { "x whl.whl", false },
                { "x\n.whl", false },
                { "", false },
        };
        char long_name[300];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (env_wheel_file_valid(cases[i].file) != cases[i].ok)
                        fail_msg("env_wheel_file_valid('%s') != %d", cases[i].file, cases[i].ok);
        memset(long_name, 'a', sizeof(long_name));
        strcpy(long_name + 251, ".whl");                /* 255 bytes */
        assert_true(env_wheel_file_valid(long_name));
        memset(long_name, 'a', sizeof(long_name));
        strcpy(long_name + 252, ".whl");                /* 256 bytes */
        assert_false(env_wheel_file_valid(long_name));
}

static void test_meta_round_trip(void **state) {
        _cleanup_(json_object_putp) json_object *o = NULL, *o2 = NULL;
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        char *packages[] = { "numpy>=1.24", "pandas", NULL };
        char *debs[] = { "python3-numpy", NULL };
        char *channels[] = { "https://conda.example.org/main", NULL };
        EnvWheel wheels[] = { { HASH_ABC, "tinyc-1.0-py3-none-any.whl" } };
        EnvMeta in = {
                .name = "sci", .display_name = "Sci Env \xc3\xa9", .kind = ENV_KIND_CONDA, .base = true,
                .packages = packages,
                .debian_packages = debs, .wheels = wheels, .n_wheels = 1,
                .index_url = "https://pypi.example.org/simple", .preset = "tuna", .offline = true,
                .channels = channels, .revision = 7,
        };
        EnvMeta minimal = { .name = "m", .kind = ENV_KIND_R };

        o = env_meta_to_json(&in);
        assert_non_null(o);
        /* Through text, as it goes to disk. */
        o2 = json_tokener_parse(json_object_to_json_string(o));
        assert_non_null(o2);
        assert_int_equal(env_meta_from_json(o2, &m), 0);
        assert_string_equal(m->name, "sci");
        assert_string_equal(m->display_name, "Sci Env \xc3\xa9");
        assert_int_equal(m->kind, ENV_KIND_CONDA);
        assert_true(m->base);
        assert_int_equal(strv_length(m->packages), 2);
        assert_string_equal(m->packages[0], "numpy>=1.24");
        assert_string_equal(m->packages[1], "pandas");
        assert_int_equal(strv_length(m->debian_packages), 1);
        assert_string_equal(m->debian_packages[0], "python3-numpy");
        assert_int_equal(m->n_wheels, 1);
        assert_string_equal(m->wheels[0].sha256, HASH_ABC);
        assert_string_equal(m->wheels[0].file, "tinyc-1.0-py3-none-any.whl");
        assert_string_equal(m->index_url, "https://pypi.example.org/simple");
        assert_string_equal(m->preset, "tuna");
        assert_true(m->offline);
        assert_int_equal(strv_length(m->channels), 1);
        assert_int_equal(m->revision, 7);
        m = env_meta_free(m);

        /* NULL lists are written as [], no indexUrl and no preset. */
        json_object_put(o);
        o = env_meta_to_json(&minimal);
        assert_non_null(o);
        assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                            "{\"name\":\"m\",\"kind\":\"r\",\"base\":false,\"packages\":[],\"debianPackages\":[],"
                            "\"wheels\":[],\"offline\":false,\"channels\":[],\"revision\":0}");
        assert_int_equal(env_meta_from_json(o, &m), 0);
        assert_null(m->index_url);
        assert_null(m->preset);
        assert_null(m->display_name);
        assert_int_equal(m->n_wheels, 0);
        assert_int_equal(strv_length(m->packages), 0);
}

static void test_meta_strict(void **state) {
        static const char *const good[] = {
                "{\"name\":\"a\",\"kind\":\"python\"}",
                "{\"name\":\"a\",\"kind\":\"python\",\"indexUrl\":null,\"preset\":null}",
                "{\"name\":\"a\",\"kind\":\"python\",\"revision\":4294967295}",
                "{\"name\":\"a\",\"kind\":\"python\",\"displayName\":null}",
                "{\"name\":\"a\",\"kind\":\"python\",\"displayName\":\"My env \\u00e9\"}",
        };
        static const char *const bad[] = {
                "[]",
                "\"a\"",
                "{}",
                "{\"kind\":\"python\"}",                                        /* no name */
                "{\"name\":\"a\"}",                                             /* no kind */
                "{\"name\":\"a\",\"kind\":\"julia\"}",
                "{\"name\":\"a\",\"kind\":1}",
                "{\"name\":\"A\",\"kind\":\"python\"}",                         /* a bad name */
                "{\"name\":\"setup\",\"kind\":\"python\"}",
                "{\"name\":1,\"kind\":\"python\"}",
                "{\"name\":\"a\",\"kind\":\"python\",\"colour\":\"red\"}",      /* unknown field */
                "{\"name\":\"a\",\"kind\":\"python\",\"base\":\"yes\"}",
                "{\"name\":\"a\",\"kind\":\"python\",\"offline\":1}",
                "{\"name\":\"a\",\"kind\":\"python\",\"packages\":\"numpy\"}",
                "{\"name\":\"a\",\"kind\":\"python\",\"packages\":[1]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"packages\":[null]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"packages\":[\"a\\u0000b\"]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"debianPackages\":{}}",
                "{\"name\":\"a\",\"kind\":\"python\",\"channels\":[true]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"indexUrl\":5}",
                "{\"name\":\"a\",\"kind\":\"python\",\"preset\":[]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"displayName\":\"\"}",             /* empty */
                "{\"name\":\"a\",\"kind\":\"python\",\"displayName\":\"a\\nb\"}",         /* control */
                "{\"name\":\"a\",\"kind\":\"python\",\"displayName\":\"a\\u0000b\"}",
                "{\"name\":\"a\",\"kind\":\"python\",\"displayName\":7}",
                "{\"name\":\"a\",\"kind\":\"python\",\"revision\":-1}",
                "{\"name\":\"a\",\"kind\":\"python\",\"revision\":4294967296}",
                "{\"name\":\"a\",\"kind\":\"python\",\"revision\":1.5}",
                "{\"name\":\"a\",\"kind\":\"python\",\"revision\":\"1\"}",
                "{\"name\":\"a\",\"kind\":\"python\",\"wheels\":{}}",
                "{\"name\":\"a\",\"kind\":\"python\",\"wheels\":[\"x.whl\"]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"wheels\":[{\"sha256\":\"" HASH_ABC "\"}]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"wheels\":[{\"file\":\"x.whl\"}]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"wheels\":[{\"sha256\":\"abc\",\"file\":\"x.whl\"}]}",
                "{\"name\":\"a\",\"kind\":\"python\",\"wheels\":[{\"sha256\":\"" HASH_ABC "\",\"file\":\"../x.whl\"}]}",
                "{\"name\":\"a\",\"kind\":\"python\","
                "\"wheels\":[{\"sha256\":\"" HASH_ABC "\",\"file\":\"x.whl\",\"size\":1}]}",

        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                _cleanup_(json_object_putp) json_object *o = json_tokener_parse(good[i]);
                _cleanup_(env_meta_freep) EnvMeta *m = NULL;

                assert_non_null(o);
                if (env_meta_from_json(o, &m) != 0)
                        fail_msg("refused: %s", good[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(json_object_putp) json_object *o = json_tokener_parse(bad[i]);
                EnvMeta *m = NULL;

                assert_non_null(o);
                if (env_meta_from_json(o, &m) != -EBADMSG)
                        fail_msg("accepted: %s", bad[i]);
                assert_null(m);
        }
}

/* ---- the store ----------------------------------------------------------------------------------- */

static void test_open_save_load_list(void **state) {
        TestDir *d = *state;
        _cleanup_(env_store_freep) EnvStore *s = NULL;
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        _cleanup_(json_object_putp) json_object *cat = NULL;
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_free_ char *root = NULL, *text = NULL;
        char *pk[] = { "tinya==1.0", NULL };
        EnvMeta a = { .name = "zeta", .kind = ENV_KIND_PYTHON, .packages = pk,
                      .index_url = "https://x.example.org/simple" };
        EnvMeta b = { .name = "alpha", .kind = ENV_KIND_R };
        EnvMeta bad = { .name = "../x", .kind = ENV_KIND_R };
        struct stat st;
        size_t size;

        assert_int_equal(env_store_open("relative/dir", &s), -EINVAL);
        s = open_store(d);
        assert_non_null(s);
        assert_int_equal(asprintf(&root, "%s/environments", d->path) > 0, true);
        assert_string_equal(env_store_root(s), root);
        assert_int_equal(fstatat(d->fd, "environments/envs", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0750);
        assert_true(exists_at(d->fd, "environments/wheels"));
        assert_true(exists_at(d->fd, "environments/trash"));

        /* Empty. */
        assert_int_equal(env_store_list(s, &names), 0);
        assert_non_null(names);
        assert_int_equal(strv_length(names), 0);
        names = strv_free(names);

        assert_int_equal(env_store_save(s, &a), 0);
        assert_int_equal(env_store_save(s, &b), 0);
        assert_int_equal(env_store_save(s, &bad), -EINVAL);
        /* Not an environment: a directory without meta.json, a file, a bad name. */
        assert_int_equal(mkdirat(d->fd, "environments/envs/nometa", 0750), 0);
        write_file(d->fd, "environments/envs/file", "x", 1);
        assert_int_equal(mkdirat(d->fd, "environments/envs/Bad", 0750), 0);
        write_file(d->fd, "environments/envs/Bad/meta.json", "{}", 2);
        /* A temporary file of a crash: gone at the next open. */
        write_file(d->fd, "environments/.#catalog.json.0123", "x", 1);
        write_file(d->fd, "environments/wheels/.#wheel-0123", "x", 1);

        assert_int_equal(env_store_list(s, &names), 0);
        assert_int_equal(strv_length(names), 2);
        assert_string_equal(names[0], "alpha");
        assert_string_equal(names[1], "zeta");

        assert_int_equal(env_store_load(s, "zeta", &m), 0);
        assert_string_equal(m->name, "zeta");
        assert_int_equal(m->kind, ENV_KIND_PYTHON);
        assert_string_equal(m->packages[0], "tinya==1.0");
        assert_string_equal(m->index_url, "https://x.example.org/simple");
        m = env_meta_free(m);
        assert_int_equal(env_store_load(s, "missing", &m), -ENOENT);
        assert_int_equal(env_store_load(s, "nometa", &m), -ENOENT);
        assert_int_equal(env_store_load(s, "file", &m), -ENOENT);
        assert_int_equal(env_store_load(s, "../zeta", &m), -EINVAL);
        assert_null(m);

        /* Not JSON; another name inside. */
        write_file(d->fd, "environments/envs/alpha/meta.json", "{", 1);
        assert_int_equal(env_store_load(s, "alpha", &m), -EBADMSG);
        write_file(d->fd, "environments/envs/alpha/meta.json", "{\"name\":\"zeta\",\"kind\":\"r\"}", 26);
        assert_int_equal(env_store_load(s, "alpha", &m), -EBADMSG);
        assert_null(m);

        /* The catalog: replaced atomically, no temporary file left. */
        cat = json_object_new_object();
        assert_int_equal(json_object_object_add(cat, "preset", json_object_new_string("tuna")), 0);
        assert_int_equal(env_store_write_catalog(s, cat), 0);
        assert_int_equal(read_file_at(d->fd, "environments/catalog.json", 4096, &text, &size), 0);
        assert_non_null(strstr(text, "\"preset\": \"tuna\""));
        assert_int_equal(env_store_write_catalog(s, NULL), -EINVAL);

        s = env_store_free(s);
        s = open_store(d);
        assert_false(exists_at(d->fd, "environments/.#catalog.json.0123"));
        assert_false(exists_at(d->fd, "environments/wheels/.#wheel-0123"));
        assert_true(exists_at(d->fd, "environments/catalog.json"));
        assert_int_equal(count_entries(d->fd, "environments"), 4);    /* catalog.json envs trash wheels */
}

static void test_build_publish_live(void **state) {
        TestDir *d = *state;
        _cleanup_(env_store_freep) EnvStore *s = open_store(d);
        _cleanup_(json_object_putp) json_object *revs = NULL, *rec = record_new(9);
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        _cleanup_free_ char *path = NULL, *live = NULL, *expected = NULL;
        unsigned rev = 99;
        struct stat st;

        /* No environment yet: build_begin makes its directory, publish wants meta.json. */
        assert_int_equal(env_store_build_begin(s, "bad/name", "s1", &path), -EINVAL);
        assert_int_equal(env_store_build_begin(s, "sci", "../x", &path), -EINVAL);
        assert_int_equal(env_store_live(s, "sci", &rev, NULL), -ENOENT);
        save_env(s, "sci");
        assert_int_equal(env_store_live(s, "sci", &rev, NULL), -ENOENT);
        assert_int_equal(rev, 99);

        assert_int_equal(env_store_build_begin(s, "sci", "s1", &path), 0);
        assert_int_equal(asprintf(&expected, "%s/environments/envs/sci/build-s1", d->path) > 0, true);
        assert_string_equal(path, expected);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        /* A second begin gives a fresh, empty directory. */
        write_file(d->fd, "environments/envs/sci/build-s1/junk", "x", 1);
        path = mfree(path);
        assert_int_equal(env_store_build_begin(s, "sci", "s1", &path), 0);
        assert_int_equal(count_entries(d->fd, "environments/envs/sci/build-s1"), 0);

        assert_int_equal(env_store_publish(s, "sci", "s1", 0, rec), -EINVAL);
        assert_int_equal(env_store_publish(s, "sci", "s1", 1, NULL), -EINVAL);
        assert_int_equal(env_store_publish(s, "sci", "nobuild", 1, rec), -ENOENT);
        assert_int_equal(env_store_publish(s, "other", "s1", 1, rec), -ENOENT);
        assert_int_equal(build_and_publish(s, "sci", "s1", 1, ENV_PUBLISH_META), 0);
        assert_int_equal(env_store_live(s, "sci", &rev, &live), 0);
        assert_int_equal(rev, 1);
        expected = mfree(expected);
        assert_int_equal(asprintf(&expected, "%s/environments/envs/sci/r1", d->path) > 0, true);
        assert_string_equal(live, expected);
        assert_false(exists_at(d->fd, "environments/envs/sci/build-s1"));
        assert_true(exists_at(d->fd, "environments/envs/sci/r1/bin/marker"));
        assert_true(exists_at(d->fd, "environments/envs/sci/revisions/1.json"));
        assert_int_equal(env_store_load(s, "sci", &m), 0);
        assert_int_equal(m->revision, 1);
        m = env_meta_free(m);

        /* Revision 2: r1 stays until retired. */
        assert_int_equal(build_and_publish(s, "sci", "s2", 2, ENV_PUBLISH_META), 0);
        assert_int_equal(env_store_live(s, "sci", &rev, NULL), 0);
        assert_int_equal(rev, 2);
        assert_true(exists_at(d->fd, "environments/envs/sci/r1/bin/marker"));
        assert_true(exists_at(d->fd, "environments/envs/sci/r2/bin/marker"));
        assert_int_equal(env_store_load(s, "sci", &m), 0);
        assert_int_equal(m->revision, 2);

        /* r<N> exists: -EEXIST, the build left alone. */
        assert_int_equal(build_and_publish(s, "sci", "s3", 2, ENV_PUBLISH_META), -EEXIST);
        assert_true(exists_at(d->fd, "environments/envs/sci/build-s3"));
        assert_int_equal(env_store_build_abort(s, "sci", "s3"), 0);
        assert_false(exists_at(d->fd, "environments/envs/sci/build-s3"));
        assert_int_equal(env_store_build_abort(s, "sci", "s3"), 0);
        assert_int_equal(env_store_build_abort(s, "sci", "../s3"), -EINVAL);

        /* The records, ascending (revision 10 sorts after 2 by number, not by name). */
        assert_int_equal(env_store_revisions(s, "sci", &revs), 0);
        assert_int_equal(json_object_array_length(revs), 2);
        assert_int_equal(record_revision(revs, 0), 1);
        assert_int_equal(record_revision(revs, 1), 2);
        json_object_put(revs);
        assert_int_equal(build_and_publish(s, "sci", "s10", 10, ENV_PUBLISH_META), 0);
        assert_int_equal(env_store_revisions(s, "sci", &revs), 0);
        assert_int_equal(json_object_array_length(revs), 3);
        assert_int_equal(record_revision(revs, 2), 10);
        json_object_put(revs);
        revs = NULL;
        assert_int_equal(env_store_revisions(s, "missing", &revs), -ENOENT);

        /* Retire: never the live one. */
        assert_int_equal(env_store_retire(s, "sci", 10), -EBUSY);
        assert_int_equal(env_store_retire(s, "sci", 1), 0);
        assert_false(exists_at(d->fd, "environments/envs/sci/r1"));
        assert_int_equal(count_entries(d->fd, "environments/trash"), 1);
        assert_int_equal(env_store_retire(s, "sci", 1), -ENOENT);
        assert_int_equal(env_store_retire(s, "sci", 0), -EINVAL);
        assert_int_equal(env_store_live(s, "sci", &rev, NULL), 0);
        assert_int_equal(rev, 10);

        /* A fresh environment has no revisions: []. */
        save_env(s, "empty");
        assert_int_equal(env_store_revisions(s, "empty", &revs), 0);
        assert_int_equal(json_object_array_length(revs), 0);
}

/* The state after a crash at @upto while publishing revision 2 over revision 1, then recovery. */
static void crash_and_recover(TestDir *d, EnvPublishStep upto) {
        _cleanup_(env_store_freep) EnvStore *s = open_store(d);
        _cleanup_(json_object_putp) json_object *revs = NULL;
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        _cleanup_free_ char *marker = NULL;
        unsigned live = 0, expected = upto >= ENV_PUBLISH_SWAP ? 2 : 1;
        size_t size;

        save_env(s, "e");
        assert_int_equal(build_and_publish(s, "e", "one", 1, ENV_PUBLISH_META), 0);
        assert_int_equal(build_and_publish(s, "e", "two", 2, upto), 0);
        /* A build that never got anywhere, beside. */
        assert_int_equal(mkdirat(d->fd, "environments/envs/e/build-other", 0755), 0);

        /* Right after the crash, before any recovery: one prefix is live, never none. */
        assert_int_equal(env_store_live(s, "e", &live, NULL), 0);
        assert_int_equal(live, expected);

        /* The daemon starts again. */
        s = env_store_free(s);
        s = open_store(d);
        live = 99;
        assert_int_equal(env_store_recover(s, "e", &live), 0);
        assert_int_equal(live, expected);
        assert_int_equal(env_store_live(s, "e", &live, NULL), 0);
        assert_int_equal(live, expected);
        assert_int_equal(read_file_at(d->fd, expected == 2 ? "environments/envs/e/r2/bin/marker" :
                                                             "environments/envs/e/r1/bin/marker",
                                      64, &marker, &size), 0);
        assert_int_equal((unsigned) atoi(marker), expected);

        /* Build directories, live.new and the other prefix gone; meta.json agrees with live. */
        assert_false(exists_at(d->fd, "environments/envs/e/build-two"));
        assert_false(exists_at(d->fd, "environments/envs/e/build-other"));
        assert_false(exists_at(d->fd, "environments/envs/e/live.new"));
        assert_false(exists_at(d->fd, expected == 2 ? "environments/envs/e/r1" : "environments/envs/e/r2"));
        /* What stays: live, meta.json, revisions and the live prefix. */
        assert_int_equal(count_entries(d->fd, "environments/envs/e"), 4);
        assert_int_equal(env_store_load(s, "e", &m), 0);
        assert_int_equal(m->revision, expected);
        /* No record of a revision that never went live. */
        assert_int_equal(env_store_revisions(s, "e", &revs), 0);
        assert_int_equal(json_object_array_length(revs), expected);

        /* Recovery twice is recovery once; the next setup publishes as usual. */
        assert_int_equal(env_store_recover(s, "e", &live), 0);
        assert_int_equal(live, expected);
        assert_int_equal(build_and_publish(s, "e", "three", expected + 1, ENV_PUBLISH_META), 0);
        assert_int_equal(env_store_live(s, "e", &live, NULL), 0);
        assert_int_equal(live, expected + 1);
        assert_int_equal(env_store_trash_empty(s), 0);
        assert_int_equal(env_store_remove(s, "e"), 0);
        assert_int_equal(env_store_trash_empty(s), 0);
}

static void test_publish_crash_points(void **state) {
        TestDir *d = *state;

        for (EnvPublishStep step = ENV_PUBLISH_RECORD; step < _ENV_PUBLISH_STEP_MAX; step++)
                crash_and_recover(d, step);
}

static void test_recover_first_setup(void **state) {
        TestDir *d = *state;
        _cleanup_(env_store_freep) EnvStore *s = open_store(d);
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;
        unsigned live = 99;

        /* A first setup that died before its swap: no live prefix, and nothing left over. */
        save_env(s, "first");
        assert_int_equal(build_and_publish(s, "first", "a", 1, ENV_PUBLISH_SYMLINK), 0);
        assert_int_equal(env_store_live(s, "first", &live, NULL), -ENOENT);
        assert_int_equal(env_store_recover(s, "first", &live), 0);
        assert_int_equal(live, 0);
        assert_int_equal(count_entries(d->fd, "environments/envs/first"), 2);  /* meta.json, revisions */
        assert_int_equal(count_entries(d->fd, "environments/envs/first/revisions"), 0);

        /* Meta ahead of live (hand-edited): live wins. */
        assert_int_equal(env_store_load(s, "first", &m), 0);
        m->revision = 5;
        assert_int_equal(env_store_save(s, m), 0);
        m = env_meta_free(m);
        assert_int_equal(env_store_recover(s, "first", &live), 0);
        assert_int_equal(env_store_load(s, "first", &m), 0);
        assert_int_equal(m->revision, 0);

        /* A live symlink that is not ours: -EBADMSG, the prefixes left alone. */
        assert_int_equal(mkdirat(d->fd, "environments/envs/first/r3", 0755), 0);
        assert_int_equal(symlinkat("/etc", d->fd, "environments/envs/first/live"), 0);
        assert_int_equal(env_store_recover(s, "first", &live), -EBADMSG);
        assert_int_equal(env_store_live(s, "first", &live, NULL), -EBADMSG);
        assert_true(exists_at(d->fd, "environments/envs/first/r3"));

        /* No meta.json: tidied, and -ENOENT. */
        assert_int_equal(mkdirat(d->fd, "environments/envs/bare", 0750), 0);
        assert_int_equal(mkdirat(d->fd, "environments/envs/bare/build-x", 0750), 0);
        assert_int_equal(env_store_recover(s, "bare", &live), -ENOENT);
        assert_false(exists_at(d->fd, "environments/envs/bare/build-x"));
        assert_int_equal(env_store_recover(s, "nothing", &live), -ENOENT);
}

static void test_remove_trash(void **state) {
        TestDir *d = *state;
        _cleanup_(env_store_freep) EnvStore *s = open_store(d);
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_(env_meta_freep) EnvMeta *m = NULL;

        save_env(s, "gone");
        save_env(s, "kept");
        assert_int_equal(build_and_publish(s, "gone", "a", 1, ENV_PUBLISH_META), 0);
        assert_int_equal(env_store_remove(s, "gone"), 0);
        assert_int_equal(env_store_remove(s, "gone"), -ENOENT);
        assert_int_equal(env_store_remove(s, "never"), -ENOENT);
        assert_int_equal(env_store_remove(s, "Bad"), -EINVAL);
        assert_int_equal(env_store_load(s, "gone", &m), -ENOENT);
        assert_int_equal(env_store_list(s, &names), 0);
        assert_int_equal(strv_length(names), 1);
        assert_string_equal(names[0], "kept");
        assert_int_equal(count_entries(d->fd, "environments/trash"), 1);

        /* A file in the trash too. */
        write_file(d->fd, "environments/trash/stray", "x", 1);
        assert_int_equal(env_store_trash_empty(s), 0);
        assert_int_equal(count_entries(d->fd, "environments/trash"), 0);
        assert_int_equal(env_store_trash_empty(s), 0);
        assert_true(exists_at(d->fd, "environments/envs/kept/meta.json"));
}

/* ---- wheels -------------------------------------------------------------------------------------- */

static void test_wheels(void **state) {
        TestDir *d = *state;
        _cleanup_(env_store_freep) EnvStore *s = open_store(d);
        _cleanup_(env_wheel_done) EnvWheel w = {}, w2 = {}, w3 = {};
        _cleanup_free_ char *path = NULL, *expected = NULL, *data = NULL, *big = NULL;
        _cleanup_close_ int fd = -EBADF, bigfd = -EBADF, dfd = -EBADF;
        uint8_t digest[SHA256_DIGEST_SIZE];
        char hex[SHA256_DIGEST_SIZE * 2 + 1];
        struct sha256_ctx ctx;
        const size_t big_size = 300 * 1024 + 7;
        struct stat st;
        size_t size;

        write_file(d->fd, "abc.whl", "abc", 3);
        fd = openat(d->fd, "abc.whl", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        /* Read from its start, whatever its offset; the offset left alone. */
        assert_int_equal(lseek(fd, 2, SEEK_SET), 2);
        assert_int_equal(env_store_wheel_add(s, fd, "tinya-1.0-py3-none-any.whl", &w), 0);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 2);
        assert_string_equal(w.sha256, HASH_ABC);           /* FIPS 180-2's "abc" */
        assert_string_equal(w.file, "tinya-1.0-py3-none-any.whl");
        path = env_store_wheel_path(s, &w);
        assert_non_null(path);
        assert_int_equal(asprintf(&expected, "%s/environments/wheels/" HASH_ABC "/tinya-1.0-py3-none-any.whl",
                                  d->path) > 0, true);
        assert_string_equal(path, expected);
        assert_int_equal(read_file_at(AT_FDCWD, path, 64, &data, &size), 0);
        assert_int_equal(size, 3);
        assert_memory_equal(data, "abc", 3);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);

        /* Again: the same hash, the one copy kept, no temporary file left. */
        assert_int_equal(env_store_wheel_add(s, fd, "tinya-1.0-py3-none-any.whl", &w2), 0);
        assert_string_equal(w2.sha256, HASH_ABC);
        assert_int_equal(count_entries(d->fd, "environments/wheels"), 1);
        assert_int_equal(count_entries(d->fd, "environments/wheels/" HASH_ABC), 1);
        /* The same bytes under another name: a second file under the same hash. */
        assert_int_equal(env_store_wheel_add(s, fd, "tinyb-1.0-py3-none-any.whl", NULL), 0);
        assert_int_equal(count_entries(d->fd, "environments/wheels/" HASH_ABC), 2);

        /* Larger than the copy buffer: the hash is nettle's over the whole content. */
        big = malloc(big_size);
        assert_non_null(big);
        for (size_t i = 0; i < big_size; i++)
                big[i] = (char) (i * 131 + (i >> 9));
        write_file(d->fd, "big.whl", big, big_size);
        sha256_init(&ctx);
        sha256_update(&ctx, big_size, (const uint8_t *) big);
        sha256_digest(&ctx, sizeof(digest), digest);
        for (size_t i = 0; i < sizeof(digest); i++)
                (void) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        bigfd = openat(d->fd, "big.whl", O_RDONLY | O_CLOEXEC);
        assert_true(bigfd >= 0);
        assert_int_equal(env_store_wheel_add(s, bigfd, "big-1.0-py3-none-any.whl", &w3), 0);
        assert_string_equal(w3.sha256, hex);
        path = mfree(path);
        path = env_store_wheel_path(s, &w3);
        data = mfree(data);
        assert_int_equal(read_file_at(AT_FDCWD, path, big_size, &data, &size), 0);
        assert_int_equal(size, big_size);
        assert_memory_equal(data, big, big_size);

        /* Bad names and a non-regular fd refused, nothing written. */
        assert_int_equal(env_store_wheel_add(s, fd, "../x.whl", NULL), -EINVAL);
        assert_int_equal(env_store_wheel_add(s, fd, "a/b.whl", NULL), -EINVAL);
        assert_int_equal(env_store_wheel_add(s, fd, ".x.whl", NULL), -EINVAL);
        assert_int_equal(env_store_wheel_add(s, fd, "x.tar.gz", NULL), -EINVAL);
        assert_int_equal(env_store_wheel_add(s, fd, "", NULL), -EINVAL);
        dfd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(env_store_wheel_add(s, dfd, "x.whl", NULL), -EINVAL);
        assert_int_equal(count_entries(d->fd, "environments/wheels"), 2);

        /* A path of an invalid wheel: none. */
        assert_null(env_store_wheel_path(s, &(EnvWheel) { .sha256 = "../..", .file = "x.whl" }));
        assert_null(env_store_wheel_path(s, &(EnvWheel) { .sha256 = HASH_ABC, .file = "../x.whl" }));
}

/* ---- removal never follows a symlink out ---------------------------------------------------------- */

/* A tree like sandboxed code could leave: symlinks to a directory and a file outside, nested. */
static void plant_symlinks(int dfd, const char *dir, const char *outside) {
        _cleanup_close_ int fd = openat(dfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *file = NULL;

        assert_true(fd >= 0);
        assert_int_equal(asprintf(&file, "%s/precious", outside) > 0, true);
        assert_int_equal(symlinkat(outside, fd, "escape"), 0);
        assert_int_equal(symlinkat(file, fd, "escape-file"), 0);
        assert_int_equal(mkdirat(fd, "lib", 0755), 0);
        assert_int_equal(symlinkat(outside, fd, "lib/escape"), 0);
        assert_int_equal(symlinkat("../../../../outside", fd, "lib/relative"), 0);
        assert_int_equal(mkdirat(fd, "closed", 0755), 0);
        write_file(fd, "closed/f", "x", 1);
        assert_int_equal(fchmodat(fd, "closed", 0, 0), 0);
}

static void test_rm_does_not_escape(void **state) {
        TestDir *d = *state;
        _cleanup_(env_store_freep) EnvStore *s = open_store(d);
        _cleanup_free_ char *outside = NULL, *path = NULL;

        /* A sibling directory outside the store, with a file in it. */
        assert_int_equal(mkdirat(d->fd, "outside", 0755), 0);
        write_file(d->fd, "outside/precious", "keep me", 7);
        assert_int_equal(asprintf(&outside, "%s/outside", d->path) > 0, true);
        save_env(s, "evil");

        /* Aborted build. */
        assert_int_equal(env_store_build_begin(s, "evil", "a", &path), 0);
        plant_symlinks(d->fd, "environments/envs/evil/build-a", outside);
        assert_int_equal(env_store_build_abort(s, "evil", "a"), 0);
        assert_false(exists_at(d->fd, "environments/envs/evil/build-a"));
        assert_true(exists_at(d->fd, "outside/precious"));

        /* A fresh begin over a planted build directory. */
        path = mfree(path);
        assert_int_equal(env_store_build_begin(s, "evil", "b", &path), 0);
        plant_symlinks(d->fd, "environments/envs/evil/build-b", outside);
        path = mfree(path);
        assert_int_equal(env_store_build_begin(s, "evil", "b", &path), 0);
        assert_int_equal(count_entries(d->fd, "environments/envs/evil/build-b"), 0);
        assert_true(exists_at(d->fd, "outside/precious"));

        /* Recovery of a planted build directory. */
        plant_symlinks(d->fd, "environments/envs/evil/build-b", outside);
        assert_int_equal(env_store_recover(s, "evil", NULL), 0);
        assert_false(exists_at(d->fd, "environments/envs/evil/build-b"));
        assert_true(exists_at(d->fd, "outside/precious"));

        /* A published prefix with them, retired, then the whole environment removed; trash emptied. */
        path = mfree(path);
        assert_int_equal(env_store_build_begin(s, "evil", "c", &path), 0);
        plant_symlinks(d->fd, "environments/envs/evil/build-c", outside);
        assert_int_equal(env_store_publish(s, "evil", "c", 1, NULL), -EINVAL);
        {
                _cleanup_(json_object_putp) json_object *rec = record_new(1);

                assert_int_equal(env_store_publish(s, "evil", "c", 1, rec), 0);
        }
        assert_int_equal(build_and_publish(s, "evil", "d", 2, ENV_PUBLISH_META), 0);
        plant_symlinks(d->fd, "environments/envs/evil/r2", outside);
        assert_int_equal(env_store_retire(s, "evil", 1), 0);
        assert_int_equal(env_store_remove(s, "evil"), 0);
        assert_int_equal(env_store_trash_empty(s), 0);
        assert_int_equal(count_entries(d->fd, "environments/trash"), 0);
        assert_true(exists_at(d->fd, "outside/precious"));
        assert_int_equal(count_entries(d->fd, "outside"), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_display_names),
                cmocka_unit_test(test_wheel_names),
                cmocka_unit_test(test_meta_round_trip),
                cmocka_unit_test(test_meta_strict),
                cmocka_unit_test_setup_teardown(test_open_save_load_list, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_build_publish_live, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_publish_crash_points, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_recover_first_setup, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_remove_trash, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_wheels, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_rm_does_not_escape, test_dir_setup, test_dir_teardown),
        };

        return cmocka_run_group_tests_name("env-store", tests, NULL, NULL);
}
