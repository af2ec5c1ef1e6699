/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The setups of environments, one at a time (env-manager-internal.h): the queue and what it
 * persists (setup.json: a setup queued or running, resumed after a restart), the plan handed to
 * the in-sandbox provisioner, the provisioning step (env-provision.h) in a build directory beside
 * the live prefix, and the commit: the revision record, then the one rename that makes the new
 * prefix live (env_store_publish()). A failed or killed step leaves the old prefix live.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "environment/env-conda.h"
#include "environment/env-manager-internal.h"
#include "util/child-task.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/time-util.h"

#define SANDBOX_WHEELS "/srv/wheels"
#define SANDBOX_WHEELHOUSE "/srv/wheelhouse"
#define SANDBOX_PYTHON "/usr/bin/python3"
#define SANDBOX_INDEX_CA "/srv/index-ca.pem"

/* A base environment made from Debian's packages (copied in, offline), not by pip. */
static bool from_debian(const EnvMeta *w) {
        return strv_length(w->debian_packages) > 0;
}

int env_base_meta(const EnvBase *b, const Config *config, EnvMeta **ret) {
        _cleanup_(env_meta_freep) EnvMeta *w = calloc(1, sizeof(EnvMeta));

        if (!w || !(w->name = strdup(b->name)))
                return -ENOMEM;
        w->kind = b->kind;
        w->base = true;
        w->wheels = calloc(1, sizeof(EnvWheel));
        if (!w->wheels)
                return -ENOMEM;
        if (b->kind == ENV_KIND_PYTHON && config->env_python_base && !streq(config->env_python_base, "debian")) {
                /* [Environments] PythonBase=wheelhouse|index: pip installs PythonBasePackages=
                 * from the wheelhouse (offline) or the index (through the setup's gateway). */
                w->offline = streq(config->env_python_base, "wheelhouse");
                STRV_FOREACH(p, config->env_python_base_packages)
                        if (strv_extend(&w->packages, *p) < 0)
                                return -ENOMEM;
                *ret = STEAL(w);
                return 0;
        }
        w->offline = true;   /* Debian's packages: no index */
        for (const char *const *p = b->debian_packages; *p; p++)
                if (strv_extend(&w->debian_packages, *p) < 0)
                        return -ENOMEM;
        *ret = STEAL(w);
        return 0;
}

static int random_setup_id(char **ret) {
        uint8_t b[8];

        if (getentropy(b, sizeof(b)) < 0)
                return negative_errno();
        return asprintf(ret, "%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]) < 0 ?
               -ENOMEM : 0;
}

int env_setup_queue(Env *e, EnvMeta *wanted) {
        EnvManager *m = e->manager;
        _cleanup_(env_meta_freep) EnvMeta *w = wanted;
        Env **q;
        int r;

        if (e->queued || e == m->running)
                return -EBUSY;   /* one setup at a time per environment: its id and spec are in use */
        q = reallocarray(m->queue, m->n_queue + 1, sizeof(Env *));
        if (!q)
                return -ENOMEM;
        m->queue = q;
        free(e->setup_id);
        e->setup_id = NULL;
        r = random_setup_id(&e->setup_id);
        if (r < 0)
                return r;
        env_meta_free(e->wanted);
        e->wanted = STEAL(w);
        r = env_store_save_setup(m->store, e->wanted, e->setup_id);
        if (r < 0)
                return r;
        m->queue[m->n_queue++] = e;
        e->queued = true;
        e->phase = ENV_PHASE_PENDING;
        e->done = e->total = 0;
        e->error = mfree(e->error);
        e->step = mfree(e->step);
        if (m->started)
                env_setup_next(m);
        return 0;
}

/* ---- the plan ------------------------------------------------------------------------------ */

static json_object *strv_array(char *const *l) {
        json_object *a = json_object_new_array();

        STRV_FOREACH(s, (char **) l)
                json_object_array_add(a, json_object_new_string(*s));
        return a;
}

/* The index an online python setup uses (request URL > request preset > IndexURL= > Preset= >
 * upstream); NULL when the setup is offline. */
static int setup_index(EnvManager *m, const EnvMeta *w, const char **ret) {
        const char *reason;
        int r;

        *ret = NULL;
        if (w->offline || from_debian(w) || w->kind != ENV_KIND_PYTHON)
                return 0;
        r = env_source_resolve(w->kind, w->index_url ?: (w->preset ? NULL : m->config->env_index_url), w->preset,
                               m->config->env_preset, ret, &reason);
        if (r < 0)
                return log_error_errno(r, "Cannot resolve the index of environment '%s': %s", w->name, reason);
        return 0;
}

static int plan_json(EnvManager *m, const EnvMeta *w, const char *index, char **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *wheels = json_object_new_array(), *links = json_object_new_array();
        if (!o || !wheels || !links) {
                json_object_put(wheels);
                json_object_put(links);
                return -ENOMEM;
        }
        json_object_object_add(o, "kind", json_object_new_string(env_kind_to_string(w->kind)));
        json_object_object_add(o, "prefix", json_object_new_string(SANDBOX_ENV_PREFIX));
        json_object_object_add(o, "python", json_object_new_string(SANDBOX_PYTHON));
        json_object_object_add(o, "dpkgRoot", json_object_new_string("/var/lib/dpkg"));
        json_object_object_add(o, "debianPackages", strv_array(w->debian_packages));
        json_object_object_add(o, "packages", strv_array(w->packages));
        json_object_object_add(o, "offline", json_object_new_boolean(w->offline || from_debian(w)));
        if (w->kind != ENV_KIND_PYTHON) {
                json_object_put(wheels);
                json_object_put(links);
                goto done;
        }
        for (size_t i = 0; i < w->n_wheels; i++) {
                _cleanup_free_ char *p = NULL;
                if (asprintf(&p, SANDBOX_WHEELS "/%s/%s", w->wheels[i].sha256, w->wheels[i].file) < 0)
                        return -ENOMEM;
                json_object_array_add(wheels, json_object_new_string(p));
        }
        json_object_object_add(o, "wheels", wheels);
        if (m->config->env_wheelhouse && !from_debian(w))
                json_object_array_add(links, json_object_new_string(SANDBOX_WHEELHOUSE));
        json_object_object_add(o, "findLinks", links);
        json_object_object_add(o, "indexUrl", index ? json_object_new_string(index) : NULL);
        if (index && m->config->env_index_ca)
                json_object_object_add(o, "cert", json_object_new_string(SANDBOX_INDEX_CA));
done:
        *ret = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        return *ret ? 0 : -ENOMEM;
}

/* ---- running one setup --------------------------------------------------------------------- */

static void setup_finished(Env *e) {
        EnvManager *m = e->manager;
        _cleanup_free_ char *scratch = NULL;

        m->provision = env_provision_free(m->provision);
        egress_epoch_release(m->epoch);
        m->epoch = NULL;
        m->running = NULL;
        if (asprintf(&scratch, "work/%s", e->setup_id) >= 0) {
                _cleanup_close_ int root_fd = open(env_store_root(m->store), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (root_fd >= 0)
                        (void) rm_rf_at(root_fd, scratch);
        }
        (void) env_store_clear_setup(m->store, e->name);
        if (m->busy_unref)
                m->busy_unref(m->userdata);
        env_free_if_unused(e);
}

static void on_progress(unsigned done, unsigned total, const char *step, void *userdata) {
        Env *e = userdata;

        e->done = done;
        e->total = total;
        free(e->step);
        e->step = step ? strndup(step, 200) : NULL;
}

static int wheel_sha_for(const EnvMeta *w, const char *source, const char **ret) {
        if (!source || strncmp(source, "wheel:", strlen("wheel:")) != 0)
                return -ENOENT;
        for (size_t i = 0; i < w->n_wheels; i++)
                if (streq(w->wheels[i].file, source + strlen("wheel:"))) {
                        *ret = w->wheels[i].sha256;
                        return 0;
                }
        return -ENOENT;
}

/* The revision record: what was asked, what was resolved (from the provisioner's result), the
 * sources and the provisioner. */
static json_object *revision_record(Env *e, unsigned revision, json_object *result) {
        EnvManager *m = e->manager;
        const EnvMeta *w = e->wanted;
        json_object *o = json_object_new_object(), *sources = json_object_new_object(), *pkgs = NULL, *v;
        json_object *wheels = json_object_new_array();

        if (!o || !sources || !wheels) {
                json_object_put(o);
                json_object_put(sources);
                json_object_put(wheels);
                return NULL;
        }
        json_object_object_add(o, "revision", json_object_new_int64(revision));
        json_object_object_add(o, "createdAt", json_new_u64(now_usec(CLOCK_REALTIME) / 1000));
        json_object_object_add(o, "setupId", json_object_new_string(e->setup_id));
        json_object_object_add(o, "kind", json_object_new_string(env_kind_to_string(w->kind)));
        json_object_object_add(o, "requested", strv_array(w->packages));
        if (from_debian(w))
                json_object_object_add(o, "debianPackages", strv_array(w->debian_packages));
        for (size_t i = 0; i < w->n_wheels; i++) {
                json_object *x = json_object_new_object();
                if (!x)
                        break;
                json_object_object_add(x, "sha256", json_object_new_string(w->wheels[i].sha256));
                json_object_object_add(x, "file", json_object_new_string(w->wheels[i].file));
                json_object_array_add(wheels, x);
        }
        json_object_object_add(o, "wheels", wheels);
        if (json_object_object_get_ex(result, "packages", &pkgs) && json_object_is_type(pkgs, json_type_array)) {
                for (size_t i = 0; i < json_object_array_length(pkgs); i++) {
                        json_object *p = json_object_array_get_idx(pkgs, i), *src;
                        const char *sha;

                        if (json_object_is_type(p, json_type_object) && json_object_object_get_ex(p, "source", &src) &&
                            !json_object_object_get_ex(p, "sha256", NULL) &&
                            wheel_sha_for(w, json_object_get_string(src), &sha) >= 0)
                                json_object_object_add(p, "sha256", json_object_new_string(sha));
                }
                json_object_object_add(o, "packages", json_object_get(pkgs));
        } else
                json_object_object_add(o, "packages", json_object_new_array());
        json_object_object_add(sources, "offline", json_object_new_boolean(w->offline || from_debian(w)));
        if (from_debian(w))
                json_object_object_add(sources, "debian", json_object_new_boolean(true));
        if (w->index_url)
                json_object_object_add(sources, "indexUrl", json_object_new_string(w->index_url));
        if (w->preset)
                json_object_object_add(sources, "preset", json_object_new_string(w->preset));
        if (m->config->env_wheelhouse && !from_debian(w))
                json_object_object_add(sources, "wheelhouse", json_object_new_string(m->config->env_wheelhouse));
        json_object_object_add(o, "sources", sources);
        if (json_object_object_get_ex(result, "provisioner", &v) && json_object_is_type(v, json_type_string))
                json_object_object_add(o, "provisioner", json_object_get(v));
        if (json_object_object_get_ex(result, "sizeBytes", &v) && json_object_is_type(v, json_type_int))
                json_object_object_add(o, "sizeBytes", json_object_get(v));
        json_object_object_add(o, "durationMs",
                               json_new_u64((now_usec(CLOCK_MONOTONIC) - m->setup_start_usec) / 1000));
        return o;
}

static void setup_failed(Env *e, const char *message) {
        EnvManager *m = e->manager;

        (void) env_store_build_abort(m->store, e->name, e->setup_id);
        e->phase = ENV_PHASE_FAILED;   /* its live revision, if any, stays live and usable */
        (void) env_set_error(e, "%s", message ?: "the setup failed");
        env_meta_free(e->failed);
        e->failed = STEAL(e->wanted);
        log_struct(LOG_ERR,
                   "MESSAGE_ID=" SR_MESSAGE_ENV_SETUP_FAILED,
                   "SANDBOX_ENVIRONMENT=%s", e->name,
                   "SANDBOX_SETUP_ID=%s", e->setup_id,
                   "SANDBOX_REASON=%s", e->error ?: "?",
                   "MESSAGE=Setup %s of environment '%s' failed: %s", e->setup_id, e->name, e->error ?: "?");
}

static int setup_publish(Env *e, json_object *result) {
        EnvManager *m = e->manager;
        _cleanup_(json_object_putp) json_object *record = NULL;
        unsigned old = e->live_revision, revision = e->live_revision + 1;
        char *prefix = NULL;
        int r;

        record = revision_record(e, revision, result);
        if (!record)
                return -ENOMEM;
        /* meta.json first (the store publishes into an environment it knows): a crash before the
         * swap leaves the old revision live, and setup.json makes the next start build again. */
        e->wanted->revision = old;
        r = env_store_save(m->store, e->wanted);
        if (r < 0)
                return r;
        r = env_store_publish(m->store, e->name, e->setup_id, revision, record);
        if (r < 0)
                return r;
        e->wanted->revision = revision;
        r = env_store_live(m->store, e->name, &e->live_revision, &prefix);
        if (r < 0)
                return r;
        free(e->live_prefix);
        e->live_prefix = prefix;
        env_meta_free(e->meta);
        e->meta = STEAL(e->wanted);
        env_meta_free(e->failed);
        e->failed = NULL;
        e->phase = ENV_PHASE_READY;
        e->error = mfree(e->error);
        e->done = e->total;
        if (old > 0)
                (void) env_retire_revision(e, old);
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_ENV_SETUP_FINISHED,
                   "SANDBOX_ENVIRONMENT=%s", e->name,
                   "SANDBOX_SETUP_ID=%s", e->setup_id,
                   "SANDBOX_ENVIRONMENT_REVISION=%u", revision,
                   "MESSAGE=Setup %s of environment '%s' finished: revision %u is live.", e->setup_id, e->name,
                   revision);
        log_struct(LOG_INFO,
                   "MESSAGE_ID=" SR_MESSAGE_ENV_CHANGED,
                   "SANDBOX_ENVIRONMENT=%s", e->name,
                   "SANDBOX_ENVIRONMENT_REVISION=%u", revision,
                   "MESSAGE=Environment '%s' changed: revision %u (was %u).", e->name, revision, old);
        return 0;
}

static void on_done(int error, const char *message, json_object *result, void *userdata) {
        Env *e = userdata;
        EnvManager *m = e->manager;
        int r;

        if (error >= 0 && !e->removed) {
                r = setup_publish(e, result);
                if (r < 0) {
                        _cleanup_free_ char *why = NULL;
                        if (asprintf(&why, "the new revision of environment '%s' could not be made live under "
                                     "'%s/environments': %s", e->name, m->state_dir, strerror(-r)) < 0)
                                why = NULL;   /* setup_failed() then says "the setup failed" */
                        setup_failed(e, why);
                }
        } else
                setup_failed(e, message);
        setup_finished(e);
        if (!m->stopping)
                env_setup_next(m);
}

/* The binds of the provisioning sandbox besides the new prefix: read-only sources. */
static size_t setup_binds(EnvManager *m, const EnvMeta *w, const char *index, char **wheels_dir,
                          SandboxBind binds[static 5]) {
        size_t n = 0;

        binds[n++] = (SandboxBind) { .source = "/var/lib/dpkg", .dest = "/var/lib/dpkg" };
        if (w->n_wheels > 0 && asprintf(wheels_dir, "%s/wheels", env_store_root(m->store)) >= 0)
                binds[n++] = (SandboxBind) { .source = *wheels_dir, .dest = SANDBOX_WHEELS };
        if (m->config->env_wheelhouse && !from_debian(w))
                binds[n++] = (SandboxBind) { .source = m->config->env_wheelhouse, .dest = SANDBOX_WHEELHOUSE };
        if (w->kind == ENV_KIND_R && access("/etc/R", F_OK) >= 0)
                binds[n++] = (SandboxBind) { .source = "/etc/R", .dest = "/etc/R" };
        if (index && m->config->env_index_ca)
                binds[n++] = (SandboxBind) { .source = m->config->env_index_ca, .dest = SANDBOX_INDEX_CA };
        return n;
}

/* An online setup's network: a gateway of its own whose allowlist is the index's host (pinned
 * to its port; for PyPI itself also the host its files are on) and whose address exemptions are
 * [Environments] Mirrors=, whatever the sandboxes' network policy is. */
static int setup_gateway(Env *e, const char *index) {
        EnvManager *m = e->manager;
        _cleanup_strv_free_ char **allow = NULL;
        _cleanup_free_ char *entry = NULL, *error = NULL;
        const char *reason;
        int r;

        if (!m->egress)
                return env_set_error(e, "online setups need the egress gateway, which is not set up") < 0 ?
                       -ENOMEM : -EOPNOTSUPP;
        r = env_index_url_allow_entry(index, &entry, &reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return env_set_error(e, "the index URL %s: %s", index, reason) < 0 ? -ENOMEM : r;
        if (strv_consume(&allow, STEAL(entry)) < 0)
                return -ENOMEM;
        if (streq(index, env_preset_url("upstream", ENV_KIND_PYTHON)) &&
            strv_extend(&allow, "files.pythonhosted.org:443") < 0)
                return -ENOMEM;
        r = egress_epoch_acquire_for(m->egress, allow, m->config->env_mirrors, &m->epoch, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return env_set_error(e, "no network for the setup: %s", error ?: strerror(-r)) < 0 ? -ENOMEM : r;
        return 0;
}

static int setup_start(Env *e) {
        EnvManager *m = e->manager;
        _cleanup_free_ char *plan = NULL, *build = NULL, *scratch = NULL, *wheels_dir = NULL;
        const char *index = NULL;
        SandboxBind binds[5];
        size_t n_binds;
        int r;

        if (!m->script)
                return env_set_error(e, "%s", m->script_error) < 0 ? -ENOMEM : -ENOENT;
        if (!m->keeper_path)
                return env_set_error(e, "no usable sandbox here (see /health)") < 0 ? -ENOMEM : -ENOENT;
        if (e->wanted->kind == ENV_KIND_CONDA) {
                const char *reason = NULL;

                /* The binary's hash before every use: a mismatch refuses the setup. */
                r = env_micromamba_verify(m->config->env_micromamba, m->config->env_micromamba_sha256, &reason);
                if (r < 0)
                        return env_set_error(e, "micromamba (%s) is refused: %s", m->config->env_micromamba,
                                             reason ?: strerror(-r)) < 0 ? -ENOMEM : r;
                return env_set_error(e, "conda environments cannot be provisioned by this version (micromamba "
                                        "is checked, not run yet)") < 0 ? -ENOMEM : -EOPNOTSUPP;
        }
        r = setup_index(m, e->wanted, &index);
        if (r < 0)
                return r;
        if (index) {
                r = setup_gateway(e, index);
                if (r < 0)
                        return r;
        }
        r = plan_json(m, e->wanted, index, &plan);
        if (r < 0)
                return r;
        r = env_store_build_begin(m->store, e->name, e->setup_id, &build);
        if (r < 0)
                return r;
        if (asprintf(&scratch, "%s/work", env_store_root(m->store)) < 0)
                return -ENOMEM;
        (void) mkdir(scratch, 0700);
        free(scratch);
        if (asprintf(&scratch, "%s/work/%s", env_store_root(m->store), e->setup_id) < 0)
                return -ENOMEM;
        if (mkdir(scratch, 0700) < 0 && errno != EEXIST)
                return -errno;
        n_binds = setup_binds(m, e->wanted, index, &wheels_dir, binds);
        r = env_provision_start(&(EnvProvisionSpec) {
                                        .event = m->event,
                                        .bwrap = m->config->bwrap,
                                        .keeper_path = m->keeper_path,
                                        .probe = m->probe,
                                        .script = m->script,
                                        .script_size = m->script_size,
                                        .plan = plan,
                                        .build_path = build,
                                        .scratch_path = scratch,
                                        .binds = binds,
                                        .n_binds = n_binds,
                                        .tmp_size = m->config->tmp_size,
                                        .timeout_usec = m->config->env_setup_timeout_usec,
                                        .egress_socket = m->epoch ? egress_epoch_socket(m->epoch) : NULL,
                                        .bridge = m->epoch ? egress_bridge_path(m->egress) : NULL,
                                },
                                on_progress, on_done, e, &m->provision);
        if (r < 0)
                (void) env_store_build_abort(m->store, e->name, e->setup_id);
        return r;
}

void env_setup_next(EnvManager *m) {
        while (!m->running && !m->stopping && m->n_queue > 0) {
                Env *e = m->queue[0];
                int r;

                memmove(m->queue, m->queue + 1, (m->n_queue - 1) * sizeof(Env *));
                m->n_queue--;
                e->queued = false;
                if (e->removed || !e->wanted) {
                        env_free_if_unused(e);
                        continue;
                }
                m->running = e;
                m->setup_start_usec = now_usec(CLOCK_MONOTONIC);
                if (m->busy_ref)
                        m->busy_ref(m->userdata);
                e->phase = ENV_PHASE_BUILDING;
                log_struct(LOG_INFO,
                           "MESSAGE_ID=" SR_MESSAGE_ENV_SETUP_STARTED,
                           "SANDBOX_ENVIRONMENT=%s", e->name,
                           "SANDBOX_SETUP_ID=%s", e->setup_id,
                           "MESSAGE=Setup %s of environment '%s' started.", e->setup_id, e->name);
                r = setup_start(e);
                if (r < 0) {
                        _cleanup_free_ char *why = NULL;
                        if (e->error)
                                why = strdup(e->error);
                        else if (asprintf(&why, "the provisioning sandbox of environment '%s' could not be "
                                          "started: %s", e->name, strerror(-r)) < 0)
                                why = NULL;   /* setup_failed() then says "the setup failed" */
                        setup_failed(e, why);
                        setup_finished(e);
                }
        }
}

/* ---- start-up ------------------------------------------------------------------------------ */

/* A setup that a restart interrupted (its setup.json is still there): queued again. */
static int setup_resume(Env *e) {
        _cleanup_(env_meta_freep) EnvMeta *w = NULL;
        int r;

        r = env_store_load_setup(e->manager->store, e->name, &w);
        if (r == -ENOENT)
                return 0;
        if (r == -EBADMSG) {
                log_warning("Environment '%s': the interrupted setup's setup.json cannot be read; dropped.", e->name);
                return env_store_clear_setup(e->manager->store, e->name);
        }
        if (r < 0)
                return r;
        log_info("Environment '%s': a setup was interrupted by a restart; it is queued again.", e->name);
        return env_setup_queue(e, STEAL(w));
}

int env_setup_recover(EnvManager *m) {
        _cleanup_strv_free_ char **names = NULL;
        int r;

        r = env_store_list(m->store, &names);
        if (r < 0)
                return r;
        /* Scratch directories of setups that a crash interrupted. */
        {
                _cleanup_close_ int root_fd = open(env_store_root(m->store), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (root_fd >= 0)
                        (void) rm_rf_at(root_fd, "work");
        }
        STRV_FOREACH(name, names) {
                EnvMeta *meta = NULL;
                unsigned revision = 0;
                Env *e;

                r = env_store_recover(m->store, *name, &revision);
                if (r < 0 && r != -ENOENT)
                        log_warning_errno(r, "Cannot recover environment '%s': %m", *name);
                r = env_store_load(m->store, *name, &meta);
                if (r < 0 && r != -ENOENT) {
                        log_warning_errno(r, "Environment '%s' cannot be loaded, ignoring it: %m", *name);
                        continue;
                }
                r = env_add(m, *name, env_base_find(*name) != NULL, &e);
                if (r < 0) {
                        env_meta_free(meta);
                        return r;
                }
                e->meta = meta;
                if (revision > 0 && env_store_live(m->store, *name, &e->live_revision, &e->live_prefix) >= 0)
                        e->phase = ENV_PHASE_READY;
                r = setup_resume(e);
                if (r < 0)
                        log_warning_errno(r, "Cannot resume the setup of environment '%s': %m", *name);
        }
        env_trash_empty_async(m);
        return 0;
}

/* ---- old prefixes and removed environments ---------------------------------------------- */

int env_retire_revision(Env *e, unsigned revision) {
        EnvManager *m = e->manager;
        int r;

        for (size_t i = 0; i < e->n_holds; i++)
                if (e->holds[i].revision == revision)
                        return 0;   /* a run still has it: when it ends */
        if (!e->removed) {
                r = env_store_retire(m->store, e->name, revision);
                if (r < 0 && r != -ENOENT)
                        return log_warning_errno(r, "Cannot retire revision %u of environment '%s': %m", revision,
                                                 e->name);
        }
        env_trash_empty_async(m);
        return 0;
}

static int trash_empty_child(int out_fd, void *userdata) {
        EnvManager *m = userdata;

        return env_store_trash_empty(m->store);
}

static void trash_emptied(ChildTask *t, int error, const char *out, void *userdata) {
        EnvManager *m = userdata;

        m->trash_task = child_task_free(m->trash_task);
        if (error < 0)
                log_warning_errno(error, "Cannot empty the environments' trash: %m");
        if (m->trash_again) {
                m->trash_again = false;
                env_trash_empty_async(m);
        }
        if (m->busy_unref)
                m->busy_unref(m->userdata);
}

/* Old prefixes are removed in a child: a prefix is hundreds of megabytes. */
void env_trash_empty_async(EnvManager *m) {
        if (m->trash_task) {
                m->trash_again = true;
                return;
        }
        if (child_task_start(m->event, trash_empty_child, trash_emptied, m, &m->trash_task) < 0) {
                log_warning("Cannot start the removal of old environment prefixes; they stay in the trash.");
                return;
        }
        if (m->busy_ref)
                m->busy_ref(m->userdata);
}
