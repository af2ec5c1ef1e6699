/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/daemon/preflight.c's pure parts: the report as text and JSON, the sysctl and
 * AppArmor readers and the item "userns" against fake /proc and /sys trees, the polkit rule's
 * directories under a fake root, and what a secret file must be. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "build-config.h"
#include "daemon/preflight.h"
#include "test-dir.h"
#include "util/macro.h"

/* Write @content to @dir/@rel, making the directories on the way (0755); NULL: nothing. */
static void put(const char *dir, const char *rel, const char *content, mode_t mode) {
        char path[512];
        FILE *f;

        if (!content)
                return;
        assert_true(snprintf(path, sizeof(path), "%s/%s", dir, rel) < (int) sizeof(path));
        for (char *s = strchr(path + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
                *s = '/';
        }
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fputs(content, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(chmod(path, mode), 0);
}

static void test_status_names(void **state) {
        assert_string_equal(preflight_status_to_string(PREFLIGHT_OK), "ok");
        assert_string_equal(preflight_status_to_string(PREFLIGHT_WARN), "warn");
        assert_string_equal(preflight_status_to_string(PREFLIGHT_FAIL), "fail");
        assert_null(preflight_status_to_string(_PREFLIGHT_STATUS_MAX));
        assert_null(preflight_status_to_string(_PREFLIGHT_STATUS_INVALID));
}

static void fill(PreflightReport *r, PreflightStatus last) {
        *r = (PreflightReport) {};
        assert_int_equal(preflight_item_set(&r->items[r->n++], "bwrap", PREFLIGHT_OK, "bubblewrap 0.8.0 at /b", NULL,
                                            "ignored for ok"), 0);
        assert_int_equal(preflight_item_set(&r->items[r->n++], "sandbox", PREFLIGHT_WARN, "usable", "No \"fresh\" /proc.",
                                            "Unmask /proc."), 0);
        assert_int_equal(preflight_item_set(&r->items[r->n++], "limits", last, "rlimits only", "No bus.", "Use systemd."),
                         0);
}

static void test_report_text(void **state) {
        PreflightReport r;
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        fill(&r, PREFLIGHT_FAIL);
        f = open_memstream(&buf, &size);
        assert_non_null(f);
        assert_int_equal(preflight_report_format(&r, f), 0);
        assert_int_equal(fclose(f), 0);
        assert_string_equal(buf,
                            "ok    bwrap        bubblewrap 0.8.0 at /b\n"
                            "warn  sandbox      usable. No \"fresh\" /proc. Fix: Unmask /proc.\n"
                            "fail  limits       rlimits only. No bus. Fix: Use systemd.\n");
        free(buf);
        preflight_report_done(&r);
        assert_int_equal(r.n, 0);
}

static void test_report_json(void **state) {
        static const struct {
                PreflightStatus last;
                bool ok;
        } cases[] = {
                { PREFLIGHT_FAIL, false },
                { PREFLIGHT_WARN, true  },      /* warnings do not fail */
                { PREFLIGHT_OK,   true  },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                PreflightReport r;
                json_object *o = NULL, *checks, *c;
                char expect[512];

                fill(&r, cases[i].last);
                assert_int_equal(preflight_report_ok(&r), cases[i].ok);
                assert_int_equal(preflight_report_json(&r, &o), 0);
                assert_true(json_object_object_get_ex(o, "checks", &checks));
                assert_int_equal(json_object_array_length(checks), 3);
                /* An ok item has no "fix", even when one was given; no "reason" when none. */
                assert_string_equal(json_object_to_json_string_ext(json_object_array_get_idx(checks, 0),
                                                                   JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                                    "{\"id\":\"bwrap\",\"status\":\"ok\",\"summary\":\"bubblewrap 0.8.0 at /b\"}");
                assert_string_equal(json_object_to_json_string_ext(json_object_array_get_idx(checks, 1),
                                                                   JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                                    "{\"id\":\"sandbox\",\"status\":\"warn\",\"summary\":\"usable\","
                                    "\"reason\":\"No \\\"fresh\\\" /proc.\",\"fix\":\"Unmask /proc.\"}");
                c = json_object_array_get_idx(checks, 2);
                (void) snprintf(expect, sizeof(expect), "%s", preflight_status_to_string(cases[i].last));
                assert_string_equal(json_object_get_string(json_object_object_get(c, "status")), expect);
                assert_int_equal(json_object_get_boolean(json_object_object_get(o, "ok")), cases[i].ok);
                json_object_put(o);
                preflight_report_done(&r);
        }
}

static void test_read_sysctl(void **state) {
        TestDir *d = *state;
        static const struct {
                const char *content;    /* NULL: no file */
                int r;
                long long v;
        } cases[] = {
                { "15000\n", 0,        15000 },
                { "0\n",     0,        0     },
                { "1",       0,        1     },
                { "-1\n",    0,        -1    },
                { "",        -EBADMSG, 0     },
                { "12 x\n",  -EBADMSG, 0     },
                { "on\n",    -EBADMSG, 0     },
                { NULL,      -ENOENT,  0     },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char name[32];
                long long v = 4242;

                (void) snprintf(name, sizeof(name), "kernel/knob%zu", i);
                {
                        char rel[64];
                        (void) snprintf(rel, sizeof(rel), "sys/%s", name);
                        put(d->path, rel, cases[i].content, 0644);
                }
                assert_int_equal(preflight_read_sysctl(d->path, name, &v), cases[i].r);
                assert_true(v == (cases[i].r == 0 ? cases[i].v : 4242));
        }
}

/* The item "userns" against a fake /proc (and /sys) built from each row. */
static void test_userns(void **state) {
        static const struct {
                const char *max, *clone, *restrict_, *profiles;   /* NULL: the file does not exist */
                PreflightStatus status;
                const char *in_reason, *in_summary, *in_fix;
        } cases[] = {
                { "0\n",     NULL,  NULL,  NULL, PREFLIGHT_FAIL, "user.max_user_namespaces is 0", "disabled",
                  "sysctl -w user.max_user_namespaces=" },
                { NULL,      NULL,  NULL,  NULL, PREFLIGHT_FAIL, "max_user_namespaces does not exist", "no user namespaces",
                  "CONFIG_USER_NS" },
                { "junk\n",  NULL,  NULL,  NULL, PREFLIGHT_WARN, "cannot be read", "unknown", NULL },
                { "15000\n", "0\n", NULL,  NULL, PREFLIGHT_FAIL, "kernel.unprivileged_userns_clone is 0",
                  "unprivileged user namespaces are disabled", "kernel.unprivileged_userns_clone=1" },
                { "15000\n", "1\n", NULL,  NULL, PREFLIGHT_OK, "user.max_user_namespaces is 15000", "available", NULL },
                { "15000\n", NULL,  "0\n", NULL, PREFLIGHT_OK, "is 15000", "available", NULL },
                { "15000\n", "1\n", "1\n", "firefox (enforce)\nunconfined-x (unconfined)\n", PREFLIGHT_WARN,
                  "no AppArmor profile for bwrap is loaded", "restricted by AppArmor", "docs/apparmor.md" },
                { "15000\n", NULL,  "1\n", NULL, PREFLIGHT_WARN, "cannot be read", "restricted by AppArmor",
                  "sandbox-runner-bwrap" },
                /* These two attach to the default path, not to this bwrap. */
                { "15000\n", NULL,  "1\n", "firefox (enforce)\nsandbox-runner-bwrap (unconfined)\n", PREFLIGHT_WARN,
                  "none named '/opt/bin/bwrap'", "restricted", "attached to [Execution] Bwrap=" },
                { "15000\n", NULL,  "1\n", "bwrap (unconfined)\n", PREFLIGHT_WARN, "none named '/opt/bin/bwrap'",
                  "restricted", NULL },
                { "15000\n", NULL,  "1\n", "/opt/bin/bwrap (unconfined)\n", PREFLIGHT_OK, "/opt/bin/bwrap",
                  "/opt/bin/bwrap", NULL },
                { "15000\n", NULL,  "1\n", "/usr/bin/bwrap (unconfined)\n", PREFLIGHT_WARN, "none named '/opt/bin/bwrap'",
                  "restricted", "apparmor_parser" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                TestDir *d = *state;
                char proc[128], sys[128];
                PreflightItem it = {};

                (void) snprintf(proc, sizeof(proc), "%s/%zu/proc", d->path, i);
                (void) snprintf(sys, sizeof(sys), "%s/%zu/sys", d->path, i);
                {
                        char base[128];
                        (void) snprintf(base, sizeof(base), "%s/%zu", d->path, i);
                        assert_int_equal(mkdir(base, 0755), 0);
                        assert_int_equal(mkdir(proc, 0755), 0);
                        assert_int_equal(mkdir(sys, 0755), 0);
                }
                put(proc, "sys/user/max_user_namespaces", cases[i].max, 0644);
                put(proc, "sys/kernel/unprivileged_userns_clone", cases[i].clone, 0644);
                put(proc, "sys/kernel/apparmor_restrict_unprivileged_userns", cases[i].restrict_, 0644);
                put(sys, "kernel/security/apparmor/profiles", cases[i].profiles, 0444);

                assert_int_equal(preflight_check_userns(&(const PreflightPaths) { .proc = proc, .sys = sys, .root = "" },
                                                        "/opt/bin/bwrap", &it), 0);
                print_message("# case %zu: %s\n", i, preflight_status_to_string(it.status));
                assert_string_equal(it.id, "userns");
                assert_int_equal(it.status, cases[i].status);
                assert_non_null(it.reason);
                assert_non_null(strstr(it.reason, cases[i].in_reason));
                assert_non_null(strstr(it.summary, cases[i].in_summary));
                if (cases[i].status == PREFLIGHT_OK)
                        assert_null(it.fix);
                else {
                        assert_non_null(it.fix);
                        if (cases[i].in_fix)
                                assert_non_null(strstr(it.fix, cases[i].in_fix));
                }
                preflight_item_done(&it);
        }
}

/* The default bwrap: Ubuntu's "bwrap", ours or one named by the path let it through, alone; two of them
 * are conflicting attachments, which the kernel applies neither of. */
static void test_userns_apparmor_default(void **state) {
        static const struct {
                const char *profiles;
                PreflightStatus status;
                const char *in_reason, *in_summary;
        } cases[] = {
                { "sandbox-runner-bwrap (unconfined)\n", PREFLIGHT_OK, "the profile 'sandbox-runner-bwrap'", "'sandbox-runner-bwrap'" },
                { "firefox (enforce)\nbwrap (unconfined)\n", PREFLIGHT_OK, "the profile 'bwrap'", "'bwrap'" },
                { BWRAP_DEFAULT " (unconfined)\n", PREFLIGHT_OK, "'" BWRAP_DEFAULT "'", BWRAP_DEFAULT },
                { "bwrap (unconfined)\nsandbox-runner-bwrap (unconfined)\n", PREFLIGHT_WARN,
                  "'bwrap' and 'sandbox-runner-bwrap' all attach to " BWRAP_DEFAULT, "conflicting" },
                { BWRAP_DEFAULT " (unconfined)\nbwrap (unconfined)\n", PREFLIGHT_WARN, "applies none of them", "conflicting" },
        };
        TestDir *d = *state;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char proc[128], sys[128];
                PreflightItem it = {};

                (void) snprintf(proc, sizeof(proc), "%s/d%zu-proc", d->path, i);
                (void) snprintf(sys, sizeof(sys), "%s/d%zu-sys", d->path, i);
                assert_int_equal(mkdir(proc, 0755), 0);
                assert_int_equal(mkdir(sys, 0755), 0);
                put(proc, "sys/user/max_user_namespaces", "15000\n", 0644);
                put(proc, "sys/kernel/apparmor_restrict_unprivileged_userns", "1\n", 0644);
                put(sys, "kernel/security/apparmor/profiles", cases[i].profiles, 0444);
                assert_int_equal(preflight_check_userns(&(const PreflightPaths) { .proc = proc, .sys = sys, .root = "" },
                                                        BWRAP_DEFAULT, &it), 0);
                print_message("# default bwrap, case %zu: %s: %s\n", i, preflight_status_to_string(it.status), it.reason);
                assert_int_equal(it.status, cases[i].status);
                assert_non_null(strstr(it.reason, cases[i].in_reason));
                assert_non_null(strstr(it.summary, cases[i].in_summary));
                if (it.status != PREFLIGHT_OK)
                        assert_non_null(strstr(it.fix, "docs/apparmor.md"));
                preflight_item_done(&it);
        }
}

/* Restricted and no profile loaded: the fix names the shipped profile's install for the default bwrap
 * (the meson option, the directory, the load command) and a copy of it for any other path. */
static void test_userns_apparmor_fix(void **state) {
        static const struct {
                const char *bwrap;
                const char *in_fix[3];
        } cases[] = {
                { BWRAP_DEFAULT, { "-Dapparmor=enabled", "'apparmor_parser -r " APPARMOR_DIR "/sandbox-runner-bwrap'",
                                   "docs/apparmor.md" } },
                { "/opt/bin/bwrap", { "a copy of 'sandbox-runner-bwrap'", "attached to [Execution] Bwrap= instead",
                                      "docs/apparmor.md" } },
        };
        TestDir *d = *state;
        char proc[128], sys[128];

        (void) snprintf(proc, sizeof(proc), "%s/proc", d->path);
        (void) snprintf(sys, sizeof(sys), "%s/sys", d->path);
        assert_int_equal(mkdir(proc, 0755), 0);
        assert_int_equal(mkdir(sys, 0755), 0);
        put(proc, "sys/user/max_user_namespaces", "15000\n", 0644);
        put(proc, "sys/kernel/apparmor_restrict_unprivileged_userns", "1\n", 0644);
        put(sys, "kernel/security/apparmor/profiles", "firefox (enforce)\n", 0444);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                PreflightItem it = {};

                assert_int_equal(preflight_check_userns(&(const PreflightPaths) { .proc = proc, .sys = sys, .root = "" },
                                                        cases[i].bwrap, &it), 0);
                assert_int_equal(it.status, PREFLIGHT_WARN);
                assert_non_null(it.fix);
                print_message("# %s: %s\n", cases[i].bwrap, it.fix);
                for (size_t j = 0; j < ELEMENTSOF(cases[i].in_fix); j++)
                        assert_non_null(strstr(it.fix, cases[i].in_fix[j]));
                preflight_item_done(&it);
        }
}

static void test_polkit_rule(void **state) {
        TestDir *d = *state;
        char *path = NULL, expect[256];

        assert_int_equal(preflight_find_polkit_rule(d->path, &path), -ENOENT);
        /* Where a /usr/local build used to put it: polkitd does not read it. */
        put(d->path, "usr/local/share/polkit-1/rules.d/" PREFLIGHT_POLKIT_RULE, "// rule\n", 0644);
        assert_int_equal(preflight_find_polkit_rule(d->path, &path), -ENOENT);

        put(d->path, "usr/share/polkit-1/rules.d/" PREFLIGHT_POLKIT_RULE, "// rule\n", 0644);
        assert_int_equal(preflight_find_polkit_rule(d->path, &path), 0);
        (void) snprintf(expect, sizeof(expect), "%s/usr/share/polkit-1/rules.d/" PREFLIGHT_POLKIT_RULE, d->path);
        assert_string_equal(path, expect);
        free(path);

        /* /etc first, as polkitd orders them. */
        put(d->path, "etc/polkit-1/rules.d/" PREFLIGHT_POLKIT_RULE, "// rule\n", 0644);
        assert_int_equal(preflight_find_polkit_rule(d->path, &path), 0);
        (void) snprintf(expect, sizeof(expect), "%s/etc/polkit-1/rules.d/" PREFLIGHT_POLKIT_RULE, d->path);
        assert_string_equal(path, expect);
        free(path);
}

static void test_secret_file(void **state) {
        TestDir *d = *state;
        static const struct {
                const char *content;    /* NULL: a symbolic link to the first file */
                mode_t mode;
                int r;
                const char *in_problem;
        } cases[] = {
                { "0123456789abcdef0123456789abcdef", 0600, 0,        NULL                  },
                { "0123456789abcdef0123456789abcdef", 0640, 0,        NULL                  },
                { "0123456789abcdef0123456789abcdef", 0644, -EPERM,   "mode 0644"           },
                { "0123456789abcdef0123456789abcdef", 0602, -EPERM,   "every user"          },
                { "",                                 0600, -ENODATA, "is empty"            },
                { "short",                            0600, -ENODATA, "fewer than the 16"   },
                { NULL,                               0777, -ELOOP,   "symbolic link"       },
        };
        char path[256], *problem = NULL;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char name[32];

                (void) snprintf(name, sizeof(name), "secret%zu", i);
                (void) snprintf(path, sizeof(path), "%s/%s", d->path, name);
                if (cases[i].content)
                        put(d->path, name, cases[i].content, cases[i].mode);
                else
                        assert_int_equal(symlink("secret0", path), 0);
                assert_int_equal(preflight_check_secret_file(path, true, &problem), cases[i].r);
                if (cases[i].r == 0)
                        assert_null(problem);
                else {
                        assert_non_null(problem);
                        assert_non_null(strstr(problem, cases[i].in_problem));
                        assert_non_null(strstr(problem, path));
                }
                problem = mfree(problem);
        }
        (void) snprintf(path, sizeof(path), "%s/missing", d->path);
        assert_int_equal(preflight_check_secret_file(path, true, &problem), -ENOENT);
        assert_non_null(strstr(problem, "cannot be found"));
        free(problem);
}

/* The item "dialects": only for a Listen= that names "sciencediscovery=", a warning that says what
 * that scheme leaves unsigned next to what ours signs. */
static void test_dialects(void **state) {
        char *none[] = { "127.0.0.1:4311", "api=127.0.0.1:4312", "/run/sandbox-runner/api.sock", NULL };
        char *one[] = { "127.0.0.1:4311", "sciencediscovery=127.0.0.1:4312", NULL };
        char *two[] = { "sciencediscovery=127.0.0.1:4312", "api=[::1]:4311", "sciencediscovery=/run/sd.sock",
                        NULL };
        char *sockets_api[] = { "api=127.0.0.1:4311 (sandbox-runner.socket)", NULL };
        char *sockets[] = { "api=127.0.0.1:4311 (sandbox-runner.socket)",
                            "sciencediscovery=127.0.0.1:4312 (sandbox-runner-sciencediscovery.socket)", NULL };
        PreflightItem it = { .id = "untouched" };

        assert_int_equal(preflight_check_dialects(NULL, NULL, &it), 0);
        assert_int_equal(preflight_check_dialects(none, none, &it), 0);
        assert_string_equal(it.id, "untouched");
        assert_null(it.summary);

        assert_int_equal(preflight_check_dialects(one, NULL, &it), 1);
        assert_string_equal(it.id, "dialects");
        assert_int_equal(it.status, PREFLIGHT_WARN);
        assert_string_equal(it.summary, "Listen= '127.0.0.1:4312' speaks the ScienceDiscovery dialect, whose signature "
                                        "covers less than ours");
        /* Theirs: what is signed, with which key, what is not; ours beside it. */
        assert_non_null(strstr(it.reason, "authenticates with the bearer token and signs only the timestamp and "
                                          "the body"));
        assert_non_null(strstr(it.reason, "keyed with that same token"));
        assert_non_null(strstr(it.reason, "the method, path and query are not signed and there is no nonce"));
        assert_non_null(strstr(it.reason, "signature stays good on every signed route for 30 s"));
        assert_non_null(strstr(it.reason, "Our own API (v1) signs the method, path, query, timestamp and body with a "
                                          "separate signing key"));
        assert_non_null(it.fix);
        preflight_item_done(&it);

        assert_int_equal(preflight_check_dialects(two, NULL, &it), 1);
        assert_string_equal(it.summary, "Listen= '127.0.0.1:4312', '/run/sd.sock' speak the ScienceDiscovery "
                                        "dialect, whose signature covers less than ours");
        preflight_item_done(&it);

        /* Under socket activation: the socket units' listeners (preflight_query_sockets()), alone
         * and beside Listen=. */
        assert_int_equal(preflight_check_dialects(NULL, sockets_api, &it), 0);
        assert_int_equal(preflight_check_dialects(NULL, sockets, &it), 1);
        assert_string_equal(it.summary, "the socket '127.0.0.1:4312 (sandbox-runner-sciencediscovery.socket)' "
                                        "speaks the ScienceDiscovery dialect, whose signature covers less than ours");
        preflight_item_done(&it);
        assert_int_equal(preflight_check_dialects(one, sockets, &it), 1);
        assert_string_equal(it.summary, "Listen= '127.0.0.1:4312' and the socket '127.0.0.1:4312 "
                                        "(sandbox-runner-sciencediscovery.socket)' speak the ScienceDiscovery dialect, "
                                        "whose signature covers less than ours");
        preflight_item_done(&it);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_status_names),
                cmocka_unit_test(test_report_text),
                cmocka_unit_test(test_report_json),
                cmocka_unit_test_setup_teardown(test_read_sysctl, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_userns, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_userns_apparmor_default, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_userns_apparmor_fix, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_polkit_rule, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_secret_file, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_dialects),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
