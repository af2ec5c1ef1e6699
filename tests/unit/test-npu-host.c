/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/npu/npu-host.c: the device-node scan of a temporary directory (character
 * devices made with mknod(), so the test must run as root, as CI does: it fails, it does not
 * skip, elsewhere) next to regular files, symlinks, directories and names that are not chips, and
 * why a scan failed, naming the directory;
 * npu_run_capture() (stdout, stderr's last line, exit status, signals, the timeout, the 1 MiB cap,
 * a missing program, stdin and inherited fds, SIGCHLD ignored); npu_host_read_state() through a fake libdcmi.so
 * (tests/helpers/fake-dcmi.c), one without dcmi_get_device_health() (falls back), and fake
 * npu-smi scripts: one that works, one that hangs, one that exits 1, one that prints garbage.
 */

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "npu/npu-host.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/time-util.h"
#include "test-dir.h"

static void make_file(int dfd, const char *name, const char *content, mode_t mode) {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t) strlen(content));
        assert_int_equal(close(fd), 0);
}

static void make_char_device(int dfd, const char *name) {
        struct stat st;

        assert_int_equal(stat("/dev/null", &st), 0);
        if (mknodat(dfd, name, S_IFCHR | 0600, st.st_rdev) < 0)
                fail_msg("mknod('%s') failed (%m, euid %u): this test makes character devices and must run as "
                         "root with CAP_MKNOD, as CI does", name, (unsigned) geteuid());
}

static void test_scan_nodes(void **state) {
        TestDir *d = *state;
        _cleanup_(npu_host_nodes_done) NpuHostNodes n = {};
        static const char *const chips[] = { "davinci3", "davinci1", "davinci12", "davinci0", "davinci999999999" };
        static const char *const not_chips[] = { "davinci01", "davinci", "davinci1234567890", "davinciX", "davinci-1",
                                                 "davinci 2", "Davinci4", "xdavinci5", "null", "devmm_svm2" };

        for (size_t i = 0; i < ELEMENTSOF(chips); i++)
                make_char_device(d->fd, chips[i]);
        for (size_t i = 0; i < ELEMENTSOF(not_chips); i++)
                make_char_device(d->fd, not_chips[i]);
        make_char_device(d->fd, "davinci_manager");
        make_char_device(d->fd, "hisi_hdc");
        /* the right names, but not character devices: not counted */
        make_file(d->fd, "davinci5", "", 0600);
        make_file(d->fd, "devmm_svm", "", 0600);
        assert_int_equal(symlinkat("/dev/null", d->fd, "davinci6"), 0);
        assert_int_equal(mkdirat(d->fd, "davinci7", 0700), 0);
        assert_int_equal(mkfifoat(d->fd, "davinci8", 0600), 0);

        assert_int_equal(npu_host_scan_nodes(d->path, &n, NULL), 0);
        assert_int_equal(n.n_chips, 5);
        assert_int_equal(n.chips[0], 0);
        assert_int_equal(n.chips[1], 1);
        assert_int_equal(n.chips[2], 3);
        assert_int_equal(n.chips[3], 12);
        assert_int_equal(n.chips[4], 999999999);
        assert_int_equal(strv_length(n.mgmt), 2);
        assert_string_equal(n.mgmt[0], "davinci_manager");      /* the order of NPU_MGMT_NODES */
        assert_string_equal(n.mgmt[1], "hisi_hdc");
}

static void test_scan_nodes_empty(void **state) {
        TestDir *d = *state;
        _cleanup_(npu_host_nodes_done) NpuHostNodes n = {}, dev = {};
        NpuHostNodes none = { .n_chips = 77 };
        _cleanup_free_ char *missing = NULL;

        assert_int_equal(npu_host_scan_nodes(d->path, &n, NULL), 0);
        assert_int_equal(n.n_chips, 0);
        assert_non_null(n.mgmt);
        assert_null(n.mgmt[0]);

        assert_true(asprintf(&missing, "%s/no-such-dir", d->path) > 0);
        assert_int_equal(npu_host_scan_nodes(missing, &none, NULL), -ENOENT);
        assert_int_equal(none.n_chips, 77);                     /* untouched */

        /* the host's /dev: whatever it has, each chip listed is a character device there */
        assert_int_equal(npu_host_scan_nodes("/dev", &dev, NULL), 0);
        for (size_t i = 0; i < dev.n_chips; i++) {
                char path[64];
                struct stat st;

                (void) snprintf(path, sizeof(path), "/dev/davinci%u", dev.chips[i]);
                assert_int_equal(lstat(path, &st), 0);
                assert_true(S_ISCHR(st.st_mode));
        }
}

/* A failed scan says why, naming the device root: what /npu/chips and /health show (issue 21). */
static void test_scan_nodes_why(void **state) {
        TestDir *d = *state;
        _cleanup_(npu_host_nodes_done) NpuHostNodes n = {};
        _cleanup_free_ char *missing = NULL, *file = NULL, *many = NULL, *want = NULL, *why = NULL;
        _cleanup_close_ int many_fd = -EBADF;

        assert_true(asprintf(&missing, "%s/no-such-dir", d->path) > 0);
        assert_int_equal(npu_host_scan_nodes(missing, &n, &why), -ENOENT);
        assert_true(asprintf(&want, "cannot open the NPU device root '%s' ([NPU] DeviceRoot=): %s", missing,
                             strerror(ENOENT)) > 0);
        assert_string_equal(why, want);
        why = mfree(why);
        want = mfree(want);

        make_file(d->fd, "not-a-dir", "", 0600);
        assert_true(asprintf(&file, "%s/not-a-dir", d->path) > 0);
        assert_int_equal(npu_host_scan_nodes(file, &n, &why), -ENOTDIR);
        assert_true(asprintf(&want, "cannot open the NPU device root '%s' ([NPU] DeviceRoot=): %s", file,
                             strerror(ENOTDIR)) > 0);
        assert_string_equal(why, want);
        why = mfree(why);
        want = mfree(want);

        /* one chip more than NPU_SMI_CHIPS_MAX */
        assert_int_equal(mkdirat(d->fd, "many", 0700), 0);
        many_fd = openat(d->fd, "many", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(many_fd >= 0);
        for (unsigned i = 0; i <= NPU_SMI_CHIPS_MAX; i++) {
                char name[32];

                (void) snprintf(name, sizeof(name), "davinci%u", i);
                make_char_device(many_fd, name);
        }
        assert_true(asprintf(&many, "%s/many", d->path) > 0);
        assert_int_equal(npu_host_scan_nodes(many, &n, &why), -E2BIG);
        assert_true(asprintf(&want, "the NPU device root '%s' ([NPU] DeviceRoot=) has more than %d chips", many,
                             NPU_SMI_CHIPS_MAX) > 0);
        assert_string_equal(why, want);
        why = mfree(why);

        /* success leaves it alone */
        assert_int_equal(npu_host_scan_nodes(d->path, &n, &why), 0);
        assert_null(why);
}

typedef struct RunCase {
        const char *script;             /* for /bin/sh -c */
        uint64_t timeout_usec;
        int r, status;
        const char *out, *err;          /* expected stdout; a substring of the reason or stderr line (NULL: none) */
} RunCase;

static void test_run_capture(void **state) {
        static const RunCase cases[] = {
                { "echo hello; echo world", 0, 0, 0, "hello\nworld\n", NULL },
                { "printf 'a\\nb'; echo first >&2; printf 'last line\\n\\n  \\n' >&2; exit 3", 0, 0, 3, "a\nb", "last line" },
                { "echo one >&2; printf 'two' >&2; exit 1", 0, 0, 1, "", "two" },
                { "printf '\\001bad\\377' >&2; exit 1", 0, 0, 1, "", "?bad?" },
                { "cat", 5 * USEC_PER_SEC, 0, 0, "", NULL },                   /* stdin is /dev/null */
                { "ls /proc/$$/fd", 5 * USEC_PER_SEC, 0, 0, "0\n1\n2\n", NULL },  /* no fd leaks in */
                { "kill -TERM $$", 0, 0, -1, "", NULL },                       /* a signal: -1 */
                { "sleep 30", 300 * USEC_PER_MSEC, -ETIMEDOUT, 0, NULL, "did not finish within 300 ms" },
                { "sleep 30 & wait", 300 * USEC_PER_MSEC, -ETIMEDOUT, 0, NULL, "did not finish" },
                { "exec 1>&-; sleep 30", 300 * USEC_PER_MSEC, -ETIMEDOUT, 0, NULL, "did not finish" },
                { "head -c 1048576 /dev/zero", 10 * USEC_PER_SEC, 0, 0, NULL, NULL },  /* exactly 1 MiB */
                { "head -c 1048577 /dev/zero; sleep 30", 10 * USEC_PER_SEC, -EFBIG, 0, NULL, "printed more than 1048576" },
        };
        _cleanup_close_ int leak = open("/dev/null", O_RDONLY);         /* not CLOEXEC on purpose */

        assert_true(leak >= 0);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) cases[i].script, NULL };
                _cleanup_free_ char *out = NULL, *err = NULL;
                uint64_t t0 = now_usec(CLOCK_MONOTONIC);
                size_t len = 0;
                int status = 12345, r;

                r = npu_run_capture(argv, cases[i].timeout_usec, &out, &len, &status, &err);
                if (r != cases[i].r)
                        fail_msg("case %zu: %d, expected %d (%s)", i, r, cases[i].r, err ?: "-");
                assert_true(now_usec(CLOCK_MONOTONIC) - t0 < 5 * USEC_PER_SEC);   /* sleep 30 was killed */
                if (cases[i].err) {
                        if (!err || !strstr(err, cases[i].err))
                                fail_msg("case %zu: '%s', expected '%s'", i, err ?: "(null)", cases[i].err);
                } else
                        assert_null(err);
                if (r < 0)
                        continue;
                assert_int_equal(status, cases[i].status);
                assert_int_equal(strlen(out) == len || cases[i].out == NULL, true);
                if (cases[i].out)
                        assert_string_equal(out, cases[i].out);
                else
                        assert_int_equal(len, NPU_RUN_OUTPUT_MAX);
        }
}

static void test_run_capture_exec_failure(void **state) {
        char *argv[] = { (char *) "/nonexistent/npu-smi", (char *) "info", NULL };
        char *bare[] = { (char *) "sr-no-such-program-anywhere", NULL };
        _cleanup_free_ char *err = NULL, *err2 = NULL, *out = NULL;
        size_t len = 0;
        int status = 0;

        assert_int_equal(npu_run_capture(argv, 0, &out, &len, &status, &err), -ENOENT);
        assert_non_null(strstr(err, "Failed to execute '/nonexistent/npu-smi': No such file or directory"));
        assert_null(out);
        assert_int_equal(npu_run_capture(bare, 0, &out, &len, &status, &err2), -ENOENT);    /* $PATH searched */
        assert_int_equal(npu_run_capture(NULL, 0, &out, &len, &status, &err2), -EINVAL);
}

/* With SIGCHLD ignored the kernel reaps the child: no hang, the status is reported lost (-1). */
static void test_run_capture_sigchld_ignored(void **state) {
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) "echo out; exit 3", NULL };
        _cleanup_free_ char *out = NULL, *err = NULL;
        uint64_t t0 = now_usec(CLOCK_MONOTONIC);
        size_t len = 0;
        int status = 0;

        assert_true(signal(SIGCHLD, SIG_IGN) != SIG_ERR);
        assert_int_equal(npu_run_capture(argv, 5 * USEC_PER_SEC, &out, &len, &status, &err), 0);
        assert_true(signal(SIGCHLD, SIG_DFL) != SIG_ERR);
        assert_string_equal(out, "out\n");
        assert_int_equal(status, -1);
        assert_true(now_usec(CLOCK_MONOTONIC) - t0 < 4 * USEC_PER_SEC);
}

static void test_read_state_dcmi(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
        _cleanup_free_ char *why = NULL;
        const char *source = NULL;

        assert_int_equal(npu_host_read_state("/nonexistent/npu-smi", NULL, SR_FAKE_DCMI, USEC_PER_SEC, &c, &source,
                                             &why), 0);
        assert_string_equal(source, "dcmi");
        assert_null(why);
        assert_int_equal(c.n, 2);
        assert_int_equal(c.chips[0].logic_id, 0);
        assert_int_equal(c.chips[0].npu_id, 2);
        assert_int_equal(c.chips[0].chip_id, 0);
        assert_string_equal(c.chips[0].name, "Ascend 910B3");
        assert_string_equal(c.chips[0].health, "OK");
        assert_true(npu_chip_name_is_910(c.chips[0].name));
        assert_int_equal(c.chips[1].logic_id, 1);
        assert_int_equal(c.chips[1].npu_id, 5);
        assert_string_equal(c.chips[1].name, "Ascend 310P3");
        assert_string_equal(c.chips[1].health, "Alarm");
        assert_false(npu_chip_name_is_910(c.chips[1].name));
        assert_null(c.chips[1].bus_id);
}

/* A directory with a fake npu-smi printing @map for `info -m` and @info for `info`, after
 * running @body (shell code, or NULL); its path in @ret. */
static void make_fake_smi(TestDir *d, const char *map, const char *info, const char *body, char *ret, size_t size) {
        _cleanup_free_ char *script = NULL;

        make_file(d->fd, "info-m.txt", map, 0644);
        make_file(d->fd, "info.txt", info, 0644);
        assert_true(asprintf(&script,
                             "#!/bin/sh\n"
                             "%s\n"
                             "case \"$*\" in\n"
                             "\"info -m\") exec cat \"${0%%/*}/info-m.txt\";;\n"
                             "info) exec cat \"${0%%/*}/info.txt\";;\n"
                             "*) echo \"unknown arguments: $*\" >&2; exit 2;;\n"
                             "esac\n", body ?: "") > 0);
        make_file(d->fd, "npu-smi", script, 0755);
        (void) snprintf(ret, size, "%s/npu-smi", d->path);
}

static const char fake_map[] =
        "        NPU ID                         Chip ID                        Chip Logic ID                  Chip Name\n"
        "        0                              0                              0                              Ascend 910B3\n"
        "        0                              1                              -                              Mcu\n"
        "        1                              0                              1                              Ascend 910B3\n"
        "        1                              1                              -                              Mcu\n";
static const char fake_info[] =
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
        "+===========================+===============+====================================================+\n"
        "| 0     910B3               | OK            | 93.9        38                0    / 0             |\n"
        "| 0                         | 0000:C1:00.0  | 0           0    / 0          3379 / 65536         |\n"
        "+===========================+===============+====================================================+\n"
        "| 1     910B3               | Warning       | 91.5        37                0    / 0             |\n"
        "| 0                         | 0000:C2:00.0  | 0           0    / 0          3378 / 65536         |\n"
        "+===========================+===============+====================================================+\n"
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |\n"
        "| 1       0                 | 1234567       | python3                  | 2048                    |\n";

static void test_read_state_smi(void **state) {
        TestDir *d = *state;
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {}, f = {};
        _cleanup_free_ char *why = NULL;
        const char *source = NULL;
        char smi[128];

        make_fake_smi(d, fake_map, fake_info, NULL, smi, sizeof(smi));
        /* no DCMI there (the driver directory is empty): npu-smi */
        assert_int_equal(npu_host_read_state(smi, d->path, NULL, 5 * USEC_PER_SEC, &c, &source, &why), 0);
        assert_string_equal(source, "npu-smi");
        assert_int_equal(c.n, 2);
        assert_string_equal(c.chips[1].name, "Ascend 910B3");
        assert_string_equal(c.chips[1].health, "Warning");
        assert_string_equal(c.chips[1].bus_id, "0000:C2:00.0");
        assert_int_equal(c.chips[1].n_processes, 1);

        /* a libdcmi.so without dcmi_get_device_health(): passed over, npu-smi read */
        source = NULL;
        assert_int_equal(npu_host_read_state(smi, NULL, SR_FAKE_DCMI_NO_HEALTH, 5 * USEC_PER_SEC, &f, &source, &why), 0);
        assert_string_equal(source, "npu-smi");
        assert_int_equal(f.n, 2);
        assert_string_equal(f.chips[0].health, "OK");
}

static void test_read_state_smi_failures(void **state) {
        static const struct {
                const char *body, *map, *info;
                int r;
                const char *why;        /* a format: %s is the fake npu-smi's path */
        } cases[] = {
                { "sleep 30", "", "", -ETIMEDOUT, "`%s info -m` did not finish in time (400 ms for `info -m` and `info`) and was killed" },
                { "echo 'first line' >&2; echo 'dcmi module initialize failed. ret is -8005' >&2; exit 1", "", "", -EIO,
                  "`%s info -m` exited with status 1: dcmi module initialize failed. ret is -8005 (DCMI not used: " },
                { "kill -KILL $$", "", "", -EIO, "`%s info -m` was killed by a signal" },
                { "[ \"$1 $2\" = 'info -m' ] || { echo 'card 1 lost' >&2; exit 4; }", fake_map, fake_info, -EIO,
                  "`%s info` exited with status 4: card 1 lost" },
                { "[ \"$1 $2\" = 'info -m' ] || sleep 30", fake_map, fake_info, -ETIMEDOUT, "`%s info` did not finish in time (400 ms" },
                { NULL, "dcmi model initialized failed, because the device is used. ret is -8020\n", fake_info, -EBADMSG,
                  "`%s info -m`: line 1: not the header" },
                { NULL, fake_map, "garbage\n", -EBADMSG, "`%s info`: line 1: neither a border nor a table row" },
        };
        TestDir *d = *state;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
                _cleanup_free_ char *why = NULL, *expect = NULL;
                const char *source = NULL;
                uint64_t t0 = now_usec(CLOCK_MONOTONIC);
                char smi[128];
                int r;

                make_fake_smi(d, cases[i].map, cases[i].info, cases[i].body, smi, sizeof(smi));
                r = npu_host_read_state(smi, d->path, "/nonexistent/libdcmi.so", 400 * USEC_PER_MSEC, &c, &source, &why);
                assert_true(asprintf(&expect, cases[i].why, smi, smi) > 0);
                if (r != cases[i].r || !why || !strstr(why, expect))
                        fail_msg("case %zu: %d '%s', expected %d '%s'", i, r, why ?: "-", cases[i].r, expect);
                assert_null(source);
                assert_int_equal(c.n, 0);
                assert_true(now_usec(CLOCK_MONOTONIC) - t0 < 5 * USEC_PER_SEC);
                assert_non_null(strstr(why, "/nonexistent/libdcmi.so"));    /* why DCMI was passed over */
        }
}

static void test_read_state_no_smi(void **state) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
        _cleanup_free_ char *why = NULL;
        const char *source = NULL;

        assert_int_equal(npu_host_read_state("/nonexistent/npu-smi", "/nonexistent", "", USEC_PER_SEC, &c, &source, &why),
                         -ENOENT);
        assert_non_null(strstr(why, "Failed to execute '/nonexistent/npu-smi'"));
        assert_null(source);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_scan_nodes, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_scan_nodes_empty, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_scan_nodes_why, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_run_capture),
                cmocka_unit_test(test_run_capture_exec_failure),
                cmocka_unit_test(test_run_capture_sigchld_ignored),
                cmocka_unit_test(test_read_state_dcmi),
                cmocka_unit_test_setup_teardown(test_read_state_smi, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_read_state_smi_failures, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_read_state_no_smi),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
