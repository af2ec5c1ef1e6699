/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's environment changes (notes §8): POST /environments, DELETE
 * /environments/{id}, POST /environments/{id}/install and /uninstall. Ours are declarative and
 * asynchronous (a PUT of the whole definition queues a setup, docs/api.md 14.3); theirs are
 * synchronous: the definition is read, changed and put, and the request waits (suspended, polled
 * every 100 ms, bounded by SetupTimeoutSec= and a minute for the queue) until the setup made the
 * new revision or failed. May call core/, environment/ and the http/ transport.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <systemd/sd-event.h>

#include "api/sd-env.h"
#include "api/sd-internal.h"
#include "core/manager.h"
#include "environment/env-manager.h"
#include "environment/env-store.h"
#include "http/http-server.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/time-util.h"

#define WAIT_POLL_USEC (100 * USEC_PER_MSEC)
#define WAIT_QUEUE_USEC (60 * USEC_PER_SEC)

typedef struct SdpEnvWait {
        Manager *m;
        HttpRequest *req;
        char name[SDP_ENV_ID_MAX];
        unsigned target;                /* the revision the setup makes */
        bool environment;               /* answer the Environment (create), else the revision */
        sd_event_source *timer;
        uint64_t deadline;              /* CLOCK_MONOTONIC */
} SdpEnvWait;

static SdpEnvWait *wait_free(SdpEnvWait *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->timer);
        free(w);
        return NULL;
}



/* The setup entry of @name: its phase, live revision and error. */
static void setup_state(Manager *m, const char *name, char phase[static 16], unsigned *ret_revision,
                        char **ret_error) {
        _cleanup_(json_object_putp) json_object *o = env_manager_setup_json(m->environments);
        json_object *a, *v;

        strcpy(phase, "pending");
        *ret_revision = 0;
        *ret_error = NULL;
        if (!o || !json_object_object_get_ex(o, "setup", &a))
                return;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);

                if (!streq_ptr(json_get_string(e, "name"), name))
                        continue;
                (void) snprintf(phase, 16, "%s", json_get_string(e, "phase") ?: "pending");
                if (json_object_object_get_ex(e, "revision", &v))
                        *ret_revision = (unsigned) json_object_get_int64(v);
                if (json_get_string(e, "error"))
                        *ret_error = strdup(json_get_string(e, "error"));
        }
}

static void wait_answer(SdpEnvWait *w) {
        _cleanup_(json_object_putp) json_object *o = NULL;

        if (w->environment) {
                _cleanup_(json_object_putp) json_object *e = sdp_env_entry(w->m, w->name);
                o = e ? sdp_env_environment_json(w->m, e) : NULL;
        } else {
                _cleanup_(json_object_putp) json_object *recs = sdp_env_records(w->m, w->name);
                _cleanup_(json_object_putp) json_object *e = sdp_env_entry(w->m, w->name);

                for (size_t i = 0; recs && i < json_object_array_length(recs); i++) {
                        json_object *rec = json_object_array_get_idx(recs, i), *v;

                        if (json_object_object_get_ex(rec, "revision", &v) &&
                            (unsigned) json_object_get_int64(v) == w->target)
                                o = sdp_env_revision_json(w->m, w->name, e ? json_get_string(e, "kind") : NULL, rec);
                }
        }
        if (!o)
                return sdp_reply_error(w->req, 500, "The environment's new revision cannot be read");
        sdp_reply_json(w->req, 201, o);
}

static int on_wait_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        SdpEnvWait *w = userdata;
        _cleanup_free_ char *error = NULL;
        char phase[16];
        unsigned revision;

        setup_state(w->m, w->name, phase, &revision, &error);
        if (revision >= w->target || streq(phase, "failed") || usec >= w->deadline) {
                http_request_set_userdata(w->req, NULL, NULL);
                if (revision >= w->target)
                        wait_answer(w);
                else if (streq(phase, "failed"))
                        sdp_reply_error(w->req, 400, "Environment setup failed: %s", error ?: "unknown error");
                else
                        sdp_reply_error(w->req, 400, "Environment setup did not finish in time; it goes on "
                                        "(see GET /environment-setup)");
                wait_free(w);
                return 0;
        }
        (void) sd_event_source_set_time(s, usec + WAIT_POLL_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static void on_wait_gone(HttpRequest *req, void *userdata) {
        /* Their client went away: the setup goes on, nobody waits for it. */
        wait_free(userdata);
}

/* PUT @def as @name's definition and answer once revision @target exists. */
static void put_and_wait(Manager *m, HttpRequest *req, const char *name, json_object *def, unsigned target,
                         bool environment) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *why = NULL;
        SdpEnvWait *w;
        EnvRefusal refusal = 0;
        int r;

        r = env_manager_put(m->environments, name, def, &o, &refusal, &why);
        if (r == -ENOMEM)
                return sdp_reply_error(req, 500, "Out of memory");
        if (r < 0)
                return sdp_reply_error(req, 400, "%s", why ?: "The environment cannot be changed");
        w = calloc(1, sizeof(*w));
        if (!w)
                return sdp_reply_error(req, 500, "Out of memory");
        *w = (SdpEnvWait) {
                .m = m, .req = req, .target = target, .environment = environment,
                .deadline = now_usec(CLOCK_MONOTONIC) + m->config.env_setup_timeout_usec + WAIT_QUEUE_USEC,
        };
        (void) snprintf(w->name, sizeof(w->name), "%s", name);
        r = sd_event_add_time_relative(m->event, &w->timer, CLOCK_MONOTONIC, WAIT_POLL_USEC, 10 * USEC_PER_MSEC,
                                       on_wait_timer, w);
        if (r < 0) {
                wait_free(w);
                return sdp_reply_error(req, 500, "The setup was queued but cannot be waited for");
        }
        (void) sd_event_source_set_description(w->timer, "sd-environment-wait");
        http_request_set_userdata(req, w, on_wait_gone);
        http_request_suspend(req);
}

/* {id} of the path: our environment, or the 404 is sent. Return: @ret's entry (new), or NULL. */
static json_object *path_environment(Manager *m, HttpRequest *req, const char *p, size_t len,
                                     char ret[static SDP_ENV_ID_MAX]) {
        json_object *e = NULL;
        char id[SDP_ENV_ID_MAX];

        if (!m->environments) {
                sdp_reply_error(req, 400, "Scientific environments are unavailable");
                return NULL;
        }
        if (len < sizeof(id)) {
                memcpy(id, p, len);
                id[len] = '\0';
                if (sdp_env_name(id, ret))
                        e = sdp_env_entry(m, ret);
        }
        if (!e)
                sdp_reply_error(req, 404, "Environment not found");
        return e;
}

/* Our definition of @name as a PUT takes it: {packages, wheels, source, channels?}. */
static json_object *definition(Manager *m, const char *name, unsigned *ret_live, const char **ret_kind) {
        _cleanup_(json_object_putp) json_object *show = NULL, *def = json_object_new_object();
        _cleanup_free_ char *why = NULL;
        EnvRefusal refusal;
        json_object *v;

        if (!def || env_manager_show_json(m->environments, name, &show, &refusal, &why) < 0)
                return NULL;
        *ret_live = json_object_object_get_ex(show, "revision", &v) ? (unsigned) json_object_get_int64(v) : 0;
        *ret_kind = streq_ptr(json_get_string(show, "kind"), "r") ? "r" : streq_ptr(json_get_string(show, "kind"), "conda") ?
                    "conda" : "python";
        if (json_object_object_get_ex(show, "displayName", &v))
                json_object_object_add(def, "displayName", json_object_get(v));
        json_object_object_add(def, "packages", json_object_object_get_ex(show, "requested", &v) ?
                               json_object_get(v) : json_object_new_array());
        json_object_object_add(def, "wheels", json_object_object_get_ex(show, "wheels", &v) ?
                               json_object_get(v) : json_object_new_array());
        if (json_object_object_get_ex(show, "source", &v))
                json_object_object_add(def, "source", json_object_get(v));
        if (json_object_object_get_ex(show, "channels", &v))
                json_object_object_add(def, "channels", json_object_get(v));
        return STEAL(def);
}

/* Remove from @def every requirement and client wheel of the distribution @dist. Return: how many. */
static unsigned drop_dist(json_object *def, const char *dist) {
        static const char *const keys[] = { "packages", "wheels" };
        unsigned n = 0;

        for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                json_object *a, *keep = json_object_new_array();

                if (!keep || !json_object_object_get_ex(def, keys[k], &a)) {
                        json_object_put(keep);
                        continue;
                }
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *x = json_object_array_get_idx(a, i);
                        const char *s = k == 0 ? json_object_get_string(x) : json_get_string(x, "file") ?: json_get_string(x, "path");
                        const char *base = s && strrchr(s, '/') ? strrchr(s, '/') + 1 : s;
                        char d[128];

                        if (base && sdp_env_spec_name(base, k == 1, d, sizeof(d)) && streq(d, dist))
                                n++;
                        else
                                json_object_array_add(keep, json_object_get(x));
                }
                json_object_object_add(def, keys[k], keep);
        }
        return n;
}

static bool string_array(json_object *body, const char *key, bool required, json_object **ret) {
        json_object *v;

        *ret = NULL;
        if (!json_object_object_get_ex(body, key, &v) || json_object_is_type(v, json_type_null))
                return !required;
        if (!json_object_is_type(v, json_type_array) || (required && json_object_array_length(v) == 0) ||
            json_object_array_length(v) > 256)
                return false;
        for (size_t i = 0; i < json_object_array_length(v); i++)
                if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string))
                        return false;
        *ret = v;
        return true;
}

void sdp_environment_create(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *def = NULL, *taken = NULL;
        const char *display = json_get_string(body, "name"), *language = json_get_string(body, "language"), *base_id;
        char name[SDP_ENV_ID_MAX], base[SDP_ENV_ID_MAX];

        if (!m->environments)
                return sdp_reply_error(req, 400, "Scientific environments are unavailable");
        if (!display || !env_display_name_valid(display))
                return sdp_reply_error(req, 400, "name must be a non-empty string of at most %d bytes, without "
                                       "control characters", ENV_DISPLAY_NAME_MAX);
        if (!language || (!streq(language, "python") && !streq(language, "r")))
                return sdp_reply_error(req, 400, "language must be python or r");
        sdp_env_slug(display, name);
        taken = sdp_env_entry(m, name);
        if (taken) {
                /* Another environment has this name: ours gets a random tail. */
                uint8_t rnd[3];
                size_t l = MIN(strlen(name), (size_t) 48);

                if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                        return sdp_reply_error(req, 500, "No random bytes");
                (void) snprintf(name + l, sizeof(name) - l, "-%02x%02x%02x", rnd[0], rnd[1], rnd[2]);
        }

        def = json_object_new_object();
        if (!def)
                return sdp_reply_error(req, 500, "Out of memory");
        base_id = json_get_string(body, "baseEnvironmentId");
        if (base_id && !sdp_env_name(base_id, base))
                return sdp_reply_error(req, 400, "Unknown base environment %s", base_id);
        if (base_id && !streq(base, "python-base") && !streq(base, "r-base")) {
                /* A named base: its definition is the start (a starter's Debian packages are not
                 * something a named environment can hold, docs/environments.md section 1). */
                const char *kind = NULL;
                unsigned live;

                json_object_put(def);
                def = definition(m, base, &live, &kind);
                if (!def)
                        return sdp_reply_error(req, 400, "Unknown base environment %s", base_id);
                if (!streq(kind, language))
                        return sdp_reply_error(req, 400, "The base environment %s is not a %s environment", base_id,
                                               language);
        }
        json_object_object_add(def, "kind", json_object_new_string(language));
        /* Their name is kept beside ours, as its display name (a base's is not copied). */
        json_object_object_add(def, "displayName", json_object_new_string(display));
        put_and_wait(m, req, name, def, 1, true);
}

void sdp_environment_delete(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *e = NULL, *o = NULL, *ans = NULL;
        _cleanup_free_ char *why = NULL;
        char name[SDP_ENV_ID_MAX], id[SDP_ENV_ID_MAX];
        EnvRefusal refusal;
        int r;

        e = path_environment(m, req, params[0], lens[0], name);
        if (!e)
                return;
        r = env_manager_remove(m->environments, name, &o, &refusal, &why);
        if (r == -ENOMEM)
                return sdp_reply_error(req, 500, "Out of memory");
        if (r < 0)
                return sdp_reply_error(req, 400, "%s", why ?: "The environment cannot be deleted");
        ans = json_object_new_object();
        if (!ans)
                return sdp_reply_error(req, 500, "Out of memory");
        sdp_env_id(name, id);
        json_object_object_add(ans, "deleted", json_object_new_string(id));
        sdp_reply_json(req, 200, ans);
}

void sdp_environment_install(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *e = NULL, *def = NULL;
        const char *manager = json_get_string(body, "manager"), *index = json_get_string(body, "indexUrl"), *kind = NULL;
        const char *key = json_get_string(body, "runnerWorkspaceKey");
        json_object *packages, *channels, *a;
        char name[SDP_ENV_ID_MAX], ws[129];
        unsigned live = 0;

        e = path_environment(m, req, params[0], lens[0], name);
        if (!e)
                return;
        if (!string_array(body, "packages", true, &packages))
                return sdp_reply_error(req, 400, "packages must be a non-empty array of at most 256 strings");
        if (!string_array(body, "channels", false, &channels))
                return sdp_reply_error(req, 400, "channels must be an array of strings");
        if (key && !sdp_runner_workspace_key_valid(key))
                return sdp_reply_error(req, 400, "Invalid runner workspace key");
        def = definition(m, name, &live, &kind);
        if (!def)
                return sdp_reply_error(req, 500, "The environment's definition cannot be read");
        if (manager && !(streq(manager, "pip") && streq(kind, "python")) && !(streq(manager, "conda") && streq(kind, "conda")) &&
            !((streq(manager, "cran") || streq(manager, "bioconductor")) && streq(kind, "r")))
                return sdp_reply_error(req, 400, "Package manager %s does not fit this %s environment", manager, kind);

        for (size_t i = 0; i < json_object_array_length(packages); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(packages, i));
                size_t l = strlen(s);
                bool wheel = l > 4 && streq(s + l - 4, ".whl");
                const char *file = strrchr(s, '/') ? strrchr(s, '/') + 1 : s;
                char dist[128];

                if (!sdp_env_spec_name(wheel ? file : s, wheel, dist, sizeof(dist)))
                        return sdp_reply_error(req, 400, "Invalid package %s", s);
                (void) drop_dist(def, dist);
                if (wheel) {
                        json_object *w;

                        /* A wheel lies in the runner workspace their key names (this runner keeps
                         * its own: a path of their API's host means nothing here). */
                        if (!key)
                                return sdp_reply_error(req, 400, "A wheel needs runnerWorkspaceKey");
                        if (s[0] == '/')
                                return sdp_reply_error(req, 400, "Wheel paths are relative to the runner workspace");
                        sdp_workspace_for_key(key, ws);
                        w = json_object_new_object();
                        if (!w)
                                return sdp_reply_error(req, 500, "Out of memory");
                        json_object_object_add(w, "workspaceId", json_object_new_string(ws));
                        json_object_object_add(w, "path", json_object_new_string(s + (strncmp(s, "./", 2) == 0 ? 2 : 0)));
                        if (json_object_object_get_ex(def, "wheels", &a))
                                json_object_array_add(a, w);
                        else
                                json_object_put(w);
                } else if (json_object_object_get_ex(def, "packages", &a))
                        json_object_array_add(a, json_object_new_string(s));
        }
        if (channels && json_object_array_length(channels) > 0) {
                if (!json_object_object_get_ex(def, "channels", &a)) {
                        a = json_object_new_array();
                        json_object_object_add(def, "channels", a);
                }
                for (size_t i = 0; a && i < json_object_array_length(channels); i++)
                        json_object_array_add(a, json_object_get(json_object_array_get_idx(channels, i)));
        }
        if (index) {
                json_object *src = json_object_new_object();

                if (src)
                        json_object_object_add(src, "indexUrl", json_object_new_string(index));
                json_object_object_add(def, "source", src);
        }
        put_and_wait(m, req, name, def, live + 1, false);
}

void sdp_environment_uninstall(Manager *m, HttpRequest *req, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *e = NULL, *def = NULL;
        const char *kind = NULL;
        json_object *packages;
        char name[SDP_ENV_ID_MAX];
        unsigned live = 0;

        e = path_environment(m, req, params[0], lens[0], name);
        if (!e)
                return;
        if (!string_array(body, "packages", true, &packages))
                return sdp_reply_error(req, 400, "packages must be a non-empty array of at most 256 strings");
        def = definition(m, name, &live, &kind);
        if (!def)
                return sdp_reply_error(req, 500, "The environment's definition cannot be read");
        for (size_t i = 0; i < json_object_array_length(packages); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(packages, i));
                char dist[128];

                if (!sdp_env_spec_name(s, false, dist, sizeof(dist)) || drop_dist(def, dist) == 0)
                        return sdp_reply_error(req, 400, "Package %s is not installed in this environment", s);
        }
        put_and_wait(m, req, name, def, live + 1, false);
}
