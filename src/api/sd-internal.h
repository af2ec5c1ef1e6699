/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the ScienceDiscovery dialect's files share (sd-routes.c, sd-execute.c, sd-shape.c): its
 * answers (JSON with their headers, errors as {"error": "..."}), its handlers, and the pure
 * shaping of results (output budget, tree diff, times). See docs/api.md, "ScienceDiscovery dialect".
 */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "api/sd-network.h"

typedef struct HttpRequest HttpRequest;
typedef struct Manager Manager;
struct Cas;
typedef struct EgressEpoch EgressEpoch;
typedef struct EnvHold EnvHold;
struct NpuClaim;
typedef struct Execution Execution;
typedef struct ExecutionRequest ExecutionRequest;

/* Their JSON limit for request bodies (notes §1). */
#define SDP_JSON_BODY_MAX UINT64_C(2000000)

/* sdp_reply_json() - @o as they send JSON: charset, "cache-control: no-store", a final newline. */
void sdp_reply_json(HttpRequest *req, unsigned status, json_object *o);
/* sdp_reply_error() - @status with {"error": <message>}. */
void sdp_reply_error(HttpRequest *req, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A handler: @body is the parsed JSON object of routes that take one (else NULL); @params and
 * @lens the path's "*" segments. */
typedef void (*SdpHandler)(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);

/* A route's begin hook, for streamed or large bodies (headers in, bearer checked, no body yet):
 * set up the body (a sink) or reply; return the body's cap. */
typedef uint64_t (*SdpBegin)(Manager *m, HttpRequest *req, const char **params, size_t *lens);

/* sd-routes.c */
void sdp_health(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_status(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_resources(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);

/* sd-execute.c: POST /execute, and what the managed runs share with it. */
void sdp_execute(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_execute_shell(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);

/* The checked fields of an execution request (pointers into its body). */
typedef struct SdpRequest {
        const char *id, *code, *language, *key, *revision, *session, *agent, *cwd;
        const char *skills;             /* skillPackagesRoot, or NULL */
        uint64_t timeout_ms;            /* executionTimeoutMs, 0 = none */
        uint64_t max_output;            /* maxOutputBytes, 0 = no truncation */
        uint64_t max_workspace;         /* maxWorkspaceBytes, 0 = none (our quota still applies) */
        char ws[129];                   /* our workspace for their runnerWorkspaceKey */
        SdpNetwork net;                 /* permissionEpoch's network, as their rule reads it */
        const char *epoch_revision;     /* permissionEpoch.environmentRevisionId */
        const char *environment_id;     /* environmentId of a shell run (their named environment) */
        unsigned npu_chips[64];         /* npuDevices: their host card indices, our chips' logic ids */
        size_t n_npu_chips;
} SdpRequest;

typedef enum SdpKind {
        SDP_KIND_EXECUTE,               /* POST /execute: python (or r) */
        SDP_KIND_EXECUTE_SHELL,         /* POST /execute-shell: bash, answered at its end (legacy) */
        SDP_KIND_MANAGED,               /* POST /shell-executions: bash, owned by (sessionId, agentId) */
} SdpKind;

/* The shell their runner starts, the code on its stdin. */
#define SDP_SHELL_ARGV "bash", "--noprofile", "--norc", "-euo", "pipefail", "-s"
#define SDP_SHELL_REVISION "system-shell-bwrap-v1"

/* sdp_request_check() - their execution request @body checked for @kind (a managed run also needs
 * agentId and permissionEpoch.sessionId). Return: true, or false with the 400 sent. */
bool sdp_request_check(Manager *m, HttpRequest *req, json_object *body, SdpKind kind, SdpRequest *ret);

/* sdp_result_json() - their execution result from our answer or record @ours (@finished: Unix ms
 * of its end; @network_revision: their networkAccess.revision, NULL: our gateway's revision from
 * @ours; @network_open: the run's network was mode open). Return: a new object, NULL on OOM. */
json_object *sdp_result_json(Manager *m, json_object *ours, const char *language, const char *revision,
                             const char *network_revision, bool network_open, uint64_t max_output,
                             uint64_t finished);

/* sd-network.c: the per-request network policy. */
/* sdp_network_acquire() - the gateway of @n's allowlist (*ret NULL without network).
 * Return: 0; -EINVAL with *ret_error for a bad entry; -ENOMEM; other -errno with *ret_error. */
int sdp_network_acquire(Manager *m, const SdpNetwork *n, EgressEpoch **ret, char **ret_error);
/* sdp_network_prepare() - the same for request @p, the error answered. Return: false once sent. */
bool sdp_network_prepare(Manager *m, HttpRequest *req, const SdpRequest *p, EgressEpoch **ret);

/*
 * sdp_execution_new() - the execution of request @p from our parsed request @er (taken): the
 * gateway of its own network policy, the environment of @hold (taken) and the skill package
 * @skills_dir (or NULL) bound. Return: the execution, or NULL once the error is answered.
 */
Execution *sdp_execution_new(Manager *m, HttpRequest *req, const SdpRequest *p, ExecutionRequest **er,
                             EnvHold **hold, const char *skills_dir);
/* sdp_network_check() - the permission @epoch's network and @body's sandboxEgressProxy into @ret.
 * Return: false once the 400 is sent. */
bool sdp_network_check(HttpRequest *req, json_object *body, json_object *epoch, SdpNetwork *ret);
/* sdp_network_health() - /health's sandboxNetwork. Return: a new object, NULL on OOM. */
json_object *sdp_network_health(Manager *m);

/* sd-queue.c: their order of /execute and /execute-shell runs (notes §1, "Concurrency"). */
typedef struct SdpSlot SdpSlot;
typedef void (*SdpSlotStart)(void *userdata);
/*
 * sdp_slot_enter() - a run of (@session, @agent), their @id, in @language, takes its place: runs
 * of one pair go one after the other (first come, first served), other pairs in parallel. Its
 * turn has come at once, or @start is called from the loop when the earlier run of the pair left.
 * Return: 1 its turn (start it now), 0 it waits, -ENOMEM.
 */
int sdp_slot_enter(Manager *m, const char *session, const char *agent, const char *id, const char *language,
                   SdpSlotStart start, void *userdata, SdpSlot **ret);
/* sdp_slot_leave() - the run is over (ended, refused, its client gone): the next of its pair gets
 * its turn. Accepts NULL. Return: NULL. */
SdpSlot *sdp_slot_leave(SdpSlot *s);
/* sdp_slots_json() - /status's activeExecutions: every slot, waiting ("queued") or not
 * ("running"). Return: a new array, NULL on OOM. */
json_object *sdp_slots_json(Manager *m);

/* sd-routes.c: kernels, which this runner never keeps (persistent runs are refused). */
void sdp_kernels_list(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_kernels_teardown(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_kernel_teardown(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);

/* sd-shell.c: the managed shell executions. */
void sdp_shell_create(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_shell_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_shell_logs(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_shell_cancel(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
/* sdp_lossy_string() - @n bytes as a JSON string, bytes that are not valid UTF-8 as U+FFFD. */
json_object *sdp_lossy_string(const char *s, size_t n);

/* sd-npu.c: the NPU broker and devices. */
void sdp_npu_devices(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_npu_workloads(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_npu_jobs_list(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_npu_job_create(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_npu_job_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_npu_job_logs(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_npu_job_result(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_npu_job_cancel(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
/* sdp_npu_devices_parse() - @body's npuDevices into @p (at most 64 unique indices up to 1023).
 * Return: false once the 400 is sent. */
bool sdp_npu_devices_parse(Manager *m, HttpRequest *req, json_object *body, SdpRequest *p);
/* sdp_npu_claim() - hold and re-probe the chips of @p for run @e (set as its devices); @done
 * follows from the loop. Return: 0, or -errno with the answer sent (@e is the caller's to free). */
int sdp_npu_claim(Manager *m, HttpRequest *req, Execution *e, const SdpRequest *p,
                  void (*done)(struct NpuClaim *c, int error, const char *why, void *userdata), void *userdata);
/* /health's npuBroker. Return: a new object, NULL on OOM. */
json_object *sdp_npu_health(Manager *m);
/* Their NpuInventory (GET /npu/devices, /resources' npu). Return: a new object, NULL on OOM. */
json_object *sdp_npu_inventory(Manager *m);
/* /status's npuJobs: the summaries of every session's jobs that are queued or running, oldest
 * first (empty without a broker). Return: a new array, NULL on OOM. */
json_object *sdp_npu_active_jobs(Manager *m);

/* sd-env.c, sd-env-change.c: environments. */
void sdp_environments_list(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_environment_create(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_environment_delete(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_environment_install(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_environment_uninstall(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_environment_revisions(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_environment_snapshot(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_environment_setup_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_environment_setup_post(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
/* /health's scientificEnvs. Return: a new object, NULL on OOM. */
json_object *sdp_environments_health(Manager *m);
/* Our list entry of environment @name (new reference; NULL: none), its revision records (a new
 * array), their Environment of an entry, their EnvironmentRevision of a record. */
json_object *sdp_env_entry(Manager *m, const char *name);
json_object *sdp_env_records(Manager *m, const char *name);
json_object *sdp_env_environment_json(Manager *m, json_object *entry);
json_object *sdp_env_revision_json(Manager *m, const char *name, const char *kind, json_object *rec);
/* sdp_env_prepare() - the environment a run of @kind gets (their revision, environmentId or the
 * language's starter), held: *ret NULL for none. Return: false once the 400 is sent. */
bool sdp_env_prepare(Manager *m, HttpRequest *req, const SdpRequest *p, SdpKind kind, EnvHold **ret);
/* sdp_env_attach() - before start: the run takes @hold (NULL: nothing). */
void sdp_env_attach(Execution *e, EnvHold *hold);

/* sd-shape.c (pure, but sdp_tree_diff(), which reads trees of the CAS) */

/* sdp_iso_time() - Unix milliseconds as "YYYY-MM-DDTHH:MM:SS.mmmZ" into @buf. Return: @buf. */
char *sdp_iso_time(uint64_t ms, char buf[static 32]);

/*
 * sdp_output_bound() - their combined output budget (notes §3): stdout may use @max minus the
 * bytes of stderr and stderr @max minus those of stdout; a stream over its share keeps its head
 * and tail around "\n...[output truncated: exceeded N bytes; ...]...\n", the whole at most its
 * share. @max 0: no truncation. Writes new strings to @ret_out and @ret_err.
 * Return: 0 or -ENOMEM.
 */
int sdp_output_bound(const char *out, size_t out_size, const char *err, size_t err_size, uint64_t max,
                     char **ret_out, size_t *ret_out_size, char **ret_err, size_t *ret_err_size);

/*
 * sdp_runner_workspace_key_valid() - a runnerWorkspaceKey as they define it: 1-500 characters of
 * '/'-separated segments of [A-Za-z0-9._-], none "." or "..", not absolute.
 */
bool sdp_runner_workspace_key_valid(const char *key);
/* sdp_workspace_for_key() - our workspace id for @key: the key itself when it is a valid
 * workspace id, else "sd-" and 40 hex of its SHA-256. */
void sdp_workspace_for_key(const char *key, char ret[static 129]);

/*
 * sdp_tree_diff() - the regular files of tree @new that are not in tree @old (@ret_created) or
 * whose content differs (@ret_modified), as sorted relative POSIX paths; @old NULL: every file
 * is new. Subtrees with equal digests are not read. Return: 0 or -errno of the CAS.
 */
int sdp_tree_diff(struct Cas *cas, const char *old, const char *new, json_object **ret_created,
                  json_object **ret_modified);

/* ---- remote workspaces and skill packages (sd-workspace.c, sd-snapshots.c, sd-skills.c) ---- */

/* Their relative file paths (notes §10): ≤ 2,000 bytes, and ours (ws_path_validate()). */
#define SDP_PATH_MAX 2000
/* Most paths a listing or a snapshot may select. */
#define SDP_SELECT_MAX 50

/*
 * sdp_workspace_param() - the workspace their key @key (a query value or a body field; NULL:
 * absent) names, as sdp_workspace_for_key(). Return: true, or false with the 400 sent.
 */
bool sdp_workspace_param(HttpRequest *req, const char *key, char ret[static 129]);
/* sdp_path_valid() - a relative file path as both sides accept it (never empty). */
bool sdp_path_valid(const char *path);

/*
 * sdp_rw_usage() - their quota sum of the workspace at @ws_fd: the sizes of its regular files
 * (symlinks and others left out), and the size of the regular file at @path in *@ret_existing
 * (0: something else is there, -1: nothing). Thread-safe. Return: 0 or -errno of the walk.
 */
int sdp_rw_usage(int ws_fd, const char *path, uint64_t *ret_bytes, int64_t *ret_existing);
void sdp_rw_files(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_rw_file_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
uint64_t sdp_rw_put_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens);
uint64_t sdp_rw_transfer_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens);
void sdp_rw_put(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_rw_delete(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_rw_snapshot_create(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
void sdp_rw_snapshot_file(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);

/* Skill packages: GET /skill-packages/{id}, POST /skill-packages (64 MiB of JSON). */
#define SDP_SKILLS_BODY_MAX (UINT64_C(64) << 20)
void sdp_skills_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
uint64_t sdp_skills_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens);
void sdp_skills_post(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens);
/* What a verified file of a package was (stat): unchanged, it is not hashed again. */
typedef struct SdpSkillSig {
        uint64_t dev, ino;
        int64_t size, mtime_nsec, ctime_nsec;
} SdpSkillSig;
/*
 * sdp_skills_verify() - the stored package @id below @state_dir checked against its own
 * .skill-bundle.json: every file's mode, size and SHA-256 (skipped for a file whose signature
 * equals its entry in @cached: entry 0 is the manifest's, then the files in manifest order),
 * nothing else present; marks it used (the root's mtime). Thread-safe. Return: 0 with the new
 * signatures in *@ret_sigs (may be NULL), -ENOENT not held, -EIO fails verification, -ENOMEM.
 */
int sdp_skills_verify(const char *state_dir, const char *id, const SdpSkillSig *cached, size_t n_cached,
                      SdpSkillSig **ret_sigs, size_t *ret_n);
/* sdp_skills_reply() - {id} or, @held, {id, root}. */
void sdp_skills_reply(Manager *m, HttpRequest *req, const char *id, bool held, unsigned status);
/* sdp_skills_seal_dirs() - every directory below @dir of @fd (and it) to @mode. Return: 0 or -errno. */
int sdp_skills_seal_dirs(int fd, const char *dir, mode_t mode, unsigned depth);
/* sd-skill-store.c: verification in a thread (cached), leases of running executions, retention. */
/* sdp_skills_forget() - drop what is cached of package @id. */
void sdp_skills_forget(const char *id);
/* sdp_skills_prune() - after a package @keep was stored into the directory @dfd: delete those
 * unused for SkillPackageRetentionSec=, and the least recently used beyond MaxSkillPackages=,
 * never @keep nor one a run holds. */
void sdp_skills_prune(Manager *m, int dfd, const char *keep);
/* sdp_skills_hold() - package @dir (a verified root) is held until run @e is over or freed.
 * Return: 0, -EINVAL, -ENOMEM. */
int sdp_skills_hold(Execution *e, const char *dir);
typedef struct Execution Execution;
/* Where skills appear in a sandbox (notes §11), and the variables that say so. */
#define SDP_SKILLS_PATH "/skills"
#define SDP_SKILL_EXTENSIONS_PATH "/skill-extensions"
#define SDP_SKILL_EXTENSIONS_DIR ".sciencediscovery/skill-extensions"
/*
 * sdp_skills_prepare() - their skillPackagesRoot @root: the verified package's host directory
 * into *@ret_dir. The verification runs in a thread: the first call starts it and suspends
 * @req; once it is done, the handler @again runs again with @body (kept meanwhile) and this
 * call then answers at once. Return: 1 verified, 0 started (return now), -1 the 400 (500) sent.
 */
int sdp_skills_prepare(Manager *m, HttpRequest *req, json_object *body, SdpHandler again, const char *root,
                       char **ret_dir);
/* sdp_skills_env() - add the skill variables to the object @env (name → value). */
void sdp_skills_env(json_object *env);
/* sdp_skills_attach() - the run @e gets @dir read-only at /skills and /skill-extensions, a link to
 * the workspace's (created if missing) writable .sciencediscovery/skill-extensions; the package
 * is held (never deleted) until the run is over. Return: 0 or -ENOMEM. */
int sdp_skills_attach(Manager *m, Execution *e, const char *dir, const char *ws);
