/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host NPU broker's jobs on disk (DESIGN.md §9, API.md "NPU and other devices"): the store
 * under <state>/npu-jobs/, one directory per job, and the forms of the files in it. Knows nothing
 * of HTTP, units or the workload allowlist; may call util/ and workspace/ (the API's id rule).
 *
 *   npu-jobs/<jobId>/job.json     what the job is and where it stands (NpuJob)     written by the daemon
 *   npu-jobs/<jobId>/config.json  the validated config the job reads (0600)          written by the daemon, once
 *   npu-jobs/<jobId>/log          the workload's stdout and stderr, appended         written by the runner
 *   npu-jobs/<jobId>/started      {"pid", "startedAt"}: the workload runs            written by the runner
 *   npu-jobs/<jobId>/result.json  {"exitCode", "signal", "timedOut", ...}            written by the runner
 *
 * Ownership is split by file, so that no file has two writers: only the daemon writes job.json
 * (the state machine below), only the runner (`sandbox-runner-npu --job DIR`, one process of
 * the unit sandbox-runner-npu@<jobId>.service) writes log, started and result.json. The daemon
 * reads result.json when the unit is gone and moves job.json to a final state from it.
 *
 * Every file but the log is replaced atomically (a temporary ".#..." name in the same directory,
 * fsync(), rename(), fsync() of the directory); readers never look at temporary names. A job's
 * directory is built under a temporary name and renamed into place with job.json and
 * config.json in it, so a job either exists whole or not at all.
 *
 * Times are milliseconds since the epoch (UTC), JSON integers, as in the execution records and
 * the rest of the API ("createdAt": 1796031928507); 0 in a struct means absent.
 *
 * One daemon owns the store, from one thread: no locks. Ids reach paths only after
 * npu_job_id_valid().
 */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/macro.h"

/* The store's directory below the state directory, and the files of a job directory. */
#define NPU_JOBS_DIR "npu-jobs"
#define NPU_JOB_FILE "job.json"
#define NPU_JOB_CONFIG_FILE "config.json"
#define NPU_JOB_LOG_FILE "log"
#define NPU_JOB_STARTED_FILE "started"
#define NPU_JOB_RESULT_FILE "result.json"

/* A job id: 16 lower-case hex digits. */
#define NPU_JOB_ID_LEN 16
/* The unit of one job: NPU_JOB_UNIT_PREFIX <jobId> NPU_JOB_UNIT_SUFFIX. */
#define NPU_JOB_UNIT_PREFIX "sandbox-runner-npu@"
#define NPU_JOB_UNIT_SUFFIX ".service"

/* Limits of a job: argv words, environment entries, chips, the timeout, the config copy. */
#define NPU_JOB_ARGV_MAX 1024U
#define NPU_JOB_ENV_MAX 256U
#define NPU_JOB_STRING_MAX 4096U
#define NPU_JOB_CHIPS_MAX 64U
#define NPU_JOB_CHIP_ID_MAX 1023U
#define NPU_JOB_TIMEOUT_SEC_MAX (30U * 24U * 3600U)
#define NPU_JOB_CONFIG_MAX (16U * 1024U * 1024U)
/* The largest job.json, result.json or started read back. */
#define NPU_JOB_JSON_MAX (4U * 1024U * 1024U)
/* How many finished jobs npu_jobs_prune() keeps by default. */
#define NPU_JOBS_KEEP 1000U

/* The variable the runner sets to the job's chips (the CANN runtime's filter of visible chips). */
#define NPU_JOB_VISIBLE_DEVICES_VAR "ASCEND_RT_VISIBLE_DEVICES"

typedef enum NpuJobState {
        NPU_JOB_QUEUED,                 /* created; its unit not started yet */
        NPU_JOB_RUNNING,                /* its unit started */
        NPU_JOB_SUCCEEDED,              /* exit status 0, in time */
        NPU_JOB_FAILED,                 /* another exit status, a signal, a timeout, or it could not start */
        NPU_JOB_CANCELLED,              /* stopped on request of its session */
        NPU_JOB_INTERRUPTED,            /* active when the daemon restarted */
        _NPU_JOB_STATE_MAX,
        _NPU_JOB_STATE_INVALID = -EINVAL,
} NpuJobState;

const char *npu_job_state_to_string(NpuJobState s);
NpuJobState npu_job_state_from_string(const char *s);

/* npu_job_state_is_final() - succeeded, failed, cancelled or interrupted: nothing changes it again. */
bool npu_job_state_is_final(NpuJobState s);

/*
 * npu_job_state_transition_valid() - whether @from may become @to: queued -> running, and
 * queued or running -> failed, cancelled, interrupted; running -> succeeded. Nothing leaves a
 * final state; no state becomes itself.
 */
bool npu_job_state_transition_valid(NpuJobState from, NpuJobState to);

/* npu_job_id_valid() - exactly NPU_JOB_ID_LEN characters of [0-9a-f]. */
bool npu_job_id_valid(const char *id);

/*
 * npu_job_id_new() - a fresh id from getrandom() (not checked against the store: npu_jobs_create()
 * answers -EEXIST for a taken one). Return: 0 or -errno.
 */
int npu_job_id_new(char ret[static NPU_JOB_ID_LEN + 1]);

/* npu_session_id_valid() - a session id as the API's ids: [A-Za-z0-9._-]{1,128}, not starting with '.'. */
bool npu_session_id_valid(const char *id);

/* npu_job_workload_id_valid() - a workload id as job.json holds it: the same rule as a session id. */
bool npu_job_workload_id_valid(const char *id);

/* npu_job_unit_name() - "sandbox-runner-npu@<id>.service". Return: a new string, NULL on OOM or a bad id. */
char *npu_job_unit_name(const char *id);

/*
 * npu_job_id_from_unit() - the job id of a unit name that npu_job_unit_name() makes.
 * Return: 0, or -EINVAL when @unit is not such a name.
 */
int npu_job_id_from_unit(const char *unit, char ret[static NPU_JOB_ID_LEN + 1]);

/*
 * npu_job_config_path() - "<jobs_dir>/<id>/config.json": where npu_jobs_create() puts the config
 * copy, for the argv before the job is created (npu_job_plan_use_config_copy()). @jobs_dir is the
 * store's absolute path. Return: a new string, or NULL (OOM, a bad id, a relative @jobs_dir).
 */
char *npu_job_config_path(const char *jobs_dir, const char *id);

/* One job: job.json. */
typedef struct NpuJob {
        char id[NPU_JOB_ID_LEN + 1];
        char *workload_id;
        char *session_id;
        char **argv;                    /* argv[0] absolute; run without a shell, no PATH search */
        char **env;                     /* the workload's "NAME=value" entries (never NULL once loaded) */
        char *cwd;                      /* absolute */
        unsigned *chips;                /* host logic ids (the N of /dev/davinciN), ascending */
        size_t n_chips;
        uint64_t timeout_sec;           /* 1 .. NPU_JOB_TIMEOUT_SEC_MAX */
        NpuJobState state;
        uint64_t created_ms;
        uint64_t started_ms;            /* 0 = not started */
        uint64_t finished_ms;           /* 0 = not finished */
        int exit_code;                  /* -1 = none */
        int signal;                     /* 0 = none */
        char *error;                    /* NULL = none */
        char *unit;                     /* NULL = none yet */
        pid_t pid;                      /* the unit's main pid (the runner); 0 = none */
} NpuJob;

/* npu_job_free() - free @j and all it owns (NULL is fine). Return: NULL. */
NpuJob *npu_job_free(NpuJob *j);
SR_DEFINE_FREE_FUNC(NpuJob *, npu_job_free);

/* npu_job_list_free() - free @n jobs of @l and @l itself. Return: NULL. */
NpuJob **npu_job_list_free(NpuJob **l, size_t n);

/*
 * npu_job_to_json() - the job.json form of @j:
 *   {"jobId", "workloadId", "sessionId", "argv": [...], "env": {"NAME": "value"}, "cwd",
 *    "chips": [...], "timeoutSec", "state", "createdAt", "startedAt"?, "finishedAt"?,
 *    "exitCode"?, "signal"?, "error"?, "unit"?, "pid"?}
 * (the optional ones only when set). Also the API's view of a job: the integrator may drop
 * "argv", "env", "unit" and "pid" for clients.
 * Return: a new object, or NULL on OOM.
 */
json_object *npu_job_to_json(const NpuJob *j);

/*
 * npu_job_from_json() - parse the job.json form and check it as npu_jobs_create() checks a new job
 * (npu_job_validate()); unknown fields are ignored, a known one of the wrong type is not.
 * Return: 0 with a new *@ret, -EBADMSG (not the form, or a field out of its rules; a static
 * reason in *@ret_reason, which may be NULL) or -ENOMEM.
 */
int npu_job_from_json(json_object *o, NpuJob **ret, const char **ret_reason);

/*
 * npu_job_validate() - the rules of a job: a valid id, workload id and session id; 1 ..
 * NPU_JOB_ARGV_MAX argv words, argv[0] an absolute path; at most NPU_JOB_ENV_MAX environment
 * entries "NAME=value" with NAME [A-Za-z_][A-Za-z0-9_]*, each name once, and not
 * NPU_JOB_VISIBLE_DEVICES_VAR (the runner sets it from the chips); every string at most
 * NPU_JOB_STRING_MAX bytes; an absolute cwd; at most NPU_JOB_CHIPS_MAX chips, strictly
 * ascending, each at most NPU_JOB_CHIP_ID_MAX; a timeout of 1 .. NPU_JOB_TIMEOUT_SEC_MAX
 * seconds; a valid state. Return: 0, or -EINVAL with a static reason in *@ret_reason (may be NULL).
 */
int npu_job_validate(const NpuJob *j, const char **ret_reason);

/* What npu_jobs_create() makes: the plan's fields, as plain parameters (borrowed). */
typedef struct NpuJobSpec {
        const char *id;                 /* NULL: a fresh one (npu_job_id_new()) */
        const char *workload_id;
        const char *session_id;
        char *const *argv;
        char *const *env;               /* "NAME=value"; NULL = none */
        const char *cwd;
        const unsigned *chips;          /* any order: sorted in the job */
        size_t n_chips;
        uint64_t timeout_sec;
        const void *config;             /* the validated config's bytes; NULL = no config.json */
        size_t config_size;
} NpuJobSpec;

/*
 * npu_jobs_open() - <state_dir>/npu-jobs (created 0700 when missing), opened O_DIRECTORY.
 * Return: the fd or -errno.
 */
int npu_jobs_open(const char *state_dir);

/*
 * npu_jobs_create() - a new job in state "queued": its directory (0700) with config.json (0600,
 * @spec->config's bytes, when given) and job.json, built under a temporary name and renamed into
 * place. "createdAt" is now.
 * Return: 0 with the id in @ret_id (NPU_JOB_ID_LEN + 1 bytes; may be NULL), -EINVAL (a rule of npu_job_validate(), or a
 * config over NPU_JOB_CONFIG_MAX; the reason in *@ret_reason, may be NULL), -EEXIST (the id is
 * taken) or -errno.
 */
int npu_jobs_create(int dir_fd, const NpuJobSpec *spec, char *ret_id,
                    const char **ret_reason);

/*
 * npu_jobs_load() - the job.json of @id.
 * Return: 0, -ENOENT (no such job; also a bad id), -EBADMSG (not a valid job.json, or another id
 * in it) or -errno.
 */
int npu_jobs_load(int dir_fd, const char *id, NpuJob **ret);

/*
 * npu_jobs_load_for_session() - npu_jobs_load(), for a session's request: a job of another
 * session, and an invalid session id, are -ENOENT like a missing one.
 */
int npu_jobs_load_for_session(int dir_fd, const char *id, const char *session_id, NpuJob **ret);

/*
 * npu_jobs_list() - the jobs of @session_id (NULL: of every session), oldest first (by createdAt,
 * then id). Directories that are not jobs (a temporary one, one without a readable job.json) are
 * skipped.
 * Return: 0 with *@ret (npu_job_list_free()) and *@ret_n (0 and a NULL list when there are
 * none), -EINVAL (a bad session id) or -errno.
 */
int npu_jobs_list(int dir_fd, const char *session_id, NpuJob ***ret, size_t *ret_n);

/* What a job's state changes to, with what the daemon knows then. */
typedef struct NpuJobResult NpuJobResult;
typedef struct NpuJobUpdate {
        NpuJobState state;
        const char *unit;               /* "running": the unit's name; NULL leaves it */
        pid_t pid;                      /* "running": the unit's main pid; 0 leaves it */
        const NpuJobResult *result;     /* a final state: exit status, signal and times of the runner's result */
        const char *error;              /* NULL leaves it */
} NpuJobUpdate;

/*
 * npu_jobs_set_state() - move job @id to @u->state and write job.json atomically. "startedAt"
 * becomes now on "running" (the result's, when given and set); "finishedAt" now on a final state
 * (the result's, when given and set); "exitCode" and "signal" come from @u->result.
 * Return: 0 (with the job as written in *@ret, may be NULL), -ENOENT, -EBADMSG (job.json
 * unreadable), -EALREADY (the job is in a final state already), -EINVAL (any other transition
 * that npu_job_state_transition_valid() refuses, or a bad update) or -errno.
 */
int npu_jobs_set_state(int dir_fd, const char *id, const NpuJobUpdate *u, NpuJob **ret);

/* A job that npu_jobs_recover() found active. */
typedef struct NpuJobStray {
        char id[NPU_JOB_ID_LEN + 1];
        char *unit;                     /* NULL: its unit was never recorded as started */
        pid_t pid;                      /* the recorded main pid, else the workload's from "started"; 0 = none */
} NpuJobStray;

/* npu_job_strays_free() - free @n strays of @l and @l itself. Return: NULL. */
NpuJobStray *npu_job_strays_free(NpuJobStray *l, size_t n);

/* The error npu_jobs_recover() gives the jobs it interrupts. */
#define NPU_JOB_ERROR_INTERRUPTED "the daemon restarted while the job was active"

/*
 * npu_jobs_recover() - at start-up: every "queued" or "running" job becomes "interrupted" with
 * "error": NPU_JOB_ERROR_INTERRUPTED and "finishedAt" now; temporary directories and files a
 * crash left in the store's own directory are removed. The daemon stops the units of the jobs
 * returned (a unit outlives a daemon restart).
 * Return: the number of jobs interrupted (with *@ret, npu_job_strays_free(), and *@ret_n) or
 * -errno.
 */
int npu_jobs_recover(int dir_fd, NpuJobStray **ret, size_t *ret_n);

/*
 * npu_jobs_prune() - remove the directories of finished jobs beyond the newest @keep of them (by
 * createdAt, then id; all sessions together). Active jobs are never removed.
 * Return: the number removed, or -errno.
 */
int npu_jobs_prune(int dir_fd, unsigned keep);

/* A piece of a job's log. */
typedef struct NpuJobLogChunk {
        char *data;                     /* @size bytes (NUL-terminated for convenience) */
        size_t size;
        uint64_t next_offset;           /* the offset to ask for next */
        bool finished;                  /* the job was in a final state before the log was read */
} NpuJobLogChunk;

/* npu_job_log_chunk_done() - free @c's data and reset it. */
void npu_job_log_chunk_done(NpuJobLogChunk *c);

/*
 * npu_jobs_read_log() - up to @max bytes of the log of job @id of @session_id from byte @offset,
 * as managed runs' logs (docs/api.md 7.3): offsets are bytes and never move; an offset past the
 * end gives no bytes and the log's size as next offset; otherwise next offset = @offset + bytes.
 * A job whose runner has not written yet has an empty log. The state is read first: with
 * @ret->finished and no bytes left, the client has the whole log.
 * Return: 0, -ENOENT (no such job of this session) or -errno.
 */
int npu_jobs_read_log(int dir_fd, const char *id, const char *session_id, uint64_t offset, size_t max,
                      NpuJobLogChunk *ret);

/* result.json: what the runner saw. */
struct NpuJobResult {
        int exit_code;                  /* -1 = none (a signal, or it never ran) */
        int signal;                     /* 0 = none */
        bool timed_out;
        uint64_t started_ms;            /* 0 = it never ran */
        uint64_t finished_ms;
        char *error;                    /* the runner could not run the job: why; NULL otherwise */
};

/* npu_job_result_done() - free what @r owns and reset it. */
void npu_job_result_done(NpuJobResult *r);

/*
 * npu_job_result_to_json() - {"exitCode": int|null, "signal": int|null, "timedOut": bool,
 * "startedAt": int|null, "finishedAt": int, "error"?: string}. Return: a new object, NULL on OOM.
 * npu_job_result_from_json() - the reverse, strictly typed. Return: 0, -EBADMSG or -ENOMEM.
 */
json_object *npu_job_result_to_json(const NpuJobResult *r);
int npu_job_result_from_json(json_object *o, NpuJobResult *ret);

/*
 * npu_job_result_state() - the final state a result means: succeeded for exit status 0 in time
 * without an error, else failed (the daemon makes a job it stopped on request "cancelled").
 */
NpuJobState npu_job_result_state(const NpuJobResult *r);

/*
 * npu_jobs_load_result() - result.json of job @id (the daemon, when the unit is gone).
 * npu_jobs_load_result_for_session() - the same for a session's request (another session: -ENOENT).
 * Return: 0, -ENOENT (no such job, or no result yet), -EBADMSG or -errno.
 */
int npu_jobs_load_result(int dir_fd, const char *id, NpuJobResult *ret);
int npu_jobs_load_result_for_session(int dir_fd, const char *id, const char *session_id, NpuJobResult *ret);

/* ---- a job directory by its fd: what the runner uses ----------------------------------------- */

/*
 * npu_job_load_at() - job.json of the job directory @job_fd (npu_job_from_json(): with -EBADMSG,
 * a static reason in *@ret_reason, which may be NULL). Return: as npu_jobs_load().
 */
int npu_job_load_at(int job_fd, NpuJob **ret, const char **ret_reason);

/* npu_job_write_result_at() - result.json of the job directory @job_fd, atomically. Return: 0 or -errno. */
int npu_job_write_result_at(int job_fd, const NpuJobResult *r);

/* npu_job_load_result_at() - result.json of the job directory @job_fd. Return: 0, -ENOENT, -EBADMSG or -errno. */
int npu_job_load_result_at(int job_fd, NpuJobResult *ret);

/*
 * npu_job_write_started_at() - "started" of the job directory @job_fd, atomically:
 * {"pid": @pid, "startedAt": @started_ms}. Return: 0, -EINVAL (pid <= 0) or -errno.
 * npu_job_load_started_at() - read it back. Return: 0, -ENOENT, -EBADMSG or -errno.
 */
int npu_job_write_started_at(int job_fd, pid_t pid, uint64_t started_ms);
int npu_job_load_started_at(int job_fd, pid_t *ret_pid, uint64_t *ret_started_ms);

/*
 * npu_job_open_log_at() - the log of the job directory @job_fd for appending
 * (O_APPEND|O_CREAT|O_CLOEXEC|O_NOFOLLOW, 0600). Return: the fd or -errno.
 */
int npu_job_open_log_at(int job_fd);

/*
 * npu_job_visible_devices() - the value of NPU_JOB_VISIBLE_DEVICES_VAR for @j: its chips joined
 * by ',' ("" for none). Return: a new string, NULL on OOM.
 */
char *npu_job_visible_devices(const NpuJob *j);

/*
 * npu_job_runner_env() - the whole environment of the workload: PATH=/usr/local/bin:/usr/bin:/bin,
 * HOME=<cwd>, LANG=C.UTF-8, then the job's entries (a job entry of the same name replaces the
 * default), then NPU_JOB_VISIBLE_DEVICES_VAR=<chips>. Nothing of the runner's own environment.
 * Return: 0 with a new NULL-terminated list in *@ret, or -ENOMEM.
 */
int npu_job_runner_env(const NpuJob *j, char ***ret);

/* npu_job_now_ms() - the realtime clock in milliseconds since the epoch. */
uint64_t npu_job_now_ms(void);
