/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The NPU broker's job forms (npu-jobs.h): the states and their transitions, ids and unit names,
 * the rules of a job, job.json and result.json to and from json-c, and the workload's
 * environment. No I/O but the clock and getrandom(); the store is npu-jobs.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "npu/npu-jobs.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-table.h"
#include "util/strv.h"
#include "workspace/workspace.h"

static const char *const npu_job_state_table[_NPU_JOB_STATE_MAX] = {
        [NPU_JOB_QUEUED]      = "queued",
        [NPU_JOB_RUNNING]     = "running",
        [NPU_JOB_SUCCEEDED]   = "succeeded",
        [NPU_JOB_FAILED]      = "failed",
        [NPU_JOB_CANCELLED]   = "cancelled",
        [NPU_JOB_INTERRUPTED] = "interrupted",
};

DEFINE_STRING_TABLE_LOOKUP(npu_job_state, NpuJobState)

bool npu_job_state_is_final(NpuJobState s) {
        return s == NPU_JOB_SUCCEEDED || s == NPU_JOB_FAILED || s == NPU_JOB_CANCELLED ||
               s == NPU_JOB_INTERRUPTED;
}

bool npu_job_state_transition_valid(NpuJobState from, NpuJobState to) {
        switch (from) {
        case NPU_JOB_QUEUED:
                return to == NPU_JOB_RUNNING || to == NPU_JOB_FAILED || to == NPU_JOB_CANCELLED ||
                       to == NPU_JOB_INTERRUPTED;
        case NPU_JOB_RUNNING:
                return to == NPU_JOB_SUCCEEDED || to == NPU_JOB_FAILED || to == NPU_JOB_CANCELLED ||
                       to == NPU_JOB_INTERRUPTED;
        case NPU_JOB_SUCCEEDED:
        case NPU_JOB_FAILED:
        case NPU_JOB_CANCELLED:
        case NPU_JOB_INTERRUPTED:
        case _NPU_JOB_STATE_MAX:
        case _NPU_JOB_STATE_INVALID:
                return false;
        }
        return false;
}

/* ---- ids --------------------------------------------------------------------------------------- */

bool npu_job_id_valid(const char *id) {
        if (!id || strlen(id) != NPU_JOB_ID_LEN)
                return false;
        for (const char *p = id; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

int npu_job_id_new(char ret[static NPU_JOB_ID_LEN + 1]) {
        uint64_t v;

        if (getrandom(&v, sizeof(v), 0) != (ssize_t) sizeof(v))
                return negative_errno();
        (void) snprintf(ret, NPU_JOB_ID_LEN + 1, "%016" PRIx64, v);
        return 0;
}

bool npu_session_id_valid(const char *id) {
        /* The API's id rule (api_param_id()): sessions name workspaces. */
        return workspace_id_valid(id);
}

bool npu_job_workload_id_valid(const char *id) {
        return workspace_id_valid(id);
}

char *npu_job_unit_name(const char *id) {
        char *s;

        if (!npu_job_id_valid(id))
                return NULL;
        return asprintf(&s, NPU_JOB_UNIT_PREFIX "%s" NPU_JOB_UNIT_SUFFIX, id) < 0 ? NULL : s;
}

int npu_job_id_from_unit(const char *unit, char ret[static NPU_JOB_ID_LEN + 1]) {
        const size_t lp = strlen(NPU_JOB_UNIT_PREFIX), ls = strlen(NPU_JOB_UNIT_SUFFIX);
        char id[NPU_JOB_ID_LEN + 1];

        if (!unit || strlen(unit) != lp + NPU_JOB_ID_LEN + ls || !strneq(unit, NPU_JOB_UNIT_PREFIX, lp) ||
            !streq(unit + lp + NPU_JOB_ID_LEN, NPU_JOB_UNIT_SUFFIX))
                return -EINVAL;
        memcpy(id, unit + lp, NPU_JOB_ID_LEN);
        id[NPU_JOB_ID_LEN] = '\0';
        if (!npu_job_id_valid(id))
                return -EINVAL;
        memcpy(ret, id, sizeof(id));
        return 0;
}

char *npu_job_config_path(const char *jobs_dir, const char *id) {
        char *s;

        if (!jobs_dir || jobs_dir[0] != '/' || !npu_job_id_valid(id))
                return NULL;
        return asprintf(&s, "%s/%s/" NPU_JOB_CONFIG_FILE, jobs_dir, id) < 0 ? NULL : s;
}

uint64_t npu_job_now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000U + (uint64_t) ts.tv_nsec / 1000000U;
}

/* ---- the job ----------------------------------------------------------------------------------- */

NpuJob *npu_job_free(NpuJob *j) {
        if (!j)
                return NULL;
        free(j->workload_id);
        free(j->session_id);
        strv_free(j->argv);
        strv_free(j->env);
        free(j->cwd);
        free(j->chips);
        free(j->error);
        free(j->unit);
        return mfree(j);
}

NpuJob **npu_job_list_free(NpuJob **l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                npu_job_free(l[i]);
        free(l);
        return NULL;
}

/* The length of the variable name of "NAME=value", or 0 when it is not a valid name. */
static size_t env_name_len(const char *e) {
        size_t n = 0;

        if (!((e[0] >= 'A' && e[0] <= 'Z') || (e[0] >= 'a' && e[0] <= 'z') || e[0] == '_'))
                return 0;
        for (n = 1; e[n] && e[n] != '='; n++)
                if (!((e[n] >= 'A' && e[n] <= 'Z') || (e[n] >= 'a' && e[n] <= 'z') ||
                      (e[n] >= '0' && e[n] <= '9') || e[n] == '_'))
                        return 0;
        return e[n] == '=' ? n : 0;
}

static bool string_ok(const char *s) {
        return s && strlen(s) <= NPU_JOB_STRING_MAX;
}

static int validate_env(char *const *env, const char **reason) {
        size_t n = 0;

        for (char *const *e = env; e && *e; e++) {
                size_t l = env_name_len(*e);

                if (++n > NPU_JOB_ENV_MAX)
                        return *reason = "too many environment entries", -EINVAL;
                if (l == 0 || !string_ok(*e))
                        return *reason = "an environment entry is not NAME=value", -EINVAL;
                if (l == strlen(NPU_JOB_VISIBLE_DEVICES_VAR) && strneq(*e, NPU_JOB_VISIBLE_DEVICES_VAR, l))
                        return *reason = "the environment may not set " NPU_JOB_VISIBLE_DEVICES_VAR, -EINVAL;
                for (char *const *o = env; o != e; o++)
                        if (env_name_len(*o) == l && strneq(*o, *e, l))
                                return *reason = "an environment variable is set twice", -EINVAL;
        }
        return 0;
}

static int validate_chips(const unsigned *chips, size_t n, const char **reason) {
        if (n > NPU_JOB_CHIPS_MAX)
                return *reason = "too many chips", -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (chips[i] > NPU_JOB_CHIP_ID_MAX)
                        return *reason = "a chip id is out of range", -EINVAL;
                if (i > 0 && chips[i] <= chips[i - 1])
                        return *reason = "chips must be distinct and ascending", -EINVAL;
        }
        return 0;
}

int npu_job_validate(const NpuJob *j, const char **ret_reason) {
        const char *reason = NULL, *dummy;
        size_t n = 0;
        int r;

        if (!ret_reason)
                ret_reason = &dummy;
        if (!npu_job_id_valid(j->id))
                return *ret_reason = "invalid job id", -EINVAL;
        if (!npu_job_workload_id_valid(j->workload_id))
                return *ret_reason = "invalid workload id", -EINVAL;
        if (!npu_session_id_valid(j->session_id))
                return *ret_reason = "invalid session id", -EINVAL;
        if (!j->argv || !j->argv[0] || j->argv[0][0] != '/')
                return *ret_reason = "argv[0] must be an absolute path", -EINVAL;
        for (char *const *a = j->argv; a && *a; a++)
                if (++n > NPU_JOB_ARGV_MAX || !string_ok(*a))
                        return *ret_reason = "argv is too long", -EINVAL;
        r = validate_env(j->env, &reason);
        if (r < 0)
                return *ret_reason = reason, r;
        if (!string_ok(j->cwd) || j->cwd[0] != '/')
                return *ret_reason = "cwd must be an absolute path", -EINVAL;
        r = validate_chips(j->chips, j->n_chips, &reason);
        if (r < 0)
                return *ret_reason = reason, r;
        if (j->timeout_sec < 1 || j->timeout_sec > NPU_JOB_TIMEOUT_SEC_MAX)
                return *ret_reason = "timeout out of range", -EINVAL;
        if (!npu_job_state_to_string(j->state))
                return *ret_reason = "invalid state", -EINVAL;
        if ((j->error && !string_ok(j->error)) || (j->unit && !string_ok(j->unit)) || j->pid < 0)
                return *ret_reason = "invalid error, unit or pid", -EINVAL;
        return 0;
}

static json_object *env_to_json(char *const *env) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        for (char *const *e = env; e && *e; e++) {
                size_t l = env_name_len(*e);
                _cleanup_free_ char *name = l > 0 ? strndup(*e, l) : NULL;

                if (!name || json_add(o, name, json_object_new_string(*e + l + 1)) < 0)
                        return NULL;
        }
        return STEAL(o);
}

json_object *npu_job_to_json(const NpuJob *j) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        int r = 0;

        if (!o)
                return NULL;
        r = r ?: json_add(o, "jobId", json_object_new_string(j->id));
        r = r ?: json_add(o, "workloadId", json_object_new_string(j->workload_id ?: ""));
        r = r ?: json_add(o, "sessionId", json_object_new_string(j->session_id ?: ""));
        r = r ?: json_add(o, "argv", json_strv_new(j->argv));
        r = r ?: json_add(o, "env", env_to_json(j->env));
        r = r ?: json_add(o, "cwd", json_object_new_string(j->cwd ?: ""));
        r = r ?: json_add(o, "chips", json_unsigned_array_new(j->chips, j->n_chips));
        r = r ?: json_add(o, "timeoutSec", json_new_u64(j->timeout_sec));
        r = r ?: json_add(o, "state", json_object_new_string(npu_job_state_to_string(j->state) ?: "invalid"));
        r = r ?: json_add(o, "createdAt", json_new_u64(j->created_ms));
        if (j->started_ms > 0)
                r = r ?: json_add(o, "startedAt", json_new_u64(j->started_ms));
        if (j->finished_ms > 0)
                r = r ?: json_add(o, "finishedAt", json_new_u64(j->finished_ms));
        if (j->exit_code >= 0)
                r = r ?: json_add(o, "exitCode", json_object_new_int(j->exit_code));
        if (j->signal > 0)
                r = r ?: json_add(o, "signal", json_object_new_int(j->signal));
        if (j->error)
                r = r ?: json_add(o, "error", json_object_new_string(j->error));
        if (j->unit)
                r = r ?: json_add(o, "unit", json_object_new_string(j->unit));
        if (j->pid > 0)
                r = r ?: json_add(o, "pid", json_object_new_int64(j->pid));
        return r < 0 ? NULL : STEAL(o);
}

/* ---- parsing ----------------------------------------------------------------------------------- */

/* A string field: required unless @optional (then *@ret stays NULL when absent). A string with a NUL is refused. */
static int get_string(json_object *o, const char *key, bool optional, char **ret) {
        json_object *v;
        char *s;

        if (!json_object_object_get_ex(o, key, &v))
                return optional ? 0 : -EBADMSG;
        if (!json_object_is_type(v, json_type_string) ||
            strlen(json_object_get_string(v)) != (size_t) json_object_get_string_len(v))
                return -EBADMSG;
        s = strdup(json_object_get_string(v));
        if (!s)
                return -ENOMEM;
        free(*ret);
        *ret = s;
        return 0;
}

/* An integer field in [@min, @max]; absent: 0 unless required. JSON null counts as absent when @null_ok. */
static int get_int(json_object *o, const char *key, bool required, bool null_ok, int64_t min, int64_t max,
                   int64_t *ret) {
        json_object *v;
        int64_t x;

        if (!json_object_object_get_ex(o, key, &v) || (null_ok && !v))
                return required ? -EBADMSG : 0;
        if (!json_object_is_type(v, json_type_int))
                return -EBADMSG;
        errno = 0;
        x = json_object_get_int64(v);
        if (errno != 0 || x < min || x > max)
                return -EBADMSG;
        *ret = x;
        return 1;
}

static int get_strv(json_object *o, const char *key, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        json_object *a;
        size_t n;
        int r;

        if (!json_object_object_get_ex(o, key, &a) || !json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        if (n > NPU_JOB_ARGV_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(a, i);
                if (!json_object_is_type(v, json_type_string) ||
                    strlen(json_object_get_string(v)) != (size_t) json_object_get_string_len(v))
                        return -EBADMSG;
                r = strv_extend(&l, json_object_get_string(v));
                if (r < 0)
                        return r;
        }
        *ret = STEAL(l);
        return 0;
}

static int get_env(json_object *o, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        json_object *e;
        int r;

        if (!json_object_object_get_ex(o, "env", &e) || !json_object_is_type(e, json_type_object))
                return -EBADMSG;
        if (json_object_object_length(e) > (int) NPU_JOB_ENV_MAX)
                return -EBADMSG;
        json_object_object_foreach(e, k, v) {
                char *entry;

                if (!json_object_is_type(v, json_type_string) ||
                    strlen(json_object_get_string(v)) != (size_t) json_object_get_string_len(v))
                        return -EBADMSG;
                if (asprintf(&entry, "%s=%s", k, json_object_get_string(v)) < 0)
                        return -ENOMEM;
                r = strv_consume(&l, entry);
                if (r < 0)
                        return r;
        }
        /* An empty environment is a list with nothing in it, not NULL. */
        if (!l) {
                l = calloc(1, sizeof(char *));
                if (!l)
                        return -ENOMEM;
        }
        *ret = STEAL(l);
        return 0;
}

static int get_chips(json_object *o, unsigned **ret, size_t *ret_n) {
        _cleanup_free_ unsigned *chips = NULL;
        json_object *a;
        size_t n;

        if (!json_object_object_get_ex(o, "chips", &a) || !json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        if (n > NPU_JOB_CHIPS_MAX)
                return -EBADMSG;
        chips = calloc(n + 1, sizeof(unsigned));
        if (!chips)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(a, i);
                int64_t x;

                if (!json_object_is_type(v, json_type_int))
                        return -EBADMSG;
                x = json_object_get_int64(v);
                if (x < 0 || x > NPU_JOB_CHIP_ID_MAX)
                        return -EBADMSG;
                chips[i] = (unsigned) x;
        }
        *ret = STEAL(chips);
        *ret_n = n;
        return 0;
}

static int job_fields_from_json(json_object *o, NpuJob *j) {
        _cleanup_free_ char *id = NULL, *state = NULL;
        int64_t v = 0;
        int r;

        r = get_string(o, "jobId", false, &id);
        if (r < 0)
                return r;
        if (!npu_job_id_valid(id))
                return -EBADMSG;
        memcpy(j->id, id, sizeof(j->id));
        r = get_string(o, "workloadId", false, &j->workload_id);
        r = r ?: get_string(o, "sessionId", false, &j->session_id);
        r = r ?: get_strv(o, "argv", &j->argv);
        r = r ?: get_env(o, &j->env);
        r = r ?: get_string(o, "cwd", false, &j->cwd);
        r = r ?: get_chips(o, &j->chips, &j->n_chips);
        r = r ?: get_string(o, "state", false, &state);
        r = r ?: get_string(o, "error", true, &j->error);
        r = r ?: get_string(o, "unit", true, &j->unit);
        if (r < 0)
                return r;
        j->state = npu_job_state_from_string(state);
        if (j->state < 0)
                return -EBADMSG;
        if (get_int(o, "timeoutSec", true, false, 1, NPU_JOB_TIMEOUT_SEC_MAX, &v) < 0)
                return -EBADMSG;
        j->timeout_sec = (uint64_t) v;
        if (get_int(o, "createdAt", true, false, 0, INT64_MAX, &v) < 0)
                return -EBADMSG;
        j->created_ms = (uint64_t) v;
        v = 0;
        if (get_int(o, "startedAt", false, false, 0, INT64_MAX, &v) < 0)
                return -EBADMSG;
        j->started_ms = (uint64_t) v;
        v = 0;
        if (get_int(o, "finishedAt", false, false, 0, INT64_MAX, &v) < 0)
                return -EBADMSG;
        j->finished_ms = (uint64_t) v;
        v = -1;
        if (get_int(o, "exitCode", false, false, 0, 255, &v) < 0)
                return -EBADMSG;
        j->exit_code = (int) v;
        v = 0;
        if (get_int(o, "signal", false, false, 1, 64, &v) < 0)
                return -EBADMSG;
        j->signal = (int) v;
        v = 0;
        if (get_int(o, "pid", false, false, 1, INT_MAX, &v) < 0)
                return -EBADMSG;
        j->pid = (pid_t) v;
        return 0;
}

int npu_job_from_json(json_object *o, NpuJob **ret, const char **ret_reason) {
        _cleanup_(npu_job_freep) NpuJob *j = NULL;
        const char *reason = "not in the form of job.json";
        int r;

        if (ret_reason)
                *ret_reason = reason;
        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (NpuJob) { .exit_code = -1 };
        r = job_fields_from_json(o, j);
        if (r < 0)
                return r;
        if (npu_job_validate(j, &reason) < 0) {
                if (ret_reason)
                        *ret_reason = reason;
                return -EBADMSG;
        }
        *ret = STEAL(j);
        return 0;
}

/* ---- result.json ------------------------------------------------------------------------------- */

void npu_job_result_done(NpuJobResult *r) {
        free(r->error);
        *r = (NpuJobResult) { .exit_code = -1 };
}

/* @key: @v when @set, else JSON null. */
static int add_int_or_null(json_object *o, const char *key, bool set, int64_t v) {
        if (set)
                return json_add(o, key, json_object_new_int64(v));
        return json_object_object_add(o, key, NULL) < 0 ? -ENOMEM : 0;
}

json_object *npu_job_result_to_json(const NpuJobResult *res) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        int r = 0;

        if (!o)
                return NULL;
        r = r ?: add_int_or_null(o, "exitCode", res->exit_code >= 0, res->exit_code);
        r = r ?: add_int_or_null(o, "signal", res->signal > 0, res->signal);
        r = r ?: json_add(o, "timedOut", json_object_new_boolean(res->timed_out));
        r = r ?: add_int_or_null(o, "startedAt", res->started_ms > 0,
                                 (int64_t) MIN(res->started_ms, (uint64_t) INT64_MAX));
        r = r ?: json_add(o, "finishedAt", json_new_u64(res->finished_ms));
        if (res->error)
                r = r ?: json_add(o, "error", json_object_new_string(res->error));
        return r < 0 ? NULL : STEAL(o);
}

int npu_job_result_from_json(json_object *o, NpuJobResult *ret) {
        _cleanup_free_ char *error = NULL;
        NpuJobResult res = { .exit_code = -1 };
        json_object *t;
        int64_t v;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        v = -1;
        if (get_int(o, "exitCode", false, true, 0, 255, &v) < 0)
                return -EBADMSG;
        res.exit_code = (int) v;
        v = 0;
        if (get_int(o, "signal", false, true, 1, 64, &v) < 0)
                return -EBADMSG;
        res.signal = (int) v;
        if (!json_object_object_get_ex(o, "timedOut", &t) || !json_object_is_type(t, json_type_boolean))
                return -EBADMSG;
        res.timed_out = json_object_get_boolean(t);
        v = 0;
        if (get_int(o, "startedAt", false, true, 0, INT64_MAX, &v) < 0)
                return -EBADMSG;
        res.started_ms = (uint64_t) v;
        if (get_int(o, "finishedAt", true, false, 0, INT64_MAX, &v) < 0)
                return -EBADMSG;
        res.finished_ms = (uint64_t) v;
        r = get_string(o, "error", true, &error);
        if (r < 0)
                return r;
        if (error && !string_ok(error))
                return -EBADMSG;
        /* A process ends by an exit status or by a signal, not both. */
        if (res.exit_code >= 0 && res.signal > 0)
                return -EBADMSG;
        res.error = STEAL(error);
        *ret = res;
        return 0;
}

NpuJobState npu_job_result_state(const NpuJobResult *r) {
        return r->exit_code == 0 && r->signal == 0 && !r->timed_out && !r->error ? NPU_JOB_SUCCEEDED : NPU_JOB_FAILED;
}

/* ---- the workload's environment ---------------------------------------------------------------- */

char *npu_job_visible_devices(const NpuJob *j) {
        /* At most NPU_JOB_CHIPS_MAX ids of at most 4 digits, and commas. */
        char *s = calloc(1, NPU_JOB_CHIPS_MAX * 5 + 1);
        size_t n = 0;

        if (!s)
                return NULL;
        for (size_t i = 0; i < j->n_chips && i < NPU_JOB_CHIPS_MAX; i++)
                n += (size_t) snprintf(s + n, NPU_JOB_CHIPS_MAX * 5 + 1 - n, "%s%u", i > 0 ? "," : "",
                                       MIN(j->chips[i], NPU_JOB_CHIP_ID_MAX));
        return s;
}

/* Set "NAME=value" in @l, replacing an entry of the same name. */
static int env_put(char ***l, char *entry) {
        size_t k;

        if (!entry)
                return -ENOMEM;
        k = env_name_len(entry);
        for (char **p = *l; k > 0 && p && *p; p++)
                if (env_name_len(*p) == k && strneq(*p, entry, k)) {
                        free(*p);
                        *p = entry;
                        return 0;
                }
        return strv_consume(l, entry);
}

int npu_job_runner_env(const NpuJob *j, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_free_ char *chips = NULL;
        char *e;
        int r;

        r = env_put(&l, strdup("PATH=/usr/local/bin:/usr/bin:/bin"));
        if (r < 0)
                return r;
        r = env_put(&l, asprintf(&e, "HOME=%s", j->cwd) < 0 ? NULL : e);
        if (r < 0)
                return r;
        r = env_put(&l, strdup("LANG=C.UTF-8"));
        if (r < 0)
                return r;
        for (char *const *p = j->env; p && *p; p++) {
                r = env_put(&l, strdup(*p));
                if (r < 0)
                        return r;
        }
        /* Last, so that nothing replaces it: the chips the job was given. */
        chips = npu_job_visible_devices(j);
        if (!chips)
                return -ENOMEM;
        r = env_put(&l, asprintf(&e, NPU_JOB_VISIBLE_DEVICES_VAR "=%s", chips) < 0 ? NULL : e);
        if (r < 0)
                return r;
        *ret = STEAL(l);
        return 0;
}
