/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's skill packages kept in memory and on disk (notes §11; docs/api.md
 * 15.9): their re-verification (GET /skill-packages/{id}, and before each run that mounts one) in
 * a thread of its own (thread-task.h), answered from the loop; a cache of what was verified; the
 * holds of running executions; and the retention their runner does not have (it keeps packages
 * forever and has no route to delete one, notes §11).
 *
 * The cache. A verified file's (device, inode, size, mtime, ctime) are kept; a file whose
 * signature is unchanged is not hashed again. That stays correct: the files are 0444 and owned
 * by the daemon, bound read-only into sandboxes, and any change of their bytes (a write, a
 * truncate, a rename over them) changes the size, the inode or the ctime, which user space
 * cannot set back (utimensat() sets mtime, and ctime to now). The manifest has a signature of
 * its own (entry 0). Every check still lists the whole tree (nothing extra, no symlink).
 *
 * Retention. The root directory's mtime is the package's last use (set by each verification).
 * After each stored package, those unused for SkillPackageRetentionSec= and the least recently
 * used beyond MaxSkillPackages= are renamed away and removed, except the new one and any a
 * verification under way or a run (queued or running, until it is freed) holds. A package
 * removed is simply absent: their client uploads it again (GET answers {id} alone).
 * May call core/, execution/, workspace/ and the http/ transport.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/sd-internal.h"
#include "core/manager.h"
#include "execution/execution.h"
#include "http/http-server.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/thread-task.h"
#include "util/time-util.h"

#define SKILLS_DIR "sd-skills"

/* One package known in memory: its holds and the signatures of its last verification. */
typedef struct SkillEntry {
        char id[65];
        unsigned holds;
        SdpSkillSig *sigs;
        size_t n_sigs;
        struct SkillEntry *next;
} SkillEntry;

/* The daemon's (one Manager per process); touched only from the loop. */
static SkillEntry *entries;

static SkillEntry *entry_get(const char *id, bool create) {
        SkillEntry *e;

        for (e = entries; e; e = e->next)
                if (streq(e->id, id))
                        return e;
        if (!create)
                return NULL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return NULL;
        memcpy(e->id, id, 65);
        e->next = entries;
        entries = e;
        return e;
}

/* Drop @e if nothing about it is worth keeping. */
static void entry_trim(SkillEntry *e) {
        if (!e || e->holds > 0 || e->sigs)
                return;
        for (SkillEntry **p = &entries; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        free(e);
                        return;
                }
}

void sdp_skills_forget(const char *id) {
        SkillEntry *e = entry_get(id, false);

        if (!e)
                return;
        e->sigs = mfree(e->sigs);
        e->n_sigs = 0;
        entry_trim(e);
}

static void hold(const char *id) {
        SkillEntry *e = entry_get(id, true);

        if (e)
                e->holds++;
}

static void unhold(const char *id) {
        SkillEntry *e = entry_get(id, false);

        if (e && e->holds > 0)
                e->holds--;
        entry_trim(e);
}

static bool hex64(const char *s) {
        if (!s || strlen(s) != 64)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

/* ---- verification in a thread ---------------------------------------------------------------- */

typedef struct SkillCheck {
        Manager *m;
        HttpRequest *req;               /* NULL once the client is gone */
        json_object *body;              /* for @again; NULL: a GET, answered here */
        SdpHandler again;
        char id[65];
        char *state_dir;                /* the thread's copies ... */
        SdpSkillSig *cached;
        size_t n_cached;
        SdpSkillSig *sigs;              /* ... and its result */
        size_t n_sigs;
        int result;
        ThreadTask *task;
} SkillCheck;

/* The check whose handler runs again right now (from on_check_done()). */
static SkillCheck *completed;

static SkillCheck *check_free(SkillCheck *c) {
        if (!c)
                return NULL;
        c->task = thread_task_free(c->task);
        unhold(c->id);
        json_object_put(c->body);
        free(c->state_dir);
        free(c->cached);
        free(c->sigs);
        manager_busy_unref(c->m);
        return mfree(c);
}

static int check_work(void *userdata, char **ret_out) {
        SkillCheck *c = userdata;

        return sdp_skills_verify(c->state_dir, c->id, c->cached, c->n_cached, &c->sigs, &c->n_sigs);
}

static void on_check_gone(HttpRequest *req, void *userdata) {
        SkillCheck *c = userdata;

        c->req = NULL;
}

static void on_check_done(ThreadTask *t, int error, const char *out, void *userdata) {
        SkillCheck *c = userdata;
        SkillEntry *e = entry_get(c->id, false);

        c->task = thread_task_free(c->task);
        c->result = error;
        if (e) {
                free(e->sigs);
                e->sigs = error >= 0 ? STEAL(c->sigs) : NULL;
                e->n_sigs = e->sigs ? c->n_sigs : 0;
        }
        if (error < 0 && error != -ENOENT && error != -ENOMEM)
                log_warning_errno(error, "Skill package '%s' fails verification, answering it as absent.", c->id);
        if (c->req) {
                http_request_set_userdata(c->req, NULL, NULL);
                if (!c->body)
                        sdp_skills_reply(c->m, c->req, c->id, error >= 0, 200);
                else {
                        completed = c;
                        c->again(c->m, c->req, c->body, NULL, NULL);
                        completed = NULL;
                }
        }
        check_free(c);
}

/* Start the check of @id for @req (@body NULL: a GET). Return: 0 or -errno (nothing sent). */
static int check_start(Manager *m, HttpRequest *req, const char *id, json_object *body, SdpHandler again) {
        SkillCheck *c;
        SkillEntry *e;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        manager_busy_ref(m);
        *c = (SkillCheck) { .m = m, .req = req, .body = json_object_get(body), .again = again };
        memcpy(c->id, id, 65);
        hold(id);                       /* no retention removes it under the check */
        e = entry_get(id, false);
        c->state_dir = strdup(m->state_dir);
        if (e && e->sigs) {
                c->cached = malloc(e->n_sigs * sizeof(*e->sigs));
                if (c->cached) {
                        memcpy(c->cached, e->sigs, e->n_sigs * sizeof(*e->sigs));
                        c->n_cached = e->n_sigs;
                }
        }
        if (!c->state_dir || !e) {
                check_free(c);
                return -ENOMEM;
        }
        r = thread_task_start(m->event, check_work, c, on_check_done, c, &c->task);
        if (r < 0) {
                check_free(c);
                return r;
        }
        http_request_set_userdata(req, c, on_check_gone);
        http_request_suspend(req);
        return 0;
}

void sdp_skills_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        char id[65];
        int r;

        if (lens[0] != 64)
                return sdp_reply_error(req, 400, "Invalid skill package id");
        memcpy(id, params[0], 64);
        id[64] = '\0';
        if (!hex64(id))
                return sdp_reply_error(req, 400, "Invalid skill package id");
        r = check_start(m, req, id, NULL, NULL);
        if (r < 0)
                sdp_reply_error(req, 500, "The skill package cannot be checked: %s", strerror(-r));
}

int sdp_skills_prepare(Manager *m, HttpRequest *req, json_object *body, SdpHandler again, const char *root,
                       char **ret_dir) {
        _cleanup_free_ char *prefix = NULL;
        const char *id;
        int r;

        if (asprintf(&prefix, "%s/" SKILLS_DIR "/", m->state_dir) < 0)
                goto oom;
        id = root && strneq(root, prefix, strlen(prefix)) ? root + strlen(prefix) : NULL;
        if (!hex64(id)) {
                sdp_reply_error(req, 400, "skillPackagesRoot must be a root this runner's POST /skill-packages answered");
                return -1;
        }
        if (!completed || completed->req != req || !streq(completed->id, id)) {
                r = check_start(m, req, id, body, again);
                if (r < 0)
                        goto oom;
                return 0;
        }
        r = completed->result;
        if (r == -ENOENT)
                sdp_reply_error(req, 400, "Skill package is not present on this runner; prepare it first");
        else if (r == -ENOMEM)
                goto oom;
        else if (r < 0)
                sdp_reply_error(req, 400, "Skill package fails verification; prepare it again");
        else {
                *ret_dir = strdup(root);
                if (!*ret_dir)
                        goto oom;
                return 1;
        }
        return -1;
oom:
        sdp_reply_error(req, 500, "Out of memory");
        return -1;
}

/* ---- holds of runs --------------------------------------------------------------------------- */

typedef struct SkillHold {
        char id[65];
        ExecutionWatch *watch;
} SkillHold;

static void on_run_change(void *userdata) {
        SkillHold *h = userdata;
        Execution *e = execution_watch_execution(h->watch);

        /* Held until the run is over (its sandbox gone) or freed. */
        if (e && !execution_finished(e))
                return;
        execution_watch_free(h->watch);
        unhold(h->id);
        free(h);
}

int sdp_skills_hold(Execution *e, const char *dir) {
        const char *id = strrchr(dir, '/');
        SkillHold *h;

        if (!id || !hex64(id + 1))
                return -EINVAL;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        memcpy(h->id, id + 1, 65);
        if (execution_watch_add(e, on_run_change, h, &h->watch) < 0) {
                free(h);
                return -ENOMEM;
        }
        hold(h->id);
        return 0;
}

/* ---- retention ------------------------------------------------------------------------------- */

typedef struct SkillAge {
        char id[65];
        int64_t used;                   /* the root's mtime (ns): its last use */
} SkillAge;

static int compare_recent_first(const void *a, const void *b) {
        const SkillAge *x = a, *y = b;

        return x->used != y->used ? (x->used < y->used ? 1 : -1) : strcmp(y->id, x->id);
}

static void package_remove(Manager *m, int dfd, const char *id) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t rnd = 0;
        char tmp[64];

        /* Renamed away first: a GET or a run then finds it absent, never half-removed. */
        /* Only for a unique name: without random bytes (never, once booted) the time alone. */
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t) sizeof(rnd))
                rnd = now_usec(CLOCK_MONOTONIC);
        (void) snprintf(tmp, sizeof(tmp), ".del-%016" PRIx64, rnd);
        if (renameat(dfd, id, dfd, tmp) < 0)
                return;
        sdp_skills_forget(id);
        fd = openat(dfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                (void) sdp_skills_seal_dirs(fd, "", 0700, 0);
        if (rm_rf_at(dfd, tmp) < 0)
                log_warning("Failed to remove skill package '%s' (as %s), leaving it.", id, tmp);
        else
                log_info("Removed skill package '%s' (retention).", id);
}

void sdp_skills_prune(Manager *m, int dfd, const char *keep) {
        _cleanup_(dir_names_done) DirNames names = {};
        _cleanup_free_ SkillAge *v = NULL;
        int64_t now = (int64_t) now_usec(CLOCK_REALTIME) * 1000;
        unsigned max = m->config.sd_max_skill_packages;
        uint64_t retention = m->config.sd_skill_retention_usec;
        size_t n = 0;

        if (dir_read_names(dfd, NULL, 0, &names) < 0)
                return;
        v = calloc(names.n + 1, sizeof(*v));
        if (!v)
                return;
        for (size_t i = 0; i < names.n; i++) {
                struct stat st;

                if (!hex64(names.v[i]) || fstatat(dfd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISDIR(st.st_mode))
                        continue;
                memcpy(v[n].id, names.v[i], 65);
                v[n++].used = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
        qsort(v, n, sizeof(*v), compare_recent_first);
        for (size_t i = 0, kept = 0; i < n; i++) {
                SkillEntry *e = entry_get(v[i].id, false);
                uint64_t age = now > v[i].used ? (uint64_t) (now - v[i].used) : 0;

                if (streq(v[i].id, keep) || (e && e->holds > 0) ||
                    ((max == 0 || kept < max) && (retention == 0 || age / 1000 < retention))) {
                        kept++;
                        continue;
                }
                package_remove(m, dfd, v[i].id);
        }
}
