/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's environments (notes §8) on ours (docs/environments.md): their
 * Environment (its name: our environment's displayName) and EnvironmentRevision shapes (packages
 * and localWheels in their runner's forms) from our environments and revision records, a
 * revision's snapshot (their runner's revision document, made from our record, whose SHA-256 and
 * size the revision states),
 * create/install/uninstall as a PUT of our declarative definition answered once its setup ended
 * (theirs are synchronous), delete, the setup's state, /health's scientificEnvs, and which
 * environment a run of theirs gets. May call core/, environment/, execution/ and the http/ transport.
 */

#include <errno.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "api/sd-env.h"
#include "api/sd-internal.h"
#include "build-config.h"
#include "core/manager.h"
#include "environment/env-manager.h"
#include "execution/execution.h"
#include "http/http-server.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/time-util.h"



static int64_t get_int(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

static bool unavailable(Manager *m, HttpRequest *req) {
        if (m->environments)
                return false;
        sdp_reply_error(req, 400, "Scientific environments are unavailable");
        return true;
}

static const char *language_of(const char *kind) {
        return kind && streq(kind, "r") ? "r" : "python";
}

/* Our environment's entry in the list (NULL: none of that name). */
json_object *sdp_env_entry(Manager *m, const char *name) {
        _cleanup_(json_object_putp) json_object *list = env_manager_list_json(m->environments);
        json_object *a, *e;

        if (!list || !json_object_object_get_ex(list, "environments", &a))
                return NULL;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                e = json_object_array_get_idx(a, i);
                if (streq_ptr(json_get_string(e, "name"), name))
                        return json_object_get(e);
        }
        return NULL;
}

/* The revision records of @name, oldest first (a new array; empty when none). */
json_object *sdp_env_records(Manager *m, const char *name) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *why = NULL;
        EnvRefusal refusal;
        json_object *a;

        if (env_manager_revisions_json(m->environments, name, &o, &refusal, &why) < 0 ||
            !json_object_object_get_ex(o, "revisions", &a))
                return json_object_new_array();
        return json_object_get(a);
}

/* ---- shapes ---------------------------------------------------------------------------------- */

static void sha256_hex(const char *s, size_t n, char ret[static 65]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t d[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;

        sha256_init(&ctx);
        sha256_update(&ctx, n, (const uint8_t *) s);
        sha256_digest(&ctx, sizeof(d), d);
        for (size_t i = 0; i < sizeof(d); i++) {
                ret[2 * i] = hex[d[i] >> 4];
                ret[2 * i + 1] = hex[d[i] & 15];
        }
        ret[64] = '\0';
}

/* "Python 3.11.2" or "R 4.2.2" in our provisioner's description: the version. */
static json_object *language_version(const char *provisioner, const char *language) {
        const char *p = provisioner ? strstr(provisioner, streq(language, "r") ? "R " : "Python ") : NULL;
        size_t n;

        if (!p)
                return json_object_new_string("");
        p = strchr(p, ' ') + 1;
        n = strspn(p, "0123456789.");
        return json_object_new_string_len(p, (int) n);
}

/* A wheel's file name "<distribution>-<version>-...": their distribution ('_' as '-') and version,
 * added to @o (nothing when the name has fewer than five fields, as theirs). */
static void wheel_distribution(json_object *o, const char *file) {
        const char *dash = strchr(file, '-'), *end = dash ? strchr(dash + 1, '-') : NULL;
        size_t fields = 1;
        char *dist;

        for (const char *p = file; *p; p++)
                fields += *p == '-';
        if (!dash || !end || dash == file || end == dash + 1 || fields < 5)
                return;
        dist = strndup(file, (size_t) (dash - file));
        if (!dist)
                return;
        for (char *p = dist; *p; p++)
                if (*p == '_')
                        *p = '-';
        json_object_object_add(o, "distribution", json_object_new_string(dist));
        json_object_object_add(o, "version", json_object_new_string_len(dash + 1, (int) (end - dash - 1)));
        free(dist);
}

/* Their EnvironmentLocalWheel of a wheel of our record: {content:{hash,size}, distribution?,
 * filename, manager:"pip", sourcePath, version?} (we keep its file name only: sourcePath too). */
static json_object *local_wheel(Manager *m, json_object *w) {
        json_object *o = json_object_new_object(), *content = json_object_new_object();
        const char *sha = json_get_string(w, "sha256") ?: "", *file = json_get_string(w, "file") ?: "";
        int64_t size = env_manager_wheel_size(m->environments, sha, file);

        if (!o || !content) {
                json_object_put(o);
                json_object_put(content);
                return NULL;
        }
        json_object_object_add(content, "hash", json_object_new_string(sha));
        json_object_object_add(content, "size", json_object_new_int64(MAX(size, (int64_t) 0)));
        json_object_object_add(o, "content", content);
        wheel_distribution(o, file);
        json_object_object_add(o, "filename", json_object_new_string(file));
        json_object_object_add(o, "manager", json_object_new_string("pip"));
        json_object_object_add(o, "sourcePath", json_object_new_string(file));
        return o;
}

static void add_string(json_object *a, const char *fmt, const char *x, const char *y) {
        _cleanup_free_ char *s = NULL;

        if (asprintf(&s, fmt, x, y) >= 0)
                json_object_array_add(a, json_object_new_string(s));
}

/* Their packages[], in the forms their runner records: "<name>=<version>" per installed
 * distribution, "<manager>:<specifier>" per requirement of the definition, and per client wheel
 * "pip:wheel:" and {distribution, path, sha256, version}. */
static json_object *packages_json(json_object *rec, json_object *wheels) {
        const char *manager = streq_ptr(json_get_string(rec, "kind"), "conda") ? "conda" : "pip";
        json_object *a = json_object_new_array(), *v;

        if (!a)
                return NULL;
        if (json_object_object_get_ex(rec, "packages", &v))
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        json_object *p = json_object_array_get_idx(v, i);
                        add_string(a, "%s=%s", json_get_string(p, "name") ?: "", json_get_string(p, "version") ?: "");
                }
        if (json_object_object_get_ex(rec, "requested", &v))
                for (size_t i = 0; i < json_object_array_length(v); i++)
                        add_string(a, "%s:%s", manager, json_object_get_string(json_object_array_get_idx(v, i)));
        for (size_t i = 0; wheels && i < json_object_array_length(wheels); i++) {
                json_object *w = json_object_array_get_idx(wheels, i), *r = json_object_new_object(), *c, *x;

                if (!r)
                        continue;
                json_object_object_add(r, "distribution", json_object_object_get_ex(w, "distribution", &x) ?
                                       json_object_get(x) : NULL);
                json_object_object_add(r, "path", json_object_get(json_object_object_get(w, "sourcePath")));
                c = json_object_object_get(w, "content");
                json_object_object_add(r, "sha256", json_object_get(json_object_object_get(c, "hash")));
                json_object_object_add(r, "version", json_object_object_get_ex(w, "version", &x) ?
                                       json_object_get(x) : NULL);
                add_string(a, "pip:wheel:%s%s", json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN |
                                                                                  JSON_C_TO_STRING_NOSLASHESCAPE), "");
                json_object_put(r);
        }
        return a;
}

/*
 * A revision's snapshot as their runner writes it: {channels, createdAt, environmentId,
 * format:"science-agent-environment-revision-v1", language, localWheels?, packages, platform,
 * provisioner, revisionId}, indented by two, a newline at the end. Made from the revision record,
 * which never changes: so never do these bytes.
 */
static char *snapshot_text(json_object *rev) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        static const char *const keys[] = { "channels", "createdAt", "environmentId", "format", "language",
                                            "localWheels", "packages", "platform", "provisioner", "revisionId" };
        char *s = NULL;
        json_object *v;

        if (!o)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                if (streq(keys[i], "format"))
                        json_object_object_add(o, "format", json_object_new_string("science-agent-environment-revision-v1"));
                else if (streq(keys[i], "revisionId") && json_object_object_get_ex(rev, "id", &v))
                        json_object_object_add(o, "revisionId", json_object_get(v));
                else if (json_object_object_get_ex(rev, keys[i], &v))
                        json_object_object_add(o, keys[i], json_object_get(v));
        }
        if (asprintf(&s, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                       JSON_C_TO_STRING_NOSLASHESCAPE)) < 0)
                return NULL;
        return s;
}

/* Their EnvironmentRevision of our record @rec of @name, without its snapshot (a new object). */
static json_object *revision_base(Manager *m, const char *name, const char *kind, json_object *rec) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *v, *wheels = NULL;
        const char *language = language_of(json_get_string(rec, "kind") ?: kind);
        char rid[SDP_ENV_REVISION_ID_MAX], id[SDP_ENV_ID_MAX], hash[65], when[32], platform[80];
        struct sha256_ctx ctx;
        struct utsname u;
        uint8_t d[SHA256_DIGEST_SIZE];

        if (!o)
                return NULL;
        sdp_env_revision_id(name, (unsigned) get_int(rec, "revision"), rid);
        sdp_env_id(name, id);
        json_object_object_add(o, "id", json_object_new_string(rid));
        json_object_object_add(o, "environmentId", json_object_new_string(id));
        json_object_object_add(o, "language", json_object_new_string(language));
        json_object_object_add(o, "languageVersion", language_version(json_get_string(rec, "provisioner"), language));
        if (json_object_object_get_ex(rec, "wheels", &v) && json_object_array_length(v) > 0 &&
            (wheels = json_object_new_array()))
                for (size_t i = 0; i < json_object_array_length(v); i++)
                        json_object_array_add(wheels, local_wheel(m, json_object_array_get_idx(v, i)));
        json_object_object_add(o, "packages", packages_json(rec, wheels));
        json_object_object_add(o, "channels", json_object_object_get_ex(rec, "channels", &v) ?
                               json_object_get(v) : json_object_new_array());
        /* What was asked for, in order: the same request, the same hash. */
        sha256_init(&ctx);
        if (json_object_object_get_ex(rec, "requested", &v))
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        const char *s = json_object_get_string(json_object_array_get_idx(v, i));
                        sha256_update(&ctx, strlen(s) + 1, (const uint8_t *) s);   /* with its NUL */
                }
        sha256_digest(&ctx, sizeof(d), d);
        for (size_t i = 0; i < sizeof(d); i++)
                (void) snprintf(hash + 2 * i, 3, "%02x", d[i]);
        json_object_object_add(o, "packageSpecHash", json_object_new_string(hash));
        if (uname(&u) < 0)
                strcpy(u.machine, "unknown");
        (void) snprintf(platform, sizeof(platform), "linux-%s", u.machine);
        json_object_object_add(o, "platform", json_object_new_string(platform));
        json_object_object_add(o, "provisioner", json_object_new_string(json_get_string(rec, "provisioner") ?: "sandbox-runner"));
        json_object_object_add(o, "runnerVersion", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "createdAt", json_object_new_string(sdp_iso_time((uint64_t) get_int(rec, "createdAt"), when)));
        if (wheels)
                json_object_object_add(o, "localWheels", wheels);
        return STEAL(o);
}

json_object *sdp_env_revision_json(Manager *m, const char *name, const char *kind, json_object *rec) {
        _cleanup_(json_object_putp) json_object *o = revision_base(m, name, kind, rec);
        _cleanup_free_ char *bytes = o ? snapshot_text(o) : NULL;
        json_object *snap = json_object_new_object();
        char hash[65];

        if (!bytes || !snap) {
                json_object_put(snap);
                return NULL;
        }
        sha256_hex(bytes, strlen(bytes), hash);
        json_object_object_add(snap, "hash", json_object_new_string(hash));
        json_object_object_add(snap, "size", json_new_u64(strlen(bytes)));
        json_object_object_add(o, "snapshot", snap);
        return STEAL(o);
}

/* Their Environment of our list entry @e. */
json_object *sdp_env_environment_json(Manager *m, json_object *e) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_(json_object_putp) json_object *recs = NULL;
        const char *name = json_get_string(e, "name") ?: "";
        char id[SDP_ENV_ID_MAX], rid[SDP_ENV_REVISION_ID_MAX], when[32];
        json_object *base;
        uint64_t created = now_usec(CLOCK_REALTIME) / 1000, updated = created;
        int64_t live = get_int(e, "revision");
        size_t n;

        if (!o)
                return NULL;
        recs = sdp_env_records(m, name);
        n = recs ? json_object_array_length(recs) : 0;
        if (n > 0) {
                created = (uint64_t) get_int(json_object_array_get_idx(recs, 0), "createdAt");
                updated = (uint64_t) get_int(json_object_array_get_idx(recs, n - 1), "createdAt");
        }
        sdp_env_id(name, id);
        json_object_object_add(o, "id", json_object_new_string(id));
        /* Their name: the display name it was created with, else ours. */
        json_object_object_add(o, "name", json_object_new_string(json_get_string(e, "displayName") ?: name));
        json_object_object_add(o, "kind", json_object_new_string(
                                       json_object_object_get_ex(e, "base", &base) && json_object_get_boolean(base) ?
                                       "starter" : "task"));
        json_object_object_add(o, "language", json_object_new_string(language_of(json_get_string(e, "kind"))));
        if (live > 0) {
                sdp_env_revision_id(name, (unsigned) live, rid);
                json_object_object_add(o, "currentRevisionId", json_object_new_string(rid));
        } else
                json_object_object_add(o, "currentRevisionId", NULL);
        json_object_object_add(o, "createdAt", json_object_new_string(sdp_iso_time(created, when)));
        json_object_object_add(o, "updatedAt", json_object_new_string(sdp_iso_time(updated, when)));
        return STEAL(o);
}

/* ---- GET routes ------------------------------------------------------------------------------ */

void sdp_environments_list(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *list = NULL, *out = json_object_new_array();
        json_object *a;

        if (unavailable(m, req))
                return;
        list = env_manager_list_json(m->environments);
        if (!list || !out || !json_object_object_get_ex(list, "environments", &a))
                return sdp_reply_error(req, 500, "Out of memory");
        for (size_t i = 0; i < json_object_array_length(a); i++)
                json_object_array_add(out, sdp_env_environment_json(m, json_object_array_get_idx(a, i)));
        sdp_reply_json(req, 200, out);
}

/* Every revision of every environment, or (@only) the record of one and its revision in their
 * shape (without its snapshot): *ret_rec and *ret_rev then. */
static json_object *revisions(Manager *m, const char *only, json_object **ret_rec, json_object **ret_rev) {
        _cleanup_(json_object_putp) json_object *list = env_manager_list_json(m->environments);
        json_object *out = json_object_new_array(), *a;

        if (!list || !out || !json_object_object_get_ex(list, "environments", &a)) {
                json_object_put(out);
                return NULL;
        }
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                const char *name = json_get_string(e, "name");
                _cleanup_(json_object_putp) json_object *recs = name ? sdp_env_records(m, name) : NULL;

                for (size_t j = 0; recs && j < json_object_array_length(recs); j++) {
                        json_object *rec = json_object_array_get_idx(recs, j);
                        char rid[SDP_ENV_REVISION_ID_MAX];

                        sdp_env_revision_id(name, (unsigned) get_int(rec, "revision"), rid);
                        if (only && streq(rid, only)) {
                                *ret_rec = json_object_get(rec);
                                *ret_rev = revision_base(m, name, json_get_string(e, "kind"), rec);
                                return out;
                        }
                        if (!only)
                                json_object_array_add(out, sdp_env_revision_json(m, name, json_get_string(e, "kind"), rec));
                }
        }
        return out;
}

void sdp_environment_revisions(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (unavailable(m, req))
                return;
        o = revisions(m, NULL, NULL, NULL);
        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, 200, o);
}

void sdp_environment_snapshot(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL, *rec = NULL, *rev = NULL;
        _cleanup_free_ char *rid = NULL, *bytes = NULL;
        int r;

        if (unavailable(m, req))
                return;
        rid = strndup(params[0], lens[0]);
        if (!rid || !(o = revisions(m, rid, &rec, &rev)))
                return sdp_reply_error(req, 500, "Out of memory");
        if (!rec)
                return sdp_reply_error(req, 404, "Environment revision not found");
        bytes = rev ? snapshot_text(rev) : NULL;
        if (!bytes)
                return sdp_reply_error(req, 500, "Out of memory");
        r = http_request_reply(req, 200, "application/json", bytes, strlen(bytes), false,
                               (const char *const[]) { "Cache-Control", "no-store", NULL });
        if (r < 0)
                log_warning_errno(r, "Failed to queue a reply, ignoring: %m");
}

/* ---- setup ----------------------------------------------------------------------------------- */

static json_object *setup_json(Manager *m) {
        _cleanup_(json_object_putp) json_object *base = sdp_env_entry(m, "python-base");
        _cleanup_(json_object_putp) json_object *setup = env_manager_setup_json(m->environments);
        json_object *o = json_object_new_object(), *a, *starter = json_object_new_array(), *channels = json_object_new_array();
        const char *phase = "pending", *error = NULL, *state, *message;

        if (!o || !starter || !channels) {
                json_object_put(o);
                json_object_put(starter);
                json_object_put(channels);
                return NULL;
        }
        if (setup && json_object_object_get_ex(setup, "setup", &a))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        if (streq_ptr(json_get_string(e, "name"), "python-base")) {
                                phase = json_get_string(e, "phase") ?: phase;
                                error = json_get_string(e, "error");
                        }
                }
        if (!base) {
                state = "not-started";
                message = "The starter environments are built on request (POST /environment-setup).";
        } else if (streq(phase, "ready")) {
                state = "ready";
                message = "The starter environments are ready.";
        } else if (streq(phase, "failed")) {
                state = "failed";
                message = "The starter environment's setup failed.";
        } else {
                state = "running";
                message = "The starter environments are being built.";
        }
        json_object_object_add(o, "state", json_object_new_string(state));
        json_object_object_add(o, "phase", json_object_new_string(base ? phase : "idle"));
        json_object_object_add(o, "message", json_object_new_string(message));
        json_object_object_add(o, "error", error ? json_object_new_string(error) : NULL);
        for (char **c = m->config.env_channels; c && *c; c++)
                json_object_array_add(channels, json_object_new_string(*c));
        json_object_object_add(o, "allowedChannels", channels);
        if (base && json_object_object_get_ex(base, "packages", &a))
                for (size_t i = 0; i < json_object_array_length(a); i++)
                        json_object_array_add(starter, json_object_new_string(
                                                      json_get_string(json_object_array_get_idx(a, i), "name") ?: ""));
        json_object_object_add(o, "starterPackages", starter);
        json_object_object_add(o, "provisioner", json_object_new_string("sandbox-runner"));
        json_object_object_add(o, "offline", json_object_new_boolean(m->config.env_offline));
        return o;
}

void sdp_environment_setup_get(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (unavailable(m, req))
                return;
        o = setup_json(m);
        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, 200, o);
}

void sdp_environment_setup_post(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL, *base = NULL, *ignored = NULL;
        _cleanup_free_ char *why = NULL;
        EnvRefusal refusal;
        json_object *v;

        if (unavailable(m, req))
                return;
        if (!json_object_object_get_ex(body, "confirmed", &v) || !json_object_is_type(v, json_type_boolean) ||
            !json_object_get_boolean(v))
                return sdp_reply_error(req, 400, "Environment setup must be confirmed");
        base = sdp_env_entry(m, "python-base");
        if (!base) {
                EnvHold *h = NULL;

                /* A base environment's first request queues its build (env_manager_acquire()). */
                if (env_manager_acquire(m->environments, "python-base", &h, &refusal, &why) >= 0)
                        env_hold_release(h);
        } else if (streq_ptr(json_get_string(base, "state"), "failed"))
                (void) env_manager_retry(m->environments, "python-base", &ignored, &refusal, &why);
        o = setup_json(m);
        if (!o)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_reply_json(req, 202, o);
}

json_object *sdp_environments_health(Manager *m) {
        _cleanup_(json_object_putp) json_object *base = NULL;
        json_object *o = json_object_new_object(), *langs = json_object_new_array();

        if (!o || !langs) {
                json_object_put(o);
                json_object_put(langs);
                return NULL;
        }
        if (m->environments) {
                json_object_array_add(langs, json_object_new_string("python"));
                json_object_array_add(langs, json_object_new_string("r"));
                base = sdp_env_entry(m, "python-base");
        }
        json_object_object_add(o, "available", json_object_new_boolean(!!m->environments));
        json_object_object_add(o, "enabled", json_object_new_boolean(!!m->environments));
        json_object_object_add(o, "languages", langs);
        json_object_object_add(o, "provisioner", json_object_new_string(m->environments ? "sandbox-runner" : "none"));
        json_object_object_add(o, "startersReady", json_object_new_boolean(base && get_int(base, "revision") > 0));
        if (!m->environments)
                json_object_object_add(o, "unavailableReason", json_object_new_string(
                                               m->environments_error ?: "environments are not set up"));
        return o;
}

/* ---- which environment a run gets ------------------------------------------------------------ */

static bool acquire(Manager *m, HttpRequest *req, const char *name, const char *what, EnvHold **ret) {
        _cleanup_free_ char *why = NULL;
        EnvRefusal refusal = 0;
        int r;

        r = env_manager_acquire(m->environments, name, ret, &refusal, &why);
        if (r == -ENOMEM)
                sdp_reply_error(req, 500, "Out of memory");
        else if (r < 0 && refusal == ENV_REFUSAL_NOT_READY)
                sdp_reply_error(req, 400, "Scientific environment %s is not ready (%s); retry when it is ready",
                                what, why ?: "no revision yet");
        else if (r < 0)
                sdp_reply_error(req, 400, "Unknown environment %s", what);
        return r >= 0;
}

bool sdp_env_prepare(Manager *m, HttpRequest *req, const SdpRequest *p, SdpKind kind, EnvHold **ret) {
        const char *rid = p->revision ?: p->epoch_revision;
        _cleanup_(json_object_putp) json_object *base = NULL;
        char name[SDP_ENV_ID_MAX] = "";
        unsigned n = 0;
        EnvHold *h = NULL;
        bool r_lang = kind == SDP_KIND_EXECUTE && streq(p->language, "r"), starters;

        *ret = NULL;
        if (kind != SDP_KIND_EXECUTE) {
                /* A shell run: the system shell, or a named environment's latest revision. */
                if (!p->environment_id)
                        return true;
                if (unavailable(m, req))
                        return false;
                if (!sdp_env_name(p->environment_id, name)) {
                        sdp_reply_error(req, 400, "Unknown environment %s", p->environment_id);
                        return false;
                }
                if (!acquire(m, req, name, p->environment_id, &h))
                        return false;
                *ret = h;
                return true;
        }
        if (!m->environments) {
                /* As their runner without environments: python on the host's interpreter. */
                if (r_lang)
                        sdp_reply_error(req, 400, "Scientific environments are unavailable");
                return !r_lang;
        }
        base = sdp_env_entry(m, "python-base");
        starters = base && get_int(base, "revision") > 0;
        /* Before the starters are built, their API has no revision of ours to send: an id that is
         * not one of ours is the API's own then, and python runs on the host's interpreter. */
        if (rid && !starters && !r_lang && !sdp_env_revision_parse(rid, name, &n))
                return true;
        if (!rid) {
                /* Their starter of the language: python-base only once it is built (a run never
                 * waits for it; the host's python serves meanwhile), r-base on first use. */
                if (!r_lang && !starters)
                        return true;
                if (!acquire(m, req, r_lang ? "r-base" : "python-base", r_lang ? "starter-r" : "starter-python", &h))
                        return false;
                *ret = h;
                return true;
        }
        if (sdp_env_revision_parse(rid, name, &n)) {
                json_object_put(base);
                base = sdp_env_entry(m, name);
        }
        /* Only an environment that has revisions is asked for one (nothing is queued from here). */
        if (!base || !streq_ptr(json_get_string(base, "name"), name) || get_int(base, "revision") <= 0 ||
            !acquire(m, req, name, rid, &h)) {
                if (!http_request_replied(req))
                        sdp_reply_error(req, 400, "Unknown environment revision; select a current environment");
                return false;
        }
        if (env_hold_revision(h) != n) {
                bool older = n < env_hold_revision(h);

                env_hold_release(h);
                sdp_reply_error(req, 400, older ? "Historical environment revisions are audit-only; select the latest "
                                "environment" : "Unknown environment revision; select a current environment");
                return false;
        }
        if ((env_hold_kind(h) == ENV_KIND_R) != r_lang) {
                env_hold_release(h);
                sdp_reply_error(req, 400, "Environment revision %s is not for %s", rid, p->language);
                return false;
        }
        *ret = h;
        return true;
}

static void release_hold(void *hold) {
        env_hold_release(hold);
}

void sdp_env_attach(Execution *e, EnvHold *hold) {
        if (!hold)
                return;
        execution_set_environment(e, &(ExecutionEnv) {
                                          .hold = hold,
                                          .release = release_hold,
                                          .name = env_hold_name(hold),
                                          .revision = env_hold_revision(hold),
                                          .prefix = env_hold_prefix(hold),
                                          .hide_file = env_hold_cover(hold),
                                          .r = env_hold_kind(hold) == ENV_KIND_R,
                                  });
}
