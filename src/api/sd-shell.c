/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's managed shell executions (notes §4): POST /shell-executions
 * starts one of our managed runs (bash -euo pipefail, the code on stdin), GET .../{id} answers
 * their ManagedExecution from the live run or its record, .../logs pages the logs in their
 * chunks, .../cancel stops it. A run is owned by (sessionId, agentId): its id of ours is derived
 * from the owner and their id, so another owner finds nothing, and nothing is kept but our record.
 * May call core/, execution/ and the http/ transport.
 */

#include <errno.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/sd-auth.h"
#include "api/sd-internal.h"
#include "core/manager.h"
#include "egress/egress-epochs.h"
#include "environment/env-manager.h"
#include "execution/execution.h"
#include "execution/records.h"
#include "npu/npu-manager.h"
#include "http/http-server.h"
#include "util/fd-util.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "util/utf8.h"

#define LOG_CHUNK_BYTES 4096
#define LOG_CHUNKS_MAX 4
static const char *const shell_argv[] = { SDP_SHELL_ARGV, NULL };

/* ^[A-Za-z0-9_:.-]{1,160}$ */
static bool managed_id_valid(const char *id, size_t len) {
        if (len == 0 || len > 160)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
                      (id[i] >= '0' && id[i] <= '9') || strchr("_:.-", id[i])))
                        return false;
        return true;
}

/* Our execution id for their @id of (@session, @agent): "sd-" and 40 hex of a SHA-256. */
static void our_id(const char *session, const char *agent, const char *id, size_t id_len, char ret[static 129]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t d[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;

        sha256_init(&ctx);
        sha256_update(&ctx, strlen(session) + 1, (const uint8_t *) session);
        sha256_update(&ctx, strlen(agent) + 1, (const uint8_t *) agent);
        sha256_update(&ctx, id_len, (const uint8_t *) id);
        sha256_digest(&ctx, sizeof(d), d);
        memcpy(ret, "sd-", 3);
        for (size_t i = 0; i < 20; i++) {
                ret[3 + 2 * i] = hex[d[i] >> 4];
                ret[4 + 2 * i] = hex[d[i] & 15];
        }
        ret[43] = '\0';
}

/* The live run's record, or the one on disk. Return: 0, -ENOENT, -ENOMEM, other -errno. */
static int find_record(Manager *m, const char *id, json_object **ret, Execution **ret_e) {
        Execution *e = execution_find(&m->exec, id);
        json_object *o = NULL;
        int r;

        *ret_e = e;
        if (e) {
                if (!execution_is_managed(e))
                        return -ENOENT;
                o = execution_record_json(e);
                if (!o)
                        return -ENOMEM;
        } else {
                r = record_read(m->records_fd, id, &o);
                if (r == -EINVAL)
                        return -ENOENT;
                if (r < 0)
                        return r;
                json_object_object_del(o, "daemonPid");
                json_object_object_del(o, "daemonStartTime");
        }
        *ret = o;
        return 0;
}

static uint64_t get_u64(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) ? (uint64_t) json_object_get_int64(v) : 0;
}


/* The budget the run's logs had (their maxOutputBytes or ours, the smaller; 0: none). */
static uint64_t log_limit(json_object *rec) {
        json_object *logs, *l;

        if (!json_object_object_get_ex(rec, "logs", &logs) || !json_object_object_get_ex(logs, "stdout", &l))
                return 0;
        return get_u64(l, "limitBytes");
}

/* A run stopped at its workspace quota, in their words (notes §3). */
static char *quota_error(json_object *rec) {
        json_object *q;
        char *s = NULL;

        if (!json_object_object_get_ex(rec, "workspaceQuota", &q) ||
            asprintf(&s, "Workspace exceeded the %" PRIu64 " byte execution quota (%s)", get_u64(q, "limitBytes"),
                     json_get_string(rec, "workspaceId") ?: "") < 0)
                return NULL;
        return s;
}

static bool log_truncated(json_object *rec) {
        json_object *logs, *l, *v;

        if (!json_object_object_get_ex(rec, "logs", &logs))
                return false;
        for (int s = 0; s < _RECORD_STREAM_MAX; s++)
                if (json_object_object_get_ex(logs, s == 0 ? "stdout" : "stderr", &l) &&
                    json_object_object_get_ex(l, "truncated", &v) && json_object_get_boolean(v))
                        return true;
        return false;
}

/* Their ManagedExecution from our record @rec. */
static json_object *managed_json(Manager *m, json_object *rec, const char *id, const char *session, const char *agent) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        const char *state = json_get_string(rec, "state") ?: "running", *status = json_get_string(rec, "status") ?: "";
        uint64_t created = get_u64(rec, "createdAt");
        const char *theirs;
        char when[32];

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_string(id));
        json_object_object_add(o, "sessionId", json_object_new_string(session));
        json_object_object_add(o, "agentId", json_object_new_string(agent));
        json_object_object_add(o, "queuedAt", json_object_new_string(sdp_iso_time(created, when)));
        json_object_object_add(o, "startedAt", json_object_new_string(sdp_iso_time(created, when)));
        if (streq(state, "running")) {
                json_object_object_add(o, "state", json_object_new_string("running"));
                return STEAL(o);
        }

        if (streq(status, "exited"))
                theirs = get_u64(rec, "exitCode") == 0 ? "completed" : "failed";
        else if (streq(status, "cancelled"))
                theirs = "cancelled";
        else if (streq(status, "interrupted"))
                theirs = "unknown";     /* the daemon stopped under it: never replayed */
        else
                theirs = "failed";
        json_object_object_add(o, "state", json_object_new_string(theirs));
        json_object_object_add(o, "finishedAt", json_object_new_string(
                                       sdp_iso_time(created + get_u64(rec, "durationMs"), when)));
        if (streq(status, "workspace_quota_exceeded")) {
                _cleanup_free_ char *why = quota_error(rec);

                json_object_object_add(o, "error", json_object_new_string(why ?: status));
        } else if (!streq(status, "exited"))
                json_object_object_add(o, "error", json_object_new_string(json_get_string(rec, "error") ?: status));
        json_object_object_add(o, "logTruncated", json_object_new_boolean(log_truncated(rec)));
        if (!streq(theirs, "unknown")) {
                /* Their output budget over both streams, with their marker, as the log's budget. */
                const char *mode = json_get_string(rec, "networkMode");
                json_object *res = sdp_result_json(m, rec, "shell", SDP_SHELL_REVISION, NULL,
                                                   mode && streq(mode, "open"), log_limit(rec),
                                                   created + get_u64(rec, "durationMs")), *snap;
                if (!res)
                        return NULL;
                /* The version their API requires: the same committed workspace tree. */
                if (json_object_object_get_ex(res, "workspaceSnapshot", &snap))
                        json_object_object_add(o, "version", json_object_get(snap));
                json_object_object_add(o, "result", res);
        }
        return STEAL(o);
}

static void hold_releasep(EnvHold **h) {
        env_hold_release(*h);
        *h = NULL;
}

/* Start the managed run @e and answer 202 as their ManagedExecution. */
static void managed_go(Manager *m, HttpRequest *req, Execution *e, const char *id, const char *session,
                       const char *agent) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char when[32];
        int r;

        r = execution_start(e, NULL, NULL);
        if (r < 0 && execution_finished(e)) {
                const char *message = NULL;
                (void) execution_failure(e, &message);
                return sdp_reply_error(req, 400, "Shell execution failed: %s", message ?: "the sandbox could not be started");
        }
        o = json_object_new_object();
        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        json_object_object_add(o, "id", json_object_new_string(id));
        json_object_object_add(o, "sessionId", json_object_new_string(session));
        json_object_object_add(o, "agentId", json_object_new_string(agent));
        json_object_object_add(o, "state", json_object_new_string("queued"));
        json_object_object_add(o, "queuedAt", json_object_new_string(sdp_iso_time(now_usec(CLOCK_REALTIME) / 1000, when)));
        sdp_reply_json(req, 202, o);
}

/* A managed run with chips, between their claim and its start. */
typedef struct ManagedWait {
        Manager *m;
        HttpRequest *req;
        Execution *e;
        char *id, *session, *agent;
} ManagedWait;

static void managed_wait_free(ManagedWait *w) {
        free(w->id);
        free(w->session);
        free(w->agent);
        free(w);
}

static void on_managed_gone(HttpRequest *req, void *userdata) {
        ManagedWait *w = userdata;

        execution_free_later(w->e);   /* with it the claim */
        managed_wait_free(w);
}

static void on_managed_claimed(NpuClaim *c, int error, const char *why, void *userdata) {
        ManagedWait *w = userdata;

        http_request_set_userdata(w->req, NULL, NULL);
        if (error < 0) {
                sdp_reply_error(w->req, error == -EBUSY ? 409 : 400, "NPU devices cannot be used: %s",
                                why ?: "the chips cannot be had");
                execution_free_later(w->e);
        } else
                managed_go(w->m, w->req, w->e, w->id, w->session, w->agent);
        managed_wait_free(w);
}

static void managed_claim(Manager *m, HttpRequest *req, Execution *e, const SdpRequest *p) {
        ManagedWait *w = calloc(1, sizeof(*w));

        if (!w || !(w->id = strdup(p->id)) || !(w->session = strdup(p->session)) || !(w->agent = strdup(p->agent))) {
                if (w)
                        managed_wait_free(w);
                execution_free_later(e);
                return sdp_reply_error(req, 500, "Out of memory");
        }
        *w = (ManagedWait) { .m = m, .req = req, .e = e, .id = w->id, .session = w->session, .agent = w->agent };
        if (sdp_npu_claim(m, req, e, p, on_managed_claimed, w) < 0) {
                execution_free_later(e);
                managed_wait_free(w);
                return;
        }
        http_request_set_userdata(req, w, on_managed_gone);
        http_request_suspend(req);
}

void sdp_shell_create(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *ours = json_object_new_object(), *rec = NULL;
        _cleanup_(execution_request_freep) ExecutionRequest *er = NULL;
        _cleanup_free_ char *why = NULL, *skills_dir = NULL;
        json_object *argv;
        /* A wait budget is not a process lifetime: our maximum is the default of a managed run. */
        ExecutionMaxima max = execution_maxima_from_config(&m->config);
        char id[129];
        _cleanup_(hold_releasep) EnvHold *hold = NULL;
        SdpRequest p;
        Execution *e;
        int r;

        max.default_timeout_usec = max.max_timeout_usec;
        if (!ours)
                return sdp_reply_error(req, 500, "Out of memory");
        if (!sdp_request_check(m, req, body, SDP_KIND_MANAGED, &p))
                return;
        if (!managed_id_valid(p.id, strlen(p.id)))
                return sdp_reply_error(req, 400, "executionId must match ^[A-Za-z0-9_:.-]{1,160}$");
        our_id(p.session, p.agent, p.id, strlen(p.id), id);
        if (execution_find(&m->exec, id) || record_read(m->records_fd, id, &rec) != -ENOENT)
                return sdp_reply_error(req, 400, "Execution ID has already been used; query it instead of replaying the command");

        /* Their bash, the code on stdin; a wait budget is not a process lifetime: our maximum. */
        argv = json_object_new_array();
        for (const char *const *a = shell_argv; argv && *a; a++)
                json_object_array_add(argv, json_object_new_string(*a));
        json_object_object_add(ours, "workspaceId", json_object_new_string(p.ws));
        json_object_object_add(ours, "executionId", json_object_new_string(id));
        json_object_object_add(ours, "argv", argv);
        json_object_object_add(ours, "stdin", json_object_new_string(p.code));
        if (p.cwd)
                json_object_object_add(ours, "cwd", json_object_new_string(p.cwd));
        if (!sdp_env_prepare(m, req, &p, SDP_KIND_MANAGED, &hold))
                return;
        if (hold)
                json_object_object_add(ours, "environment", json_object_new_string(env_hold_name(hold)));
        if (p.skills) {
                json_object *env;

                if (sdp_skills_prepare(m, req, body, sdp_shell_create, p.skills, &skills_dir) <= 0)
                        return;
                env = json_object_new_object();
                if (env)
                        sdp_skills_env(env);
                json_object_object_add(ours, "env", env);
        }
        r = execution_request_parse(ours, EXECUTION_KIND_EXECUTE, &max, &er, &why);
        if (r == -ENOMEM)
                return sdp_reply_error(req, 500, "Out of memory");
        if (r < 0)
                return sdp_reply_error(req, 400, "Invalid request: %s", why ?: "bad field");
        e = sdp_execution_new(m, req, &p, &er, &hold, skills_dir);
        if (!e)
                return;
        /* Their maxOutputBytes is the logs' budget, their maxWorkspaceBytes the quota: each
         * where it is smaller than ours. */
        execution_cap_limits(e, p.max_workspace, p.max_output);
        /* A managed run belongs to nobody's connection: it ends on its own or by cancel. */
        execution_set_managed(e);
        if (p.n_npu_chips > 0)
                return managed_claim(m, req, e, &p);
        managed_go(m, req, e, p.id, p.session, p.agent);
}

/* The owner's run named by the path: its record (and live run), or the 400 is sent. */
static bool owned_record(Manager *m, HttpRequest *req, const char **params, size_t *lens, char their[static 161],
                         json_object **ret, Execution **ret_e) {
        const char *session = http_request_query(req, "sessionId"), *agent = http_request_query(req, "agentId");
        char id[129];
        int r;

        if (!session || !agent || !managed_id_valid(params[0], lens[0])) {
                sdp_reply_error(req, 400, "Execution not found for this Agent");
                return false;
        }
        memcpy(their, params[0], lens[0]);
        their[lens[0]] = '\0';
        our_id(session, agent, their, lens[0], id);
        r = find_record(m, id, ret, ret_e);
        if (r == -ENOMEM) {
                sdp_reply_error(req, 500, "Out of memory");
                return false;
        }
        if (r < 0) {
                sdp_reply_error(req, 400, "Execution not found for this Agent");
                return false;
        }
        return true;
}

static void reply_managed(Manager *m, HttpRequest *req, unsigned status, json_object *rec, const char *their) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        o = managed_json(m, rec, their, http_request_query(req, "sessionId"), http_request_query(req, "agentId"));
        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, status, o);
}

void sdp_shell_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *rec = NULL;
        char their[161];
        Execution *e;

        if (!owned_record(m, req, params, lens, their, &rec, &e))
                return;
        reply_managed(m, req, 200, rec, their);
}

void sdp_shell_cancel(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *rec = NULL;
        char their[161];
        Execution *e;

        if (!owned_record(m, req, params, lens, their, &rec, &e))
                return;
        /* Terminal only once the process is gone and the snapshot is committed: poll for it. */
        if (e && !execution_finished(e))
                execution_cancel(e, EXECUTION_STATUS_CANCELLED);
        reply_managed(m, req, 202, rec, their);
}

/* @n bytes as JSON text: a byte that is not part of valid UTF-8 (a character cut at a chunk's
 * edge) becomes U+FFFD. */
json_object *sdp_lossy_string(const char *s, size_t n) {
        _cleanup_free_ char *o = malloc(n * 3 + 1);
        size_t k = 0;

        if (!o)
                return NULL;
        for (size_t i = 0; i < n;) {
                unsigned char c = (unsigned char) s[i];
                size_t l = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;

                if (l > 0 && i + l <= n && utf8_valid(s + i, l)) {
                        memcpy(o + k, s + i, l);
                        k += l;
                        i += l;
                } else {
                        memcpy(o + k, "\xef\xbf\xbd", 3);
                        k += 3;
                        i++;
                }
        }
        return json_object_new_string_len(o, (int) k);
}

/*
 * Cursors (1-based) number 4 KiB pieces of the two logs taken in turn: cursor c is piece
 * (c-1)/2 of stdout when c is odd, of stderr when even. Stable while the logs grow; a piece not
 * yet full is handed out only once the run has ended (so a cursor never comes back with more).
 */
void sdp_shell_logs(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *rec = NULL, *o = json_object_new_object();
        _cleanup_close_ int fd_out = -EBADF, fd_err = -EBADF;
        int *fds[_RECORD_STREAM_MAX] = { &fd_out, &fd_err };
        const char *cursor_s = http_request_query(req, "cursor");
        uint64_t sizes[_RECORD_STREAM_MAX] = {}, cursor = 1, end;
        json_object *chunks = json_object_new_array();
        char their[161], id[129], buf[LOG_CHUNK_BYTES];
        bool finished, more = false;
        Execution *e;

        if (!o || !chunks) {
                json_object_put(chunks);
                return sdp_reply_error(req, 500, "Out of memory");
        }
        if (!owned_record(m, req, params, lens, their, &rec, &e)) {
                json_object_put(chunks);
                return;
        }
        if (cursor_s && (sdp_timestamp_parse(cursor_s, &cursor) < 0 || cursor == 0)) {
                json_object_put(chunks);
                return sdp_reply_error(req, 400, "cursor must be a positive integer");
        }
        finished = !e || execution_finished(e);
        our_id(http_request_query(req, "sessionId"), http_request_query(req, "agentId"), their, strlen(their), id);
        for (int s = 0; s < _RECORD_STREAM_MAX; s++) {
                struct stat st;

                *fds[s] = record_log_open(m->records_fd, id, (RecordStream) s);
                if (*fds[s] >= 0 && fstat(*fds[s], &st) == 0)
                        sizes[s] = (uint64_t) st.st_size;
        }
        /* The first cursor past both logs. */
        end = 2 * ((MAX(sizes[0], sizes[1]) + LOG_CHUNK_BYTES - 1) / LOG_CHUNK_BYTES) + 1;

        for (; cursor < end; cursor++) {
                int s = (int) ((cursor - 1) % 2);
                uint64_t off = ((cursor - 1) / 2) * LOG_CHUNK_BYTES, n;
                json_object *c;
                ssize_t k;

                if (off >= sizes[s])
                        continue;       /* this stream has no such piece: nothing to hand out */
                n = MIN((uint64_t) LOG_CHUNK_BYTES, sizes[s] - off);
                if (n < LOG_CHUNK_BYTES && !finished)
                        break;          /* not full yet: from this cursor on, next time */
                if (json_object_array_length(chunks) >= LOG_CHUNKS_MAX) {
                        more = true;
                        break;
                }
                k = pread(*fds[s], buf, (size_t) n, (off_t) off);
                if (k < 0) {
                        json_object_put(chunks);
                        return sdp_reply_error(req, 500, "The log cannot be read");
                }
                c = json_object_new_object();
                if (!c)
                        continue;
                json_object_object_add(c, "cursor", json_new_u64(cursor));
                json_object_object_add(c, "stream", json_object_new_string(s == 0 ? "stdout" : "stderr"));
                json_object_object_add(c, "text", sdp_lossy_string(buf, (size_t) k));
                json_object_array_add(chunks, c);
        }
        json_object_object_add(o, "chunks", chunks);
        json_object_object_add(o, "nextCursor", json_new_u64(cursor));
        json_object_object_add(o, "truncated", json_object_new_boolean(more));
        json_object_object_add(o, "retentionTruncated", json_object_new_boolean(log_truncated(rec)));
        sdp_reply_json(req, 200, o);
}
