/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of src/npu/npu-jobs.h on a temporary store: ids, session ids and unit names; the
 * state machine; create and load back (config.json and the modes); the rules a job is held to;
 * job.json's strict parsing; listing by session (oldest first); another session's job being "not
 * found"; state changes (a finished job is final); recovery marking active jobs interrupted;
 * log reads by offset; pruning; temporary leftovers ignored; result.json and "started"; the
 * workload's environment.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "npu/npu-jobs.h"
#include "util/fs-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/strv.h"
#include "test-dir.h"

#define SESSION "session-a"

static char *argv_ok[] = { (char *) "/usr/bin/python3", (char *) "run.py", (char *) "--config",
                           (char *) "/x/config.json", NULL };
static char *env_ok[] = { (char *) "OMP_NUM_THREADS=4", (char *) "FOO=bar=baz", NULL };
static const unsigned chips_ok[] = { 5, 1 };
static const char config_ok[] = "{\"steps\": 3}\n";

static NpuJobSpec spec_ok(const char *id, const char *session) {
        return (NpuJobSpec) {
                .id = id,
                .workload_id = "fold-v1",
                .session_id = session,
                .argv = argv_ok,
                .env = env_ok,
                .cwd = "/var/lib/sandbox-runner/workspaces/session-a",
                .chips = chips_ok,
                .n_chips = ELEMENTSOF(chips_ok),
                .timeout_sec = 3600,
                .config = config_ok,
                .config_size = strlen(config_ok),
        };
}

static void create_ok(TestDir *d, const char *id, const char *session) {
        NpuJobSpec spec = spec_ok(id, session);
        char got[NPU_JOB_ID_LEN + 1];

        assert_int_equal(npu_jobs_create(d->fd, &spec, got, NULL), 0);
        assert_string_equal(got, id);
}

static size_t count_entries(int dfd) {
        _cleanup_(dir_names_done) DirNames l = {};

        assert_int_equal(dir_read_names(dfd, NULL, 0, &l), 0);
        return l.n;
}

static void write_at(int dfd, const char *name, const char *text) {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        (void) close(fd);
}

/* Let the millisecond clock move, so that createdAt orders jobs. */
static void tick(void) {
        uint64_t t = npu_job_now_ms();

        while (npu_job_now_ms() <= t + 1)
                (void) nanosleep(&(struct timespec) { .tv_nsec = 200000 }, NULL);
}

static void test_ids(void **state) {
        static const struct { const char *s; bool job, session; } table[] = {
                { "0123456789abcdef", true,  true  },
                { "0123456789ABCDEF", false, true  },
                { "0123456789abcde",  false, true  },
                { "0123456789abcdef0", false, true },
                { "0123456789abcdeg", false, true  },
                { "",                 false, false },
                { ".hidden",          false, false },
                { "a/b",              false, false },
                { "../0123456789abc", false, false },
                { "s p",              false, false },
                { "session-1_a.b",    false, true  },
        };
        char id[NPU_JOB_ID_LEN + 1], id2[NPU_JOB_ID_LEN + 1], long_session[130];
        _cleanup_free_ char *unit = NULL, *path = NULL;

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                assert_int_equal(npu_job_id_valid(table[i].s), table[i].job);
                assert_int_equal(npu_session_id_valid(table[i].s), table[i].session);
        }
        assert_false(npu_job_id_valid(NULL));
        assert_false(npu_session_id_valid(NULL));
        memset(long_session, 'a', 128);
        long_session[128] = '\0';
        assert_true(npu_session_id_valid(long_session));
        long_session[128] = 'a';
        long_session[129] = '\0';
        assert_false(npu_session_id_valid(long_session));

        assert_int_equal(npu_job_id_new(id), 0);
        assert_int_equal(npu_job_id_new(id2), 0);
        assert_true(npu_job_id_valid(id) && npu_job_id_valid(id2));
        assert_string_not_equal(id, id2);

        unit = npu_job_unit_name("00000000000000ff");
        assert_string_equal(unit, "sandbox-runner-npu@00000000000000ff.service");
        assert_int_equal(npu_job_id_from_unit(unit, id), 0);
        assert_string_equal(id, "00000000000000ff");
        assert_null(npu_job_unit_name("bad"));
        static const char *const bad_units[] = {
                "sandbox-runner-npu@00000000000000FF.service", "sandbox-runner-npu@00000000000000ff.scope",
                "sandbox-runner-x-00000000000000ff.service", "sandbox-runner-npu@0000000000000ff.service",
                "sandbox-runner-npu@.service", "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_units); i++)
                assert_int_equal(npu_job_id_from_unit(bad_units[i], id), -EINVAL);

        path = npu_job_config_path("/var/lib/sandbox-runner/npu-jobs", "00000000000000ff");
        assert_string_equal(path, "/var/lib/sandbox-runner/npu-jobs/00000000000000ff/config.json");
        assert_null(npu_job_config_path("relative", "00000000000000ff"));
        assert_null(npu_job_config_path("/x", "../etc"));
}

static void test_transitions(void **state) {
        /* [from][to]: Q R S F C I */
        static const bool table[_NPU_JOB_STATE_MAX][_NPU_JOB_STATE_MAX] = {
                [NPU_JOB_QUEUED]  = { 0, 1, 0, 1, 1, 1 },
                [NPU_JOB_RUNNING] = { 0, 0, 1, 1, 1, 1 },
        };

        for (NpuJobState from = 0; from < _NPU_JOB_STATE_MAX; from++) {
                assert_int_equal(npu_job_state_is_final(from), from >= NPU_JOB_SUCCEEDED);
                assert_int_equal(npu_job_state_from_string(npu_job_state_to_string(from)), from);
                for (NpuJobState to = 0; to < _NPU_JOB_STATE_MAX; to++)
                        assert_int_equal(npu_job_state_transition_valid(from, to), table[from][to]);
        }
        assert_int_equal(npu_job_state_from_string("done"), _NPU_JOB_STATE_INVALID);
        assert_null(npu_job_state_to_string(_NPU_JOB_STATE_MAX));
}

static void test_create_load(void **state) {
        TestDir *d = *state;
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_close_ int job_fd = -EBADF;
        char id[NPU_JOB_ID_LEN + 1], buf[64] = {};
        NpuJobSpec spec = spec_ok(NULL, SESSION);
        uint64_t before = npu_job_now_ms();
        struct stat st;
        int fd;

        assert_int_equal(npu_jobs_create(d->fd, &spec, id, NULL), 0);
        assert_true(npu_job_id_valid(id));
        assert_int_equal(npu_jobs_load(d->fd, id, &j), 0);
        assert_string_equal(j->id, id);
        assert_string_equal(j->workload_id, "fold-v1");
        assert_string_equal(j->session_id, SESSION);
        assert_int_equal(strv_length(j->argv), 4);
        assert_string_equal(j->argv[3], "/x/config.json");
        assert_int_equal(strv_length(j->env), 2);
        assert_string_equal(j->env[0], "OMP_NUM_THREADS=4");
        assert_string_equal(j->env[1], "FOO=bar=baz");
        assert_string_equal(j->cwd, spec.cwd);
        assert_int_equal(j->n_chips, 2);
        assert_int_equal(j->chips[0], 1);               /* sorted */
        assert_int_equal(j->chips[1], 5);
        assert_int_equal(j->timeout_sec, 3600);
        assert_int_equal(j->state, NPU_JOB_QUEUED);
        assert_true(j->created_ms >= before && j->created_ms <= npu_job_now_ms());
        assert_int_equal(j->started_ms, 0);
        assert_int_equal(j->finished_ms, 0);
        assert_int_equal(j->exit_code, -1);
        assert_int_equal(j->signal, 0);
        assert_null(j->error);
        assert_null(j->unit);
        assert_int_equal(j->pid, 0);

        job_fd = openat(d->fd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(job_fd >= 0);
        assert_int_equal(fstat(job_fd, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0700);
        fd = openat(job_fd, "config.json", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(read(fd, buf, sizeof(buf) - 1), (ssize_t) strlen(config_ok));
        assert_string_equal(buf, config_ok);
        (void) close(fd);
        assert_int_equal(count_entries(job_fd), 2);     /* job.json, config.json: no temporary file */
        assert_int_equal(count_entries(d->fd), 1);

        /* The same id again. */
        spec.id = id;
        assert_int_equal(npu_jobs_create(d->fd, &spec, NULL, NULL), -EEXIST);
        /* No config: no config.json. */
        spec = spec_ok("00000000000000aa", SESSION);
        spec.config = NULL;
        assert_int_equal(npu_jobs_create(d->fd, &spec, id, NULL), 0);
        assert_int_equal(faccessat(d->fd, "00000000000000aa/config.json", F_OK, 0), -1);
        assert_int_equal(errno, ENOENT);
}

static void test_create_refused(void **state) {
        TestDir *d = *state;
        static char *argv_rel[] = { (char *) "python3", NULL };
        static char *argv_empty[] = { NULL };
        static char *env_badname[] = { (char *) "1X=y", NULL };
        static char *env_noeq[] = { (char *) "FOO", NULL };
        static char *env_visible[] = { (char *) "ASCEND_RT_VISIBLE_DEVICES=0,1", NULL };
        static char *env_twice[] = { (char *) "A=1", (char *) "B=2", (char *) "A=3", NULL };
        static const unsigned chips_dup[] = { 1, 1 };
        static const unsigned chips_big[] = { NPU_JOB_CHIP_ID_MAX + 1 };
        static const struct {
                const char *name;
                const char *id, *workload, *session, *cwd;
                char **argv, **env;
                const unsigned *chips;
                size_t n_chips;
                uint64_t timeout;
                size_t config_size;
        } table[] = {
                { "bad id", .id = "0123456789ABCDEF" },
                { "bad workload", .workload = "a/b" },
                { "bad session", .session = "../x" },
                { "relative cwd", .cwd = "ws" },
                { "relative argv[0]", .argv = argv_rel },
                { "empty argv", .argv = argv_empty },
                { "bad env name", .env = env_badname },
                { "env without =", .env = env_noeq },
                { "env sets the chips", .env = env_visible },
                { "env twice", .env = env_twice },
                { "chip twice", .chips = chips_dup, .n_chips = 2 },
                { "chip out of range", .chips = chips_big, .n_chips = 1 },
                { "too many chips", .chips = chips_ok, .n_chips = NPU_JOB_CHIPS_MAX + 1 },
                { "timeout 0", .timeout = UINT64_MAX },
                { "timeout too long", .timeout = NPU_JOB_TIMEOUT_SEC_MAX + 1 },
                { "config too large", .config_size = NPU_JOB_CONFIG_MAX + 1 },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                NpuJobSpec spec = spec_ok("00000000000000bb", SESSION);
                const char *reason = NULL;
                char id[NPU_JOB_ID_LEN + 1];

                if (table[i].id)
                        spec.id = table[i].id;
                if (table[i].workload)
                        spec.workload_id = table[i].workload;
                if (table[i].session)
                        spec.session_id = table[i].session;
                if (table[i].cwd)
                        spec.cwd = table[i].cwd;
                if (table[i].argv)
                        spec.argv = table[i].argv;
                if (table[i].env)
                        spec.env = table[i].env;
                if (table[i].chips) {
                        spec.chips = table[i].chips;
                        spec.n_chips = table[i].n_chips;
                }
                if (table[i].timeout)
                        spec.timeout_sec = table[i].timeout == UINT64_MAX ? 0 : table[i].timeout;
                if (table[i].config_size)
                        spec.config_size = table[i].config_size;
                print_message("# refused: %s\n", table[i].name);
                assert_int_equal(npu_jobs_create(d->fd, &spec, id, &reason), -EINVAL);
                assert_non_null(reason);
                assert_int_equal(count_entries(d->fd), 0);
        }
}

/* job.json with one field changed must be refused; the unchanged one loads. */
static void test_parse_strict(void **state) {
        static const char *const good =
                "{\"jobId\":\"00000000000000cc\",\"workloadId\":\"w\",\"sessionId\":\"s\",\"argv\":[\"/bin/true\"],"
                "\"env\":{},\"cwd\":\"/\",\"chips\":[0],\"timeoutSec\":5,\"state\":\"queued\",\"createdAt\":1,"
                "\"futureField\":{\"ignored\":true}}";
        static const struct { const char *key, *value; } table[] = {
                { "jobId", "\"00000000000000CC\"" },
                { "argv", "[]" },
                { "argv", "[\"/bin/true\", 3]" },
                { "argv", "\"/bin/true\"" },
                { "env", "{\"A\":1}" },
                { "env", "[\"A=1\"]" },
                { "env", "{\"A-B\":\"1\"}" },
                { "cwd", "null" },
                { "chips", "[-1]" },
                { "chips", "[3, 2]" },
                { "chips", "[\"0\"]" },
                { "timeoutSec", "0" },
                { "timeoutSec", "1.5" },
                { "state", "\"done\"" },
                { "createdAt", "\"1\"" },
                { "exitCode", "256" },
                { "signal", "0" },
                { "pid", "-1" },
                { "error", "7" },
                { "sessionId", "\"s\\u0000t\"" },
        };
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(good);
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_(json_object_putp) json_object *back = NULL;

        assert_non_null(o);
        assert_int_equal(npu_job_from_json(o, &j, NULL), 0);
        back = npu_job_to_json(j);
        assert_non_null(back);
        assert_false(json_object_object_get_ex(back, "futureField", NULL));
        assert_false(json_object_object_get_ex(back, "exitCode", NULL));
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_(json_object_putp) json_object *m = json_tokener_parse(good);
                NpuJob *bad = NULL;
                const char *reason = NULL;

                json_object_object_add(m, table[i].key, json_tokener_parse(table[i].value));
                print_message("# %s = %s\n", table[i].key, table[i].value);
                assert_int_equal(npu_job_from_json(m, &bad, &reason), -EBADMSG);
                assert_non_null(reason);
                assert_null(bad);
        }
        /* A required field missing. */
        json_object_object_del(o, "cwd");
        assert_int_equal(npu_job_from_json(o, &j, NULL), -EBADMSG);
}

static void test_list_and_sessions(void **state) {
        TestDir *d = *state;
        static const char *const ids[] = { "00000000000000f3", "00000000000000a1", "00000000000000c2" };
        NpuJob **l = NULL, *j = NULL;
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                create_ok(d, ids[i], SESSION);
                tick();
        }
        create_ok(d, "0000000000000099", "session-b");

        assert_int_equal(npu_jobs_list(d->fd, SESSION, &l, &n), 0);
        assert_int_equal(n, 3);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(l[i]->id, ids[i]);  /* creation order, not id order */
        l = npu_job_list_free(l, n);
        assert_int_equal(npu_jobs_list(d->fd, "session-b", &l, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(l[0]->id, "0000000000000099");
        l = npu_job_list_free(l, n);
        assert_int_equal(npu_jobs_list(d->fd, "session-c", &l, &n), 0);
        assert_int_equal(n, 0);
        assert_null(l);
        assert_int_equal(npu_jobs_list(d->fd, "../x", &l, &n), -EINVAL);
        /* NULL: every session's, still oldest first. */
        assert_int_equal(npu_jobs_list(d->fd, NULL, &l, &n), 0);
        assert_int_equal(n, 4);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                assert_string_equal(l[i]->id, ids[i]);
        assert_string_equal(l[3]->id, "0000000000000099");
        l = npu_job_list_free(l, n);

        /* Another session's job is not found; so is a bad session id, a bad or missing job id. */
        assert_int_equal(npu_jobs_load_for_session(d->fd, "0000000000000099", SESSION, &j), -ENOENT);
        assert_int_equal(npu_jobs_load_for_session(d->fd, "0000000000000099", ".", &j), -ENOENT);
        assert_int_equal(npu_jobs_load_for_session(d->fd, "0000000000000098", "session-b", &j), -ENOENT);
        assert_int_equal(npu_jobs_load_for_session(d->fd, "../../etc/passwd", "session-b", &j), -ENOENT);
        assert_null(j);
        assert_int_equal(npu_jobs_load_for_session(d->fd, "0000000000000099", "session-b", &j), 0);
        assert_string_equal(j->session_id, "session-b");
        npu_job_free(j);
}

static void test_set_state(void **state) {
        TestDir *d = *state;
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        NpuJobResult res = { .exit_code = 0, .started_ms = 1000, .finished_ms = 2000 };
        NpuJobUpdate run = {
                .state = NPU_JOB_RUNNING, .unit = "sandbox-runner-npu@00000000000000d1.service", .pid = 42,
        };

        create_ok(d, "00000000000000d1", SESSION);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000d1",
                                            &(NpuJobUpdate) { .state = NPU_JOB_SUCCEEDED }, NULL), -EINVAL);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000d1", &run, &j), 0);
        assert_int_equal(j->state, NPU_JOB_RUNNING);
        assert_string_equal(j->unit, run.unit);
        assert_int_equal(j->pid, 42);
        assert_true(j->started_ms > 0);
        j = npu_job_free(j);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000d1", &run, NULL), -EINVAL);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000d1",
                                            &(NpuJobUpdate) { .state = NPU_JOB_QUEUED }, NULL), -EINVAL);

        assert_int_equal(npu_job_result_state(&res), NPU_JOB_SUCCEEDED);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000d1",
                                            &(NpuJobUpdate) { .state = npu_job_result_state(&res), .result = &res },
                                            NULL), 0);
        assert_int_equal(npu_jobs_load(d->fd, "00000000000000d1", &j), 0);
        assert_int_equal(j->state, NPU_JOB_SUCCEEDED);
        assert_int_equal(j->exit_code, 0);
        assert_int_equal(j->started_ms, 1000);
        assert_int_equal(j->finished_ms, 2000);
        assert_string_equal(j->unit, run.unit);         /* kept */

        /* Final: nothing changes it, and job.json stays as it was. */
        for (NpuJobState s = 0; s < _NPU_JOB_STATE_MAX; s++)
                assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000d1",
                                                    &(NpuJobUpdate) { .state = s, .error = "x" }, NULL), -EALREADY);
        j = npu_job_free(j);
        assert_int_equal(npu_jobs_load(d->fd, "00000000000000d1", &j), 0);
        assert_null(j->error);

        /* A cancelled queued job: finishedAt now, the error kept. */
        j = npu_job_free(j);
        create_ok(d, "00000000000000d2", SESSION);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000d2",
                                            &(NpuJobUpdate) { .state = NPU_JOB_CANCELLED,
                                                              .error = "cancelled by its session" },
                                            &j), 0);
        assert_string_equal(j->error, "cancelled by its session");
        assert_true(j->finished_ms > 0);
        assert_int_equal(j->started_ms, 0);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000ee", &run, NULL), -ENOENT);
}

static void test_recover(void **state) {
        TestDir *d = *state;
        NpuJobStray *strays = NULL;
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t n = 0;

        create_ok(d, "00000000000000e1", SESSION);      /* queued, with a "started" of a runner */
        create_ok(d, "00000000000000e2", SESSION);      /* running */
        create_ok(d, "00000000000000e3", SESSION);      /* failed */
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000e2",
                                            &(NpuJobUpdate) { .state = NPU_JOB_RUNNING, .unit = "u2", .pid = 77 },
                                            NULL), 0);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000e3",
                                            &(NpuJobUpdate) { .state = NPU_JOB_FAILED, .error = "boom" }, NULL), 0);
        fd = openat(d->fd, "00000000000000e1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(npu_job_write_started_at(fd, 1234, 5), 0);
        /* What a crash in npu_jobs_create() leaves. */
        assert_int_equal(mkdirat(d->fd, ".#new-00000000000000e4", 0700), 0);
        write_at(d->fd, ".#0123", "partial");

        assert_int_equal(npu_jobs_recover(d->fd, &strays, &n), 2);
        assert_int_equal(n, 2);
        for (size_t i = 0; i < n; i++) {
                if (streq(strays[i].id, "00000000000000e1")) {
                        assert_null(strays[i].unit);
                        assert_int_equal(strays[i].pid, 1234);
                } else {
                        assert_string_equal(strays[i].id, "00000000000000e2");
                        assert_string_equal(strays[i].unit, "u2");
                        assert_int_equal(strays[i].pid, 77);
                }
        }
        strays = npu_job_strays_free(strays, n);
        assert_int_equal(count_entries(d->fd), 3);      /* the leftovers are gone */

        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(npu_jobs_load(d->fd, i == 0 ? "00000000000000e1" : "00000000000000e2", &j), 0);
                assert_int_equal(j->state, NPU_JOB_INTERRUPTED);
                assert_string_equal(j->error, NPU_JOB_ERROR_INTERRUPTED);
                assert_true(j->finished_ms > 0);
                j = npu_job_free(j);
        }
        assert_int_equal(npu_jobs_load(d->fd, "00000000000000e3", &j), 0);
        assert_int_equal(j->state, NPU_JOB_FAILED);
        assert_string_equal(j->error, "boom");
        assert_int_equal(npu_jobs_recover(d->fd, &strays, &n), 0);
        assert_int_equal(n, 0);
        assert_null(strays);
}

static void test_log(void **state) {
        static const struct { uint64_t offset; size_t max; const char *data; uint64_t next; } table[] = {
                { 0,   5,   "hello",       5  },
                { 5,   100, " world\n",    12 },
                { 0,   0,   "",            0  },
                { 11,  1,   "\n",          12 },
                { 12,  10,  "",            12 },
                { 999, 10,  "",            12 },            /* past the end: the size */
        };
        TestDir *d = *state;
        NpuJobLogChunk c = {};
        _cleanup_close_ int job_fd = -EBADF, log_fd = -EBADF;

        create_ok(d, "00000000000000f1", SESSION);
        /* No log yet: empty. */
        assert_int_equal(npu_jobs_read_log(d->fd, "00000000000000f1", SESSION, 10, 100, &c), 0);
        assert_int_equal(c.size, 0);
        assert_int_equal(c.next_offset, 0);
        assert_false(c.finished);
        npu_job_log_chunk_done(&c);

        job_fd = openat(d->fd, "00000000000000f1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(job_fd >= 0);
        log_fd = npu_job_open_log_at(job_fd);
        assert_true(log_fd >= 0);
        assert_int_equal(write(log_fd, "hello world\n", 12), 12);
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                assert_int_equal(npu_jobs_read_log(d->fd, "00000000000000f1", SESSION, table[i].offset, table[i].max,
                                                   &c), 0);
                assert_int_equal(c.size, strlen(table[i].data));
                assert_memory_equal(c.data, table[i].data, c.size);
                assert_int_equal(c.next_offset, table[i].next);
                assert_false(c.finished);
                npu_job_log_chunk_done(&c);
        }
        assert_int_equal(npu_jobs_read_log(d->fd, "00000000000000f1", "session-b", 0, 100, &c), -ENOENT);
        assert_int_equal(npu_jobs_set_state(d->fd, "00000000000000f1",
                                            &(NpuJobUpdate) { .state = NPU_JOB_CANCELLED }, NULL), 0);
        assert_int_equal(npu_jobs_read_log(d->fd, "00000000000000f1", SESSION, 6, 100, &c), 0);
        assert_string_equal(c.data, "world\n");
        assert_true(c.finished);
        npu_job_log_chunk_done(&c);
}

static void test_prune(void **state) {
        TestDir *d = *state;
        static const char *const ids[] = {
                "0000000000000001", "0000000000000002", "0000000000000003", "0000000000000004",
                "0000000000000005", "0000000000000006", "0000000000000007",
        };
        /* 1, 4 and 6 stay active; the others finish. */
        static const bool active[] = { true, false, false, true, false, false, true };
        NpuJob **l = NULL;
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                create_ok(d, ids[i], SESSION);
                if (!active[i])
                        assert_int_equal(npu_jobs_set_state(d->fd, ids[i],
                                                            &(NpuJobUpdate) { .state = NPU_JOB_FAILED }, NULL), 0);
                tick();
        }
        assert_int_equal(npu_jobs_prune(d->fd, NPU_JOBS_KEEP), 0);
        assert_int_equal(npu_jobs_prune(d->fd, 2), 2);  /* 2 and 3 go; 5 and 6 stay */
        assert_int_equal(npu_jobs_list(d->fd, SESSION, &l, &n), 0);
        assert_int_equal(n, 5);
        assert_string_equal(l[0]->id, "0000000000000001");
        assert_string_equal(l[1]->id, "0000000000000004");
        assert_string_equal(l[2]->id, "0000000000000005");
        assert_string_equal(l[3]->id, "0000000000000006");
        assert_string_equal(l[4]->id, "0000000000000007");
        l = npu_job_list_free(l, n);
        assert_int_equal(npu_jobs_prune(d->fd, 0), 2);
        assert_int_equal(npu_jobs_list(d->fd, SESSION, &l, &n), 0);
        assert_int_equal(n, 3);
        l = npu_job_list_free(l, n);
}

static void test_leftovers_ignored(void **state) {
        TestDir *d = *state;
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_close_ int job_fd = -EBADF;
        NpuJob **l = NULL;
        size_t n = 0;

        create_ok(d, "0000000000000a01", SESSION);
        create_ok(d, "0000000000000a02", SESSION);
        job_fd = openat(d->fd, "0000000000000a01", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(job_fd >= 0);
        /* A temporary job.json that a crash left half written, in the job and in the store. */
        write_at(job_fd, ".#00000000000000aa", "{\"jobId\": \"0000000000000a01\", \"state\": \"runn");
        assert_int_equal(mkdirat(d->fd, ".#new-0000000000000a03", 0700), 0);
        write_at(d->fd, ".#new-0000000000000a03/job.json", "{}");
        /* Not a job: a file with a job's name, and a directory with an unreadable job.json. */
        write_at(d->fd, "0000000000000a04", "x");
        assert_int_equal(mkdirat(d->fd, "0000000000000a05", 0700), 0);
        write_at(d->fd, "0000000000000a05/job.json", "{\"jobId\": ");

        assert_int_equal(npu_jobs_load(d->fd, "0000000000000a01", &j), 0);
        assert_int_equal(j->state, NPU_JOB_QUEUED);
        assert_int_equal(npu_jobs_load(d->fd, "0000000000000a05", &j), -EBADMSG);
        assert_int_equal(npu_jobs_load(d->fd, "0000000000000a04", &j), -ENOENT);
        assert_int_equal(npu_jobs_list(d->fd, SESSION, &l, &n), 0);
        assert_int_equal(n, 2);
        l = npu_job_list_free(l, n);
        /* job.json naming another job is not that job. */
        write_at(d->fd, "0000000000000a05/job.json",
                 "{\"jobId\":\"0000000000000a01\",\"workloadId\":\"w\",\"sessionId\":\"session-a\","
                 "\"argv\":[\"/bin/true\"],"
                 "\"env\":{},\"cwd\":\"/\",\"chips\":[],\"timeoutSec\":5,\"state\":\"queued\",\"createdAt\":1}");
        assert_int_equal(npu_jobs_load(d->fd, "0000000000000a05", &j), -EBADMSG);
}

static void test_result_and_started(void **state) {
        static const struct { NpuJobResult r; NpuJobState state; } table[] = {
                { { .exit_code = 0, .finished_ms = 2 },                      NPU_JOB_SUCCEEDED },
                { { .exit_code = 3, .started_ms = 1, .finished_ms = 2 },     NPU_JOB_FAILED },
                { { .exit_code = -1, .signal = 15, .timed_out = true, .started_ms = 1, .finished_ms = 2 },
                  NPU_JOB_FAILED },
                { { .exit_code = 0, .timed_out = true, .finished_ms = 2 },   NPU_JOB_FAILED },
                { { .exit_code = -1, .error = (char *) "Cannot execute", .finished_ms = 2 }, NPU_JOB_FAILED },
        };
        TestDir *d = *state;
        _cleanup_close_ int job_fd = -EBADF;
        pid_t pid = 0;
        uint64_t started = 0;

        create_ok(d, "0000000000000b01", SESSION);
        job_fd = openat(d->fd, "0000000000000b01", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(job_fd >= 0);
        assert_int_equal(npu_jobs_load_result(d->fd, "0000000000000b01", &(NpuJobResult) {}), -ENOENT);
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                NpuJobResult back = {};

                assert_int_equal(npu_job_result_state(&table[i].r), table[i].state);
                assert_int_equal(npu_job_write_result_at(job_fd, &table[i].r), 0);
                assert_int_equal(npu_jobs_load_result_for_session(d->fd, "0000000000000b01", SESSION, &back), 0);
                assert_int_equal(back.exit_code, table[i].r.exit_code);
                assert_int_equal(back.signal, table[i].r.signal);
                assert_int_equal(back.timed_out, table[i].r.timed_out);
                assert_int_equal(back.started_ms, table[i].r.started_ms);
                assert_int_equal(back.finished_ms, table[i].r.finished_ms);
                if (table[i].r.error)
                        assert_string_equal(back.error, table[i].r.error);
                else
                        assert_null(back.error);
                npu_job_result_done(&back);
        }
        assert_int_equal(npu_jobs_load_result_for_session(d->fd, "0000000000000b01", "session-b",
                                                          &(NpuJobResult) {}), -ENOENT);
        /* Both an exit status and a signal; a missing timedOut. */
        write_at(job_fd, "result.json",
                 "{\"exitCode\":0,\"signal\":9,\"timedOut\":false,\"startedAt\":1,\"finishedAt\":2}");
        assert_int_equal(npu_job_load_result_at(job_fd, &(NpuJobResult) {}), -EBADMSG);
        write_at(job_fd, "result.json", "{\"exitCode\":0,\"signal\":null,\"startedAt\":1,\"finishedAt\":2}");
        assert_int_equal(npu_job_load_result_at(job_fd, &(NpuJobResult) {}), -EBADMSG);

        assert_int_equal(npu_job_load_started_at(job_fd, &pid, &started), -ENOENT);
        assert_int_equal(npu_job_write_started_at(job_fd, 0, 1), -EINVAL);
        assert_int_equal(npu_job_write_started_at(job_fd, 4321, 1700000000123ULL), 0);
        assert_int_equal(npu_job_load_started_at(job_fd, &pid, &started), 0);
        assert_int_equal(pid, 4321);
        assert_int_equal(started, 1700000000123ULL);
        assert_int_equal(count_entries(job_fd), 4);     /* job.json, config.json, result.json, started */
}

static void test_runner_env(void **state) {
        static char *env[] = { (char *) "LANG=en_US.UTF-8", (char *) "FOO=1", NULL };
        static char *argv[] = { (char *) "/bin/true", NULL };
        static unsigned chips[] = { 0, 2, 15 };
        NpuJob j = { .id = "0000000000000c01", .argv = argv, .env = env, .cwd = (char *) "/ws/s1",
                     .chips = chips, .n_chips = ELEMENTSOF(chips) };
        static const char *const want[] = {
                "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/ws/s1", "LANG=en_US.UTF-8", "FOO=1",
                "ASCEND_RT_VISIBLE_DEVICES=0,2,15", NULL,
        };
        _cleanup_strv_free_ char **got = NULL;
        _cleanup_free_ char *none = NULL;

        assert_int_equal(npu_job_runner_env(&j, &got), 0);
        assert_int_equal(strv_length(got), ELEMENTSOF(want) - 1);
        for (size_t i = 0; want[i]; i++)
                assert_string_equal(got[i], want[i]);
        j.n_chips = 0;
        none = npu_job_visible_devices(&j);
        assert_string_equal(none, "");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ids),
                cmocka_unit_test(test_transitions),
                cmocka_unit_test_setup_teardown(test_create_load, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_create_refused, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_parse_strict),
                cmocka_unit_test_setup_teardown(test_list_and_sessions, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_set_state, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_recover, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_log, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_prune, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_leftovers_ignored, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_result_and_started, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_runner_env),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
