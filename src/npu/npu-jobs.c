/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NPU broker's job store (npu-jobs.h): job directories under <state>/npu-jobs/, atomic
 * replacement of their files, the daemon's state changes, recovery, pruning, log reads, and the
 * runner's files (result.json, started, log). The forms are in npu-jobs-json.c.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npu/npu-jobs.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/strv.h"

/* Temporary names start with this: readers never look at them, npu_jobs_recover() removes them. */
#define TMP_PREFIX ATOMIC_TMP_PREFIX
#define DIR_MODE 0700
#define FILE_MODE 0600
#define JOB_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* ---- files ------------------------------------------------------------------------------------- */

static int read_json_at(int dfd, const char *name, json_object **ret) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = read_file_limited(dfd, name, O_NOFOLLOW, NPU_JOB_JSON_MAX, 0, &data, &size);
        if (r == -EBADFD || r == -EFBIG || r == -ELOOP)
                return -EBADMSG;        /* not a regular file, or far too large */
        if (r < 0)
                return r;
        return json_parse_text(data, size, ret);
}

static int open_dir_at(int dfd, const char *name) {
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return errno == ELOOP || errno == ENOTDIR ? -ENOENT : negative_errno();
        return fd;
}

/* The directory of job @id; a bad id is no job. */
static int open_job(int dir_fd, const char *id) {
        if (!npu_job_id_valid(id))
                return -ENOENT;
        return open_dir_at(dir_fd, id);
}

int npu_jobs_open(const char *state_dir) {
        _cleanup_free_ char *p = NULL;
        int fd;

        if (!state_dir || state_dir[0] != '/')
                return -EINVAL;
        if (asprintf(&p, "%s/" NPU_JOBS_DIR, state_dir) < 0)
                return -ENOMEM;
        if (mkdir(p, DIR_MODE) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        return fd < 0 ? negative_errno() : fd;
}

/* ---- one job ----------------------------------------------------------------------------------- */

int npu_job_load_at(int job_fd, NpuJob **ret, const char **ret_reason) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        int r;

        if (ret_reason)
                *ret_reason = "not JSON";
        r = read_json_at(job_fd, NPU_JOB_FILE, &o);
        if (r < 0)
                return r;
        return npu_job_from_json(o, ret, ret_reason);
}

static int job_save_at(int job_fd, const NpuJob *j) {
        _cleanup_(json_object_putp) json_object *o = npu_job_to_json(j);

        return json_write_file_atomic_at(job_fd, NPU_JOB_FILE, o, JOB_JSON_FLAGS, FILE_MODE);
}

/* Job @id: its directory in *@ret_fd (when not NULL) and its job.json, which must name @id. */
static int load_job(int dir_fd, const char *id, int *ret_fd, NpuJob **ret) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = open_job(dir_fd, id);
        if (fd < 0)
                return fd;
        r = npu_job_load_at(fd, &j, NULL);
        if (r < 0)
                return r;
        if (!streq(j->id, id))
                return -EBADMSG;
        if (ret_fd)
                *ret_fd = STEAL_FD(fd);
        *ret = STEAL(j);
        return 0;
}

int npu_jobs_load(int dir_fd, const char *id, NpuJob **ret) {
        return load_job(dir_fd, id, NULL, ret);
}

int npu_jobs_load_for_session(int dir_fd, const char *id, const char *session_id, NpuJob **ret) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        int r;

        if (!npu_session_id_valid(session_id))
                return -ENOENT;
        r = npu_jobs_load(dir_fd, id, &j);
        if (r < 0)
                return r;
        /* Another session's job does not exist for this one (API.md: 404). */
        if (!streq(j->session_id, session_id))
                return -ENOENT;
        *ret = STEAL(j);
        return 0;
}

static int cmp_unsigned(const void *a, const void *b) {
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;

        return x < y ? -1 : x > y;
}

/* The NpuJob of @spec in state "queued", created now; the strings borrowed from @spec. */
static int job_from_spec(const NpuJobSpec *spec, const char *id, NpuJob *j, unsigned *chips) {
        if (spec->n_chips > NPU_JOB_CHIPS_MAX)
                return -EINVAL;
        if (spec->n_chips > 0)
                memcpy(chips, spec->chips, spec->n_chips * sizeof(unsigned));
        qsort(chips, spec->n_chips, sizeof(unsigned), cmp_unsigned);
        *j = (NpuJob) {
                .workload_id = (char *) spec->workload_id,
                .session_id = (char *) spec->session_id,
                .argv = (char **) spec->argv,
                .env = (char **) spec->env,
                .cwd = (char *) spec->cwd,
                .chips = chips,
                .n_chips = spec->n_chips,
                .timeout_sec = spec->timeout_sec,
                .state = NPU_JOB_QUEUED,
                .created_ms = npu_job_now_ms(),
                .exit_code = -1,
        };
        memcpy(j->id, id, sizeof(j->id));
        return 0;
}

/* Fill the new job directory @tmp of @dir_fd: config.json, job.json, all synced. */
static int create_fill(int dir_fd, const char *tmp, const NpuJobSpec *spec, const NpuJob *j) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (mkdirat(dir_fd, tmp, DIR_MODE) < 0)
                return negative_errno();
        fd = open_dir_at(dir_fd, tmp);
        if (fd < 0)
                return fd;
        if (spec->config) {
                r = write_file_atomic_at(fd, NPU_JOB_CONFIG_FILE, spec->config, spec->config_size, FILE_MODE);
                if (r < 0)
                        return r;
        }
        return job_save_at(fd, j);
}

static int refuse(const char **ret_reason, const char *why) {
        if (ret_reason)
                *ret_reason = why;
        return -EINVAL;
}

int npu_jobs_create(int dir_fd, const NpuJobSpec *spec, char *ret_id,
                    const char **ret_reason) {
        char id[NPU_JOB_ID_LEN + 1], tmp[sizeof(TMP_PREFIX) + NPU_JOB_ID_LEN + 4];
        unsigned chips[NPU_JOB_CHIPS_MAX + 1];
        const char *reason = NULL;
        NpuJob j;
        int r;

        if (spec->id) {
                if (!npu_job_id_valid(spec->id))
                        return refuse(ret_reason, "invalid job id");
                memcpy(id, spec->id, sizeof(id));
        } else {
                r = npu_job_id_new(id);
                if (r < 0)
                        return r;
        }
        if (spec->config && spec->config_size > NPU_JOB_CONFIG_MAX)
                return refuse(ret_reason, "the config is too large");
        if (spec->n_chips > NPU_JOB_CHIPS_MAX)
                return refuse(ret_reason, "too many chips");
        (void) job_from_spec(spec, id, &j, chips);
        r = npu_job_validate(&j, &reason);
        if (r < 0)
                return refuse(ret_reason, reason);

        if (faccessat(dir_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                return -EEXIST;
        (void) snprintf(tmp, sizeof(tmp), TMP_PREFIX "new-%s", id);
        (void) rm_rf_at(dir_fd, tmp);
        r = create_fill(dir_fd, tmp, spec, &j);
        /* The job appears whole: one rename() of its directory, never over another job. */
        if (r >= 0 && renameat2(dir_fd, tmp, dir_fd, id, RENAME_NOREPLACE) < 0)
                r = negative_errno();
        if (r < 0) {
                (void) rm_rf_at(dir_fd, tmp);
                return r;
        }
        if (fsync(dir_fd) < 0)
                return negative_errno();
        if (ret_id)
                memcpy(ret_id, id, sizeof(id));
        return 0;
}

/* ---- all jobs ---------------------------------------------------------------------------------- */

/* Every loadable job of the store (all sessions, or @session_id's), in directory order. */
static int load_all(int dir_fd, const char *session_id, NpuJob ***ret, size_t *ret_n) {
        _cleanup_(dir_names_done) DirNames names = {};
        NpuJob **l = NULL;
        size_t n = 0;
        int r;

        r = dir_read_names(dir_fd, NULL, 0, &names);
        if (r < 0)
                return r;
        if (names.n > 0) {
                l = calloc(names.n, sizeof(NpuJob *));
                if (!l)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < names.n; i++) {
                NpuJob *j = NULL;

                if (!npu_job_id_valid(names.v[i]))
                        continue;               /* a temporary directory, or something else */
                r = npu_jobs_load(dir_fd, names.v[i], &j);
                if (r == -ENOMEM) {
                        npu_job_list_free(l, n);
                        return r;
                }
                if (r < 0)
                        continue;               /* unreadable: not a job */
                if (session_id && !streq(j->session_id, session_id)) {
                        npu_job_free(j);
                        continue;
                }
                l[n++] = j;
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

static int cmp_created(const void *a, const void *b) {
        const NpuJob *x = *(NpuJob *const *) a, *y = *(NpuJob *const *) b;

        if (x->created_ms != y->created_ms)
                return x->created_ms < y->created_ms ? -1 : 1;
        return strcmp(x->id, y->id);
}

int npu_jobs_list(int dir_fd, const char *session_id, NpuJob ***ret, size_t *ret_n) {
        NpuJob **l = NULL;
        size_t n = 0;
        int r;

        if (session_id && !npu_session_id_valid(session_id))
                return -EINVAL;
        r = load_all(dir_fd, session_id, &l, &n);
        if (r < 0)
                return r;
        if (n > 1)
                qsort(l, n, sizeof(NpuJob *), cmp_created);
        if (n == 0)
                l = mfree(l);
        *ret = l;
        *ret_n = n;
        return 0;
}

static int job_apply_update(NpuJob *j, const NpuJobUpdate *u) {
        char *s;

        if (npu_job_state_is_final(j->state))
                return -EALREADY;
        if (!npu_job_state_transition_valid(j->state, u->state) || u->pid < 0)
                return -EINVAL;
        if (u->unit) {
                s = strdup(u->unit);
                if (!s)
                        return -ENOMEM;
                free(j->unit);
                j->unit = s;
        }
        if (u->error) {
                s = strdup(u->error);
                if (!s)
                        return -ENOMEM;
                free(j->error);
                j->error = s;
        }
        if (u->pid > 0)
                j->pid = u->pid;
        if (u->state == NPU_JOB_RUNNING)
                j->started_ms = u->result && u->result->started_ms > 0 ? u->result->started_ms : npu_job_now_ms();
        if (npu_job_state_is_final(u->state)) {
                if (u->result) {
                        j->exit_code = u->result->exit_code;
                        j->signal = u->result->signal;
                        if (u->result->started_ms > 0)
                                j->started_ms = u->result->started_ms;
                }
                j->finished_ms = u->result && u->result->finished_ms > 0 ? u->result->finished_ms : npu_job_now_ms();
        }
        j->state = u->state;
        return npu_job_validate(j, NULL);
}

int npu_jobs_set_state(int dir_fd, const char *id, const NpuJobUpdate *u, NpuJob **ret) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = load_job(dir_fd, id, &fd, &j);
        if (r < 0)
                return r;
        r = job_apply_update(j, u);
        if (r < 0)
                return r;
        r = job_save_at(fd, j);
        if (r < 0)
                return r;
        if (ret)
                *ret = STEAL(j);
        return 0;
}

NpuJobStray *npu_job_strays_free(NpuJobStray *l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                free(l[i].unit);
        return mfree(l);
}

/* Remove what a crash left under a temporary name in the store's own directory. */
static void remove_tmp_entries(int dir_fd) {
        _cleanup_(dir_names_done) DirNames names = {};

        if (dir_read_names(dir_fd, NULL, 0, &names) < 0)
                return;
        for (size_t i = 0; i < names.n; i++)
                if (strneq(names.v[i], TMP_PREFIX, strlen(TMP_PREFIX)) && rm_rf_at(dir_fd, names.v[i]) == -ENOTDIR)
                        (void) unlinkat(dir_fd, names.v[i], 0);
}

int npu_jobs_recover(int dir_fd, NpuJobStray **ret, size_t *ret_n) {
        NpuJob **l = NULL;
        NpuJobStray *strays = NULL;
        size_t n = 0, k = 0;
        int r;

        remove_tmp_entries(dir_fd);
        r = load_all(dir_fd, NULL, &l, &n);
        if (r < 0)
                return r;
        if (n > 0) {
                strays = calloc(n, sizeof(NpuJobStray));
                if (!strays) {
                        npu_job_list_free(l, n);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < n; i++) {
                NpuJobUpdate u = { .state = NPU_JOB_INTERRUPTED, .error = NPU_JOB_ERROR_INTERRUPTED };
                NpuJobStray *s = strays + k;

                if (npu_job_state_is_final(l[i]->state))
                        continue;
                *s = (NpuJobStray) { .unit = STEAL(l[i]->unit), .pid = l[i]->pid };
                memcpy(s->id, l[i]->id, sizeof(s->id));
                if (s->pid == 0) {
                        _cleanup_close_ int fd = open_job(dir_fd, s->id);
                        if (fd >= 0)
                                (void) npu_job_load_started_at(fd, &s->pid, NULL);
                }
                r = npu_jobs_set_state(dir_fd, s->id, &u, NULL);
                if (r < 0) {
                        npu_job_list_free(l, n);
                        npu_job_strays_free(strays, k + 1);
                        return r;
                }
                k++;
        }
        npu_job_list_free(l, n);
        if (k == 0)
                strays = mfree(strays);
        *ret = strays;
        *ret_n = k;
        return (int) k;
}

int npu_jobs_prune(int dir_fd, unsigned keep) {
        NpuJob **l = NULL;
        size_t n = 0, finished = 0;
        int removed = 0, r;

        r = load_all(dir_fd, NULL, &l, &n);
        if (r < 0)
                return r;
        if (n > 1)
                qsort(l, n, sizeof(NpuJob *), cmp_created);
        for (size_t i = 0; i < n; i++)
                if (npu_job_state_is_final(l[i]->state))
                        finished++;
        /* The oldest finished ones go first, until @keep are left. */
        for (size_t i = 0; i < n && finished > keep; i++) {
                if (!npu_job_state_is_final(l[i]->state))
                        continue;
                r = rm_rf_at(dir_fd, l[i]->id);
                if (r < 0) {
                        npu_job_list_free(l, n);
                        return r;
                }
                finished--;
                removed++;
        }
        npu_job_list_free(l, n);
        return removed;
}

/* ---- the log ----------------------------------------------------------------------------------- */

void npu_job_log_chunk_done(NpuJobLogChunk *c) {
        free(c->data);
        *c = (NpuJobLogChunk) {};
}

int npu_job_open_log_at(int job_fd) {
        int fd = openat(job_fd, NPU_JOB_LOG_FILE, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, FILE_MODE);

        return fd < 0 ? negative_errno() : fd;
}

int npu_jobs_read_log(int dir_fd, const char *id, const char *session_id, uint64_t offset, size_t max,
                      NpuJobLogChunk *ret) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        _cleanup_close_ int job_fd = -EBADF, fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        uint64_t size = 0;
        struct stat st;
        ssize_t n = 0;
        bool finished;
        int r;

        r = npu_jobs_load_for_session(dir_fd, id, session_id, &j);
        if (r < 0)
                return r;
        /* The state before the bytes: a job final then has written all it will. */
        finished = npu_job_state_is_final(j->state);
        job_fd = open_job(dir_fd, id);
        if (job_fd < 0)
                return job_fd;
        fd = openat(job_fd, NPU_JOB_LOG_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0 && errno != ENOENT)
                return negative_errno();
        if (fd >= 0) {
                if (fstat(fd, &st) < 0)
                        return negative_errno();
                if (!S_ISREG(st.st_mode))
                        return -EBADMSG;
                size = (uint64_t) st.st_size;
        }
        if (offset > size)
                offset = size;
        max = (size_t) MIN((uint64_t) max, size - offset);
        buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        if (max > 0) {
                n = pread(fd, buf, max, (off_t) offset);
                if (n < 0)
                        return negative_errno();
        }
        buf[n] = '\0';
        *ret = (NpuJobLogChunk) {
                .data = STEAL(buf),
                .size = (size_t) n,
                .next_offset = offset + (uint64_t) n,
                .finished = finished,
        };
        return 0;
}

/* ---- the runner's files ------------------------------------------------------------------------ */

int npu_job_write_result_at(int job_fd, const NpuJobResult *res) {
        _cleanup_(json_object_putp) json_object *o = npu_job_result_to_json(res);

        return json_write_file_atomic_at(job_fd, NPU_JOB_RESULT_FILE, o, JOB_JSON_FLAGS, FILE_MODE);
}

int npu_job_load_result_at(int job_fd, NpuJobResult *ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        int r;

        r = read_json_at(job_fd, NPU_JOB_RESULT_FILE, &o);
        if (r < 0)
                return r;
        return npu_job_result_from_json(o, ret);
}

int npu_jobs_load_result(int dir_fd, const char *id, NpuJobResult *ret) {
        _cleanup_close_ int fd = open_job(dir_fd, id);

        if (fd < 0)
                return fd;
        return npu_job_load_result_at(fd, ret);
}

int npu_jobs_load_result_for_session(int dir_fd, const char *id, const char *session_id, NpuJobResult *ret) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        int r;

        r = npu_jobs_load_for_session(dir_fd, id, session_id, &j);
        if (r < 0)
                return r;
        return npu_jobs_load_result(dir_fd, id, ret);
}

int npu_job_write_started_at(int job_fd, pid_t pid, uint64_t started_ms) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (pid <= 0)
                return -EINVAL;
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        for (unsigned i = 0; i < 2; i++) {
                json_object *v = i == 0 ? json_object_new_int64(pid) : json_new_u64(started_ms);
                if (!v || json_object_object_add(o, i == 0 ? "pid" : "startedAt", v) < 0) {
                        json_object_put(v);
                        return -ENOMEM;
                }
        }
        return json_write_file_atomic_at(job_fd, NPU_JOB_STARTED_FILE, o, JOB_JSON_FLAGS, FILE_MODE);
}

int npu_job_load_started_at(int job_fd, pid_t *ret_pid, uint64_t *ret_started_ms) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *p, *s;
        int64_t pid, started;
        int r;

        r = read_json_at(job_fd, NPU_JOB_STARTED_FILE, &o);
        if (r < 0)
                return r;
        if (!json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, "pid", &p) || !json_object_is_type(p, json_type_int) ||
            !json_object_object_get_ex(o, "startedAt", &s) || !json_object_is_type(s, json_type_int))
                return -EBADMSG;
        pid = json_object_get_int64(p);
        started = json_object_get_int64(s);
        if (pid <= 0 || pid > INT32_MAX || started < 0)
                return -EBADMSG;
        if (ret_pid)
                *ret_pid = (pid_t) pid;
        if (ret_started_ms)
                *ret_started_ms = (uint64_t) started;
        return 0;
}
