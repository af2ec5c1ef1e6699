/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host NPU broker's workload allowlist (DESIGN.md §9, API.md "NPU and other devices"): the
 * operator's JSON file of the host model jobs a session may start, parsed strictly, and the
 * expansion of one workload for one request into a job plan (argv, environment, cwd, chips,
 * timeout) with every path that reaches the job's argv or its config file checked after
 * realpath(). No shell is ever involved: the argv is a template of literal words and two kinds of
 * placeholders. Pure but for the file system reads of npu_workloads_load() and
 * npu_workload_expand() (realpath(), the config file); no logging.
 *
 * Allowlist format (docs/npu.md section 6.2 holds the operator's version of this):
 *
 *   { "workloads": [ {
 *       "id": "fold-protein",                  [a-z0-9][a-z0-9._-]{0,63}, unique; required
 *       "description": "…",                   1..1024 bytes, no control characters; required
 *       "argv": ["${repo:venv/bin/python}", "${repo:tools/fold.py}", "--config",
 *                "${input:configPath}"],       1..256 words of ≤ 4096 bytes; required
 *       "chips": 1,                            1..16; required
 *       "timeoutSec": 3600,                    1..604800; required
 *       "configPathFields": ["workspace", "inputs.msa_dir"],   optional, ≤ 64, needs
 *                                              ${input:configPath} in argv
 *       "resourceRoots": ["/srv/models/fold-weights"],          optional, ≤ 32, absolute,
 *                                              normalised, not "/"
 *       "env": {"OMP_NUM_THREADS": "8"}        optional, ≤ 64, names as sandbox_env_name_valid(),
 *                                              values ≤ 4096 bytes without "${"
 *   } ] }
 *
 * Unknown fields are refused at every level; the file is at most NPU_WORKLOADS_MAX_BYTES.
 * Placeholders: "${repo:REL}" (REL relative to the deployment checkout: no leading '/', no "."
 * or ".." component, no empty component) and "${input:configPath}". A placeholder is either the
 * whole word or its end after a literal prefix ("--config=${input:configPath}"); one placeholder
 * a word at most. Any other "${" (another input, text after the placeholder, a second
 * placeholder, "${" in an env value) is refused at load time; there is no escape for a literal
 * "${". argv[0] is a whole-word "${repo:...}" or a literal absolute normalised path.
 */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPU_WORKLOADS_MAX_BYTES  (1024U * 1024U)        /* the allowlist file */
#define NPU_CONFIG_MAX_BYTES     (1024U * 1024U)        /* a job's config file */
#define NPU_WORKLOADS_MAX        256U
#define NPU_WORKLOAD_ID_MAX      64U
#define NPU_DESCRIPTION_MAX      1024U
#define NPU_ARGV_MAX             256U
#define NPU_ARG_MAX              4096U                  /* one argv word of the template, in bytes */
#define NPU_CHIPS_MAX            16U
#define NPU_TIMEOUT_SEC_MAX      604800U                /* one week */
#define NPU_CONFIG_FIELDS_MAX    64U
#define NPU_CONFIG_FIELD_SEGMENTS_MAX 8U                /* dots in a field path, plus one */
#define NPU_RESOURCE_ROOTS_MAX   32U
#define NPU_ENV_MAX              64U
#define NPU_PATH_MAX             4096U                  /* a path given by a request or a config */

typedef enum NpuArgKind {
        NPU_ARG_LITERAL,                /* the word is @text */
        NPU_ARG_REPO,                   /* @text, then realpath(repo_root/@rel) */
        NPU_ARG_CONFIG_PATH,            /* @text, then the checked config file's path */
        _NPU_ARG_KIND_MAX,
        _NPU_ARG_KIND_INVALID = -EINVAL,
} NpuArgKind;

/* One word of an argv template. */
typedef struct NpuArg {
        NpuArgKind kind;
        char *text;                     /* the literal word, or the literal prefix ("" if none) */
        char *rel;                      /* NPU_ARG_REPO: the path below the repository; else NULL */
} NpuArg;

/* One allowlisted workload, as parsed (read-only to callers). */
typedef struct NpuWorkload {
        char *id;
        char *description;
        NpuArg *argv;
        size_t n_argv;                  /* ≥ 1 */
        unsigned chips;                 /* 1..NPU_CHIPS_MAX */
        uint64_t timeout_usec;
        char **config_fields;           /* dotted paths into the config (NULL-terminated, may be NULL) */
        char **resource_roots;          /* absolute, as written (NULL-terminated, may be NULL) */
        char **env;                     /* "NAME=value", sorted by name (NULL-terminated, may be NULL) */
        bool takes_config;              /* argv holds ${input:configPath} */
} NpuWorkload;

typedef struct NpuWorkloads {
        NpuWorkload *workloads;
        size_t n;
} NpuWorkloads;

/* npu_workload_id_valid() - [a-z0-9][a-z0-9._-]{0,63}. */
bool npu_workload_id_valid(const char *id);

/*
 * npu_workloads_parse() - the allowlist from @len bytes of @text (JSON, strict: json-c's strict
 * mode, valid UTF-8, no trailing data, nesting ≤ 16, no "\u0000" in any string we keep). JSON
 * objects with a repeated name keep the last value (json-c); operators should not rely on it.
 * Return: 0 with *@ret (free with npu_workloads_free()), -EBADMSG with a reason in *@ret_why (if
 * not NULL; free() it) that names the workload and field, -ENOMEM.
 */
int npu_workloads_parse(const char *text, size_t len, NpuWorkloads **ret, char **ret_why);

/*
 * npu_workloads_load() - npu_workloads_parse() of the regular file @path (symlinks followed: the
 * file is the operator's; O_NONBLOCK, so a FIFO cannot hang the daemon), at most
 * NPU_WORKLOADS_MAX_BYTES.
 * Return: 0, -EBADMSG (with a reason, also for a file that is too large or not regular), -ENOMEM,
 * or the -errno of open() (-ENOENT, -EACCES, ...) with a reason.
 */
int npu_workloads_load(const char *path, NpuWorkloads **ret, char **ret_why);

/* npu_workloads_free() - accepts NULL. Return: NULL. */
NpuWorkloads *npu_workloads_free(NpuWorkloads *w);
static inline void npu_workloads_freep(NpuWorkloads **w) {
        *w = npu_workloads_free(*w);
}

/* npu_workloads_find() - the workload @id, or NULL (also for a NULL @w or @id). */
const NpuWorkload *npu_workloads_find(const NpuWorkloads *w, const char *id);

/*
 * npu_workloads_to_json() - what GET /npu/workloads lists: [{"id", "description", "chips",
 * "timeoutSec", "inputs": ["configPath"] or []}], in file order. No host path, argv or env.
 * Return: a new array, or NULL on OOM.
 */
json_object *npu_workloads_to_json(const NpuWorkloads *w);

/* What the broker runs for one request. */
typedef struct NpuJobPlan {
        char **argv;                    /* expanded, absolute paths (NULL-terminated) */
        char **env;                     /* the workload's "NAME=value" (NULL-terminated, may be NULL) */
        char *cwd;                      /* realpath(workspace_root) */
        unsigned chips;
        uint64_t timeout_usec;
        char *config_path;              /* the checked config file (realpath, in the workspace), or NULL */
        char *config_json;              /* the validated config re-serialised, every declared path field
                                         * replaced by its resolved absolute path; NULL without config */
        size_t config_json_size;
        size_t *config_args;            /* the argv indexes that end in @config_path */
        size_t n_config_args;
} NpuJobPlan;

/*
 * npu_workload_expand() - the job plan of workload @w for one request.
 * @repo_root: the deployment checkout; ${repo:REL} becomes realpath(@repo_root/REL), which must
 *   exist and be at or under realpath(@repo_root).
 * @workspace_root: the session's workspace; cwd is its realpath, which may not be "/".
 * @inputs: the request's "inputs" object (or NULL when the workload takes none): only
 *   "configPath", a string, required exactly when argv holds ${input:configPath}. It is relative
 *   to the workspace (absolute refused, any ".." component refused before resolution),
 *   realpath()ed, must be at or under the workspace and be a regular file with one link, of at
 *   most NPU_CONFIG_MAX_BYTES. It is opened once, beneath the workspace with openat2()
 *   (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; O_NOFOLLOW on the resolved path where openat2() is
 *   unavailable), and read once.
 * The config (a JSON object) then has each of @w's configPathFields checked: a dotted path
 *   "a.b.c" names config["a"]["b"]["c"], and also every reading with dotted keys ("a.b" then "c",
 *   "a.b.c", ...), so a job whose config library flattens keys cannot see another value; every
 *   value found must be a string of at most NPU_PATH_MAX bytes, absolute or relative to the
 *   workspace, resolved with realpath() or, when it does not exist yet (an output directory), as
 *   realpath() of its nearest existing parent plus the remaining components (plain names only; a
 *   dangling symlink on the way is refused); the result must be at or under the workspace or one
 *   of @w's resourceRoots (realpath()ed; a missing root matches nothing). Absent fields are fine,
 *   anything else but a string (null included) is refused, as is a non-object on the way.
 * @w: the workload (npu_workloads_find()), not NULL.
 * Return: 0 with *@ret (npu_job_plan_done() it); -EBADMSG bad inputs or config (not an object,
 *   not JSON, too large, an unknown input, a missing or extra configPath); -EPERM a path refused
 *   (also a config path field that is not a string, or an empty one);
 *   -ENOENT a repository file, the workspace, a resource or the config file is missing; -ENOMEM.
 *   Each failure but -ENOMEM comes with a reason in *@ret_why (if not NULL; free() it) naming the
 *   argument or field: "configPath: resolves outside the session's workspace",
 *   "run_dir: resolves outside the session's workspace and the workload's resource roots", ...
 */
int npu_workload_expand(const NpuWorkload *w, const char *repo_root, const char *workspace_root,
                        json_object *inputs, NpuJobPlan *ret, char **ret_why);

/*
 * npu_job_plan_use_config_copy() - point the argv words that named the workspace's config file
 * at @copy_path instead: where the broker wrote @p->config_json (in the job's own directory,
 * which the session cannot write). The integrator should always do this: the copy cannot change
 * after the check, and its path fields are the resolved ones.
 * Return: 0 or -ENOMEM (@p unchanged), -EINVAL @copy_path not absolute or @p without a config.
 */
int npu_job_plan_use_config_copy(NpuJobPlan *p, const char *copy_path);

/* npu_job_plan_done() - free what @p holds and reset it; accepts an all-zero plan. */
void npu_job_plan_done(NpuJobPlan *p);
