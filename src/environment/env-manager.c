/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The environment manager (env-manager.h): the environments in memory, their JSON, what a PUT
 * may ask for, the holds of runs on a revision's prefix, and the manager's life. The queue and
 * the provisioning steps are env-setup.c's.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "environment/env-manager-internal.h"
#include "util/child-task.h"
#include "util/helper-path.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-table.h"
#include "util/strv.h"

#define PROVISIONER_SCRIPT "sandbox-runner-provision.py"
#define PROVISIONER_SCRIPT_MAX (1U << 20)

static const char *const env_phase_table[_ENV_PHASE_MAX] = {
        [ENV_PHASE_PENDING] = "pending",
        [ENV_PHASE_BUILDING] = "building",
        [ENV_PHASE_READY] = "ready",
        [ENV_PHASE_FAILED] = "failed",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(env_phase, EnvPhase);

/* The base environments: made from Debian's packages, offline, read-only through the API. */
static const char *const python_base_packages[] = {
        "python3-numpy", "python3-pandas", "python3-scipy", "python3-matplotlib",
        "python3-ipykernel",    /* its kernelspec (docs/kernels.md) */
        NULL,
};
static const char *const r_base_packages[] = { "r-cran-data.table", "r-cran-irkernel", NULL };

static const EnvBase bases[] = {
        { "python-base", ENV_KIND_PYTHON, python_base_packages },
        { "r-base", ENV_KIND_R, r_base_packages },
};

const EnvBase *env_base_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(bases); i++)
                if (streq(bases[i].name, name))
                        return &bases[i];
        return NULL;
}


/* ---- environments in memory ----------------------------------------------------------------- */

Env *env_find(EnvManager *m, const char *name) {
        for (Env *e = m->envs; e; e = e->next)
                if (!e->removed && streq(e->name, name))
                        return e;
        return NULL;
}

int env_add(EnvManager *m, const char *name, bool base, Env **ret) {
        Env *e, **p;

        e = calloc(1, sizeof(Env));
        if (!e)
                return -ENOMEM;
        e->name = strdup(name);
        if (!e->name) {
                free(e);
                return -ENOMEM;
        }
        e->manager = m;
        e->base = base;
        e->phase = ENV_PHASE_PENDING;
        for (p = &m->envs; *p && strcmp((*p)->name, name) < 0; p = &(*p)->next)
                ;
        e->next = *p;
        *p = e;
        *ret = e;
        return 0;
}

static void env_free(Env *e) {
        EnvManager *m = e->manager;

        for (Env **p = &m->envs; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        break;
                }
        env_meta_free(e->meta);
        env_meta_free(e->wanted);
        env_meta_free(e->failed);
        for (size_t i = 0; i < e->n_holds; i++)
                free(e->holds[i].prefix);
        free(e->holds);
        free(e->name);
        free(e->step);
        free(e->error);
        free(e->setup_id);
        free(e->live_prefix);
        free(e);
}

/* A removed environment goes once no run holds any of its prefixes. */
void env_free_if_unused(Env *e) {
        if (!e->removed || e->n_holds > 0 || e->queued || e == e->manager->running)
                return;
        env_free(e);
}

int env_set_error(Env *e, const char *fmt, ...) {
        va_list ap;
        char *s;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        free(e->error);
        e->error = s;
        return s ? 0 : -ENOMEM;
}

/* The live revision's packages ({"name", "version"}), from its record. */
static json_object *packages_json(unsigned revision, EnvStore *store, const char *name) {
        _cleanup_(json_object_putp) json_object *revisions = NULL;
        json_object *a = json_object_new_array(), *last, *pkgs;
        size_t n;

        if (!a || revision == 0 || env_store_revisions(store, name, &revisions) < 0)
                return a;
        n = json_object_array_length(revisions);
        last = n > 0 ? json_object_array_get_idx(revisions, n - 1) : NULL;
        if (!last || !json_object_object_get_ex(last, "packages", &pkgs))
                return a;
        for (size_t i = 0; i < json_object_array_length(pkgs); i++) {
                json_object *p = json_object_array_get_idx(pkgs, i), *v, *o;

                o = json_object_new_object();
                if (!o)
                        break;
                if (json_object_object_get_ex(p, "name", &v))
                        json_object_object_add(o, "name", json_object_get(v));
                if (json_object_object_get_ex(p, "version", &v))
                        json_object_object_add(o, "version", json_object_get(v));
                json_object_array_add(a, o);
        }
        return a;
}

/* One environment: the list entry, or (@full) what GET /environments/{name} answers. */
json_object *env_json(Env *e, bool full) {
        const EnvMeta *spec = e->wanted ?: e->meta ?: e->failed;
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "name", json_object_new_string(e->name));
        if (spec && spec->display_name)
                json_object_object_add(o, "displayName", json_object_new_string(spec->display_name));
        json_object_object_add(o, "kind", json_object_new_string(env_kind_to_string(spec ? spec->kind : ENV_KIND_PYTHON)));
        json_object_object_add(o, "base", json_object_new_boolean(e->base));
        json_object_object_add(o, "state", json_object_new_string(env_phase_to_string(e->phase)));
        json_object_object_add(o, "revision", json_object_new_int64(e->live_revision));
        json_object_object_add(o, "packages", packages_json(e->live_revision, e->manager->store, e->name));
        if (e->error)
                json_object_object_add(o, "error", json_object_new_string(e->error));
        if (!full || !spec)
                return o;

        json_object *source = json_object_new_object(), *wheels = json_object_new_array();
        json_object_object_add(o, "requested", json_strv_new(spec->packages));
        if (spec->debian_packages)
                json_object_object_add(o, "debianPackages", json_strv_new(spec->debian_packages));
        for (size_t i = 0; wheels && i < spec->n_wheels; i++) {
                json_object *w = json_object_new_object();
                if (!w)
                        break;
                json_object_object_add(w, "sha256", json_object_new_string(spec->wheels[i].sha256));
                json_object_object_add(w, "file", json_object_new_string(spec->wheels[i].file));
                json_object_array_add(wheels, w);
        }
        json_object_object_add(o, "wheels", wheels);
        if (source) {
                if (spec->index_url)
                        json_object_object_add(source, "indexUrl", json_object_new_string(spec->index_url));
                if (spec->preset)
                        json_object_object_add(source, "preset", json_object_new_string(spec->preset));
                json_object_object_add(source, "offline", json_object_new_boolean(spec->offline));
        }
        json_object_object_add(o, "source", source);
        if (spec->channels)
                json_object_object_add(o, "channels", json_strv_new(spec->channels));
        if (e->setup_id)
                json_object_object_add(o, "setupId", json_object_new_string(e->setup_id));
        return o;
}

int64_t env_manager_wheel_size(EnvManager *m, const char *sha256, const char *file) {
        _cleanup_free_ char *path = env_store_wheel_path(m->store, &(EnvWheel) { .sha256 = (char *) sha256,
                                                                                 .file = (char *) file });
        struct stat st;

        if (!path)
                return -EINVAL;
        if (stat(path, &st) < 0)
                return negative_errno();
        return S_ISREG(st.st_mode) ? (int64_t) st.st_size : -EBADF;
}

json_object *env_manager_list_json(EnvManager *m) {
        json_object *o = json_object_new_object(), *a = json_object_new_array();

        if (!o || !a) {
                json_object_put(o);
                json_object_put(a);
                return NULL;
        }
        for (Env *e = m->envs; e; e = e->next)
                if (!e->removed)
                        json_object_array_add(a, env_json(e, false));
        json_object_object_add(o, "environments", a);
        return o;
}

static int find_or_refuse(EnvManager *m, const char *name, Env **ret, EnvRefusal *ret_refusal, char **ret_why) {
        Env *e = env_name_valid(name) ? env_find(m, name) : NULL;

        if (!e)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_UNKNOWN, -ENOENT, "No environment '%s' is known",
                              name);
        *ret = e;
        return 0;
}

int env_manager_show_json(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                          char **ret_why) {
        Env *e = NULL;
        int r;

        r = find_or_refuse(m, name, &e, ret_refusal, ret_why);
        if (r < 0)
                return r;
        *ret = env_json(e, true);
        return *ret ? 0 : -ENOMEM;
}

int env_manager_revisions_json(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                               char **ret_why) {
        json_object *revisions = NULL, *o;
        Env *e = NULL;
        int r;

        r = find_or_refuse(m, name, &e, ret_refusal, ret_why);
        if (r < 0)
                return r;
        r = env_store_revisions(m->store, name, &revisions);
        if (r == -ENOENT)
                revisions = json_object_new_array();
        else if (r < 0)
                return r;
        o = json_object_new_object();
        if (!o || !revisions) {
                json_object_put(o);
                json_object_put(revisions);
                return -ENOMEM;
        }
        json_object_object_add(o, "revisions", revisions);
        *ret = o;
        return 0;
}

static json_object *setup_entry_json(Env *e) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "name", json_object_new_string(e->name));
        json_object_object_add(o, "phase", json_object_new_string(env_phase_to_string(e->phase)));
        json_object_object_add(o, "done", json_object_new_int64(e->done));
        json_object_object_add(o, "total", json_object_new_int64(e->total));
        json_object_object_add(o, "revision", json_object_new_int64(e->live_revision));
        if (e->step && e->phase == ENV_PHASE_BUILDING)
                json_object_object_add(o, "step", json_object_new_string(e->step));
        if (e->error)
                json_object_object_add(o, "error", json_object_new_string(e->error));
        if (e->setup_id)
                json_object_object_add(o, "setupId", json_object_new_string(e->setup_id));
        return o;
}

static json_object *setup_array(EnvManager *m) {
        json_object *a = json_object_new_array();

        for (Env *e = m->envs; a && e; e = e->next)
                if (!e->removed)
                        json_object_array_add(a, setup_entry_json(e));
        return a;
}

json_object *env_manager_setup_json(EnvManager *m) {
        json_object *o = json_object_new_object();

        if (o)
                json_object_object_add(o, "setup", setup_array(m));
        return o;
}

json_object *env_manager_health_json(EnvManager *m) {
        json_object *o = json_object_new_object();
        unsigned n[_ENV_PHASE_MAX] = {};

        if (!o)
                return NULL;
        for (Env *e = m->envs; e; e = e->next)
                if (!e->removed)
                        n[e->phase]++;
        for (EnvPhase p = 0; p < _ENV_PHASE_MAX; p++)
                json_object_object_add(o, env_phase_to_string(p), json_object_new_int64(n[p]));
        json_object_object_add(o, "offline", json_object_new_boolean(m->config->env_offline));
        if (m->script_error)
                json_object_object_add(o, "reason", json_object_new_string(m->script_error));
        json_object_object_add(o, "setup", setup_array(m));
        return o;
}

int env_manager_put(EnvManager *m, const char *name, json_object *body, json_object **ret,
                    EnvRefusal *ret_refusal, char **ret_why) {
        _cleanup_(env_meta_freep) EnvMeta *w = NULL;
        Env *e = NULL;
        json_object *o;
        int r;

        if (!env_name_valid(name))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_INVALID, -EINVAL,
                              "invalid environment name (lower-case letters, digits, '.', '_', '-'; at most 63)");
        if (env_base_find(name))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_READ_ONLY, -EPERM,
                              "'%s' is a base environment: it is read-only (create a named one)", name);
        e = env_find(m, name);
        if (e && (e->queued || e == m->running))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_BUSY, -EBUSY,
                              "a setup of '%s' is under way (setup %s); wait for it", name, e->setup_id ?: "?");
        r = env_request_parse(m, name, e, body, &w, ret_refusal, ret_why);
        if (r < 0)
                return r;
        if (!e) {
                r = env_add(m, name, false, &e);
                if (r < 0)
                        return r;
        }
        r = env_setup_queue(e, STEAL(w));
        if (r < 0) {
                env_free_if_unused(e);
                return log_error_errno(r, "Cannot queue the setup of environment '%s': %m", name);
        }
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "name", json_object_new_string(name));
        json_object_object_add(o, "state", json_object_new_string("building"));
        json_object_object_add(o, "setupId", json_object_new_string(e->setup_id));
        *ret = o;
        return 0;
}

int env_manager_remove(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                       char **ret_why) {
        json_object *o;
        Env *e = NULL;
        int r;

        if (env_base_find(name))
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_READ_ONLY, -EPERM,
                              "'%s' is a base environment: it cannot be removed", name);
        r = find_or_refuse(m, name, &e, ret_refusal, ret_why);
        if (r < 0)
                return r;
        if (e->queued || e == m->running)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_BUSY, -EBUSY,
                              "a setup of '%s' is under way (setup %s); wait for it", name, e->setup_id ?: "?");
        r = env_store_remove(m->store, name);
        if (r < 0 && r != -ENOENT)
                return log_error_errno(r, "Cannot remove environment '%s': %m", name);
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_ENV_CHANGED,
                   "SANDBOX_ENVIRONMENT=%s", name,
                   "SANDBOX_ENVIRONMENT_REVISION=%u", e->live_revision,
                   "MESSAGE=Environment '%s' was removed.", name);
        e->removed = true;
        if (e->n_holds == 0)
                env_trash_empty_async(m);   /* else when its last run ends */
        env_free_if_unused(e);
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "name", json_object_new_string(name));
        json_object_object_add(o, "state", json_object_new_string("removing"));
        *ret = o;
        return 0;
}

/* Queue a failed environment's setup again: a base from its definition, a named one with what
 * it asked for last. */
static int retry_one(Env *e) {
        _cleanup_(env_meta_freep) EnvMeta *w = NULL;
        const EnvBase *b = e->base ? env_base_find(e->name) : NULL;
        int r;

        if (b)
                r = env_base_meta(b, e->manager->config, &w);
        else if (e->failed) {
                w = STEAL(e->failed);
                r = 0;
        } else
                return 0;
        if (r < 0)
                return r;
        return env_setup_queue(e, STEAL(w));
}

int env_manager_retry(EnvManager *m, const char *name, json_object **ret, EnvRefusal *ret_refusal,
                      char **ret_why) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();
        json_object *o;
        int r;

        if (!a)
                return -ENOMEM;
        if (name) {
                Env *e = NULL;

                r = find_or_refuse(m, name, &e, ret_refusal, ret_why);
                if (r < 0)
                        return r;
                if (e->phase != ENV_PHASE_FAILED)
                        return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_BUSY, -EBUSY,
                                      "environment '%s' is %s, not failed", name, env_phase_to_string(e->phase));
        }
        for (Env *e = m->envs; e; e = e->next) {
                if (e->removed || e->phase != ENV_PHASE_FAILED || (name && !streq(name, e->name)))
                        continue;
                r = retry_one(e);
                if (r < 0)
                        return log_error_errno(r, "Cannot queue the setup of environment '%s' again: %m", e->name);
                json_object_array_add(a, json_object_new_string(e->name));
        }
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "retried", STEAL(a));
        *ret = o;
        return 0;
}

/* ---- holds -------------------------------------------------------------------------------- */

int env_manager_acquire(EnvManager *m, const char *name, EnvHold **ret, EnvRefusal *ret_refusal, char **ret_why) {
        const EnvBase *b;
        EnvRevisionHold *h = NULL;
        EnvHold *hold;
        Env *e = NULL;
        int r;

        e = env_name_valid(name) ? env_find(m, name) : NULL;
        if (!e && (b = env_base_find(name))) {
                /* A base environment's first use (r-base): build it now. */
                _cleanup_(env_meta_freep) EnvMeta *w = NULL;

                r = env_base_meta(b, m->config, &w);
                if (r >= 0)
                        r = env_add(m, name, true, &e);
                if (r >= 0)
                        r = env_setup_queue(e, STEAL(w));
                if (r < 0)
                        return r;
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_NOT_READY, -EBUSY,
                              "environment '%s' is being built now (its first use); retry when it is ready", name);
        }
        if (!e)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_UNKNOWN, -ENOENT, "no environment '%s' is known", name);
        if (e->live_revision == 0)
                return env_refuse(ret_refusal, ret_why, ENV_REFUSAL_NOT_READY, -EBUSY, "environment '%s' is %s%s%s", name,
                              env_phase_to_string(e->phase), e->error ? ": " : "", e->error ?: "");

        for (size_t i = 0; i < e->n_holds; i++)
                if (e->holds[i].revision == e->live_revision)
                        h = &e->holds[i];
        if (!h) {
                EnvRevisionHold *n = reallocarray(e->holds, e->n_holds + 1, sizeof(*n));
                if (!n)
                        return -ENOMEM;
                e->holds = n;
                h = &e->holds[e->n_holds];
                *h = (EnvRevisionHold) { .revision = e->live_revision, .prefix = strdup(e->live_prefix) };
                if (!h->prefix)
                        return -ENOMEM;
                e->n_holds++;
        }
        hold = calloc(1, sizeof(EnvHold));
        if (!hold)
                return -ENOMEM;
        *hold = (EnvHold) { .env = e, .revision = h->revision, .prefix = h->prefix };
        h->n++;
        *ret = hold;
        return 0;
}

void env_hold_release(EnvHold *hold) {
        Env *e = NULL;

        if (!hold)
                return;
        e = hold->env;
        for (size_t i = 0; i < e->n_holds; i++) {
                EnvRevisionHold *h = &e->holds[i];

                if (h->revision != hold->revision || --h->n > 0)
                        continue;
                free(h->prefix);
                e->holds[i] = e->holds[--e->n_holds];
                /* The last run of an old revision ended: its prefix may go now. */
                if (hold->revision != e->live_revision || e->removed)
                        (void) env_retire_revision(e, hold->revision);
                break;
        }
        free(hold);
        env_free_if_unused(e);
}

const char *env_hold_name(const EnvHold *h) {
        return h->env->name;
}

unsigned env_hold_revision(const EnvHold *h) {
        return h->revision;
}

EnvKind env_hold_kind(const EnvHold *h) {
        const Env *e = h->env;
        const EnvMeta *spec = e->meta ?: e->wanted ?: e->failed;

        return spec ? spec->kind : ENV_KIND_PYTHON;
}

const char *env_hold_prefix(const EnvHold *h) {
        return h->prefix;
}

const char *env_hold_cover(const EnvHold *h) {
        return h->env->manager->cover;
}

/* catalog.json: the instance-global settings in force (sources, presets, channel allowlist), as
 * the revisions made now were made with them. */
static int write_catalog(EnvManager *m) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        const Config *c = m->config;

        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "offline", json_object_new_boolean(c->env_offline));
        json_object_object_add(o, "preset", json_object_new_string(c->env_preset ?: "upstream"));
        json_object_object_add(o, "indexUrl", c->env_index_url ? json_object_new_string(c->env_index_url) : NULL);
        json_object_object_add(o, "wheelhouse", c->env_wheelhouse ? json_object_new_string(c->env_wheelhouse) : NULL);
        json_object_object_add(o, "channels", json_strv_new(c->env_channels));
        json_object_object_add(o, "mirrors", json_strv_new(c->env_mirrors));
        json_object_object_add(o, "micromamba", c->env_micromamba ? json_object_new_string(c->env_micromamba) : NULL);
        json_object_object_add(o, "bootstrap", json_strv_new(c->env_bootstrap));
        return env_store_write_catalog(m->store, o);
}

/* The file that covers the host's python, pip and R in a run with an environment: empty and
 * unreadable, so that running or reading it fails. */
static int make_cover(EnvManager *m) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (asprintf(&m->cover, "%s/cover", env_store_root(m->store)) < 0)
                return -ENOMEM;
        if (lstat(m->cover, &st) >= 0) {
                if (S_ISREG(st.st_mode) && st.st_size == 0 && (st.st_mode & 07777) == 0)
                        return 0;
                if (unlink(m->cover) < 0)
                        return -errno;
        }
        fd = open(m->cover, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0000);
        if (fd < 0)
                return -errno;
        return fchmod(fd, 0000) < 0 ? -errno : 0;
}

/* ---- life ------------------------------------------------------------------------------------ */

static int load_script(EnvManager *m) {
        _cleanup_free_ char *path = find_helper("environment", PROVISIONER_SCRIPT);
        int r;

        if (!path)
                return asprintf(&m->script_error, "the provisioner %s is not installed", PROVISIONER_SCRIPT) < 0 ?
                       -ENOMEM : 0;
        r = read_file_limited(AT_FDCWD, path, O_NOCTTY, PROVISIONER_SCRIPT_MAX, 0, &m->script, &m->script_size);
        if (r < 0)
                return asprintf(&m->script_error, "the provisioner %s cannot be read: %s", path, strerror(-r)) < 0 ?
                       -ENOMEM : 0;
        return 0;
}

int env_manager_new(const EnvManagerParams *p, EnvManager **ret, char **ret_error) {
        _cleanup_(env_manager_freep) EnvManager *m = NULL;
        int r;

        m = calloc(1, sizeof(EnvManager));
        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(p->event);
        m->config = p->config;
        m->probe = p->probe;
        m->workspaces_fd = p->workspaces_fd;
        m->egress = p->egress;
        m->busy_ref = p->busy_ref;
        m->busy_unref = p->busy_unref;
        m->userdata = p->userdata;
        m->state_dir = strdup(p->state_dir);
        m->keeper_path = p->keeper_path ? strdup(p->keeper_path) : NULL;
        if (!m->state_dir || (p->keeper_path && !m->keeper_path))
                return -ENOMEM;
        r = load_script(m);
        if (r < 0)
                return r;
        r = env_store_open(p->state_dir, &m->store);
        if (r < 0)
                return asprintf(ret_error, "cannot open %s/environments: %s", p->state_dir, strerror(-r)) < 0 ?
                       -ENOMEM : r;
        r = write_catalog(m);
        if (r < 0)
                log_warning_errno(r, "Cannot write %s/environments/catalog.json, ignoring: %m", p->state_dir);
        r = make_cover(m);
        if (r < 0)
                return asprintf(ret_error, "cannot make %s/environments/cover: %s", p->state_dir, strerror(-r)) < 0 ?
                       -ENOMEM : r;
        r = env_setup_recover(m);
        if (r < 0)
                return asprintf(ret_error, "cannot load the environments from %s/environments: %s", p->state_dir,
                                strerror(-r)) < 0 ? -ENOMEM : r;
        *ret = STEAL(m);
        return 0;
}

static bool strv_same(char *const *a, char *const *b) {
        size_t n = strv_length(a);

        if (n != strv_length(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

/* Whether a base environment's built definition @a is the one the configuration gives now @b. */
static bool same_definition(const EnvMeta *a, const EnvMeta *b) {
        return a->kind == b->kind && a->offline == b->offline && strv_same(a->packages, b->packages) &&
               strv_same(a->debian_packages, b->debian_packages);
}

void env_manager_start(EnvManager *m) {
        if (!m || m->started)
                return;
        m->started = true;
        STRV_FOREACH(name, m->config->env_bootstrap) {
                const EnvBase *b = env_base_find(*name);
                _cleanup_(env_meta_freep) EnvMeta *w = NULL;
                Env *e = env_find(m, *name);

                if (!b) {
                        log_warning("[Environments] Bootstrap= names '%s', which is not a base environment "
                                    "(python-base, r-base); ignored.", *name);
                        continue;
                }
                if (e && (e->queued || e == m->running))
                        continue;   /* on its way (also: named twice) */
                if (env_base_meta(b, m->config, &w) < 0) {
                        log_oom();
                        continue;
                }
                /* Built already, from the definition in force: nothing to do. Built from another
                 * (PythonBase= changed): built again, the old revision live meanwhile. */
                if (e && e->live_revision > 0 && e->meta && same_definition(e->meta, w))
                        continue;
                if (e && e->live_revision > 0)
                        log_info("Base environment '%s' is built again: its definition in the configuration changed.",
                                 *name);
                if ((!e && env_add(m, *name, true, &e) < 0) || env_setup_queue(e, STEAL(w)) < 0)
                        log_error("Cannot queue the setup of the base environment '%s'.", *name);
        }
        env_setup_next(m);
}

void env_manager_stop(EnvManager *m) {
        if (!m)
                return;
        m->stopping = true;
        if (m->provision)
                env_provision_kill(m->provision, "the daemon is stopping");
}

void env_manager_retire(EnvManager *m) {
        if (m)
                m->stopping = true;
}

EnvManager *env_manager_free(EnvManager *m) {
        if (!m)
                return NULL;
        m->stopping = true;
        m->provision = env_provision_free(m->provision);
        egress_epoch_release(m->epoch);
        m->epoch = NULL;
        m->trash_task = child_task_free(m->trash_task);
        while (m->envs) {
                Env *e = m->envs;
                e->n_holds = 0;   /* the runs are gone with the daemon */
                env_free(e);
        }
        free(m->queue);
        env_store_free(m->store);
        free(m->script);
        free(m->script_error);
        free(m->cover);
        free(m->state_dir);
        free(m->keeper_path);
        sd_event_unref(m->event);
        return mfree(m);
}
