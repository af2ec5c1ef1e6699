/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Kernel Gateway's REST handlers: /api, the kernelspecs, and the kernels' lifecycle, with the
 * Kernel Gateway's statuses (201 + Location, 204 then 404, 403 at the cap) and ours where it has
 * none (409 workspace busy). The kernels are src/kernel/'s (kernel.h). May call core/, http/ and
 * kernel/ (through kernel.h only).
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/kg-internal.h"
#include "build-config.h"
#include "core/manager.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "kernel/kernel.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/string-util.h"

void kg_api_version(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (o)
                json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        http_reply_json(req, 200, o);
}

void kg_kernelspecs(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = kernel_manager_specs(m->kernels);

        http_reply_json(req, 200, o);
}

void kg_kernelspec(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *name = strndup(params[0], lens[0]);

        if (!name)
                return http_reply_oom(req);
        o = kernel_manager_spec(m->kernels, name);
        if (!o)
                return kg_reply_error(req, 404, "Kernel spec not found: %.64s", name);
        http_reply_json(req, 200, o);
}

void kg_kernels_list(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *o = kernel_manager_list(m->kernels, owner);

        http_reply_json(req, 200, o);
}

void kg_sessions(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        /* The Kernel Gateway refuses sessions unless listing is on; no client of ours needs them. */
        kg_reply_error(req, 403, "Sessions are not served by this gateway; use /api/kernels.");
}

static bool kg_env_key_valid(const char *k) {
        if (!strneq(k, "KERNEL_", 7) || !k[7])
                return false;
        for (const char *p = k; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
                        return false;
        return true;
}

int kg_start_request_parse(json_object *body, const char *owner, KernelStartRequest *ret,
                           json_object **ret_env, const char **ret_why) {
        _cleanup_(json_object_putp) json_object *env = NULL;
        KernelStartRequest r = { .owner = owner };
        json_object *v;

        if (body && json_object_object_get_ex(body, "name", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0 ||
                    json_object_get_string_len(v) > 128) {
                        *ret_why = "\"name\" must be a kernel spec's name";
                        return -EBADMSG;
                }
                r.spec = json_object_get_string(v);
        }
        if (body && json_object_object_get_ex(body, "workspaceId", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_string)) {
                        *ret_why = "\"workspaceId\" must be a string";
                        return -EBADMSG;
                }
                r.workspace_id = json_object_get_string(v);
        }
        if (body && json_object_object_get_ex(body, "limits", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_object)) {
                        *ret_why = "\"limits\" must be an object";
                        return -EBADMSG;
                }
                r.limits = v;
        }
        if (body && json_object_object_get_ex(body, "network", &v) && !json_object_is_type(v, json_type_null)) {
                /* "none" (no network at all) or "default" (the policy in force, as runs). */
                if (!json_object_is_type(v, json_type_string) ||
                    (!streq(json_object_get_string(v), "none") && !streq(json_object_get_string(v), "default"))) {
                        *ret_why = "\"network\" must be \"none\" or \"default\"";
                        return -EBADMSG;
                }
                r.network = v;
        }
        /* Ours: a managed environment's kernel, as a run names one (docs/kernels.md). */
        if (body && json_object_object_get_ex(body, "environment", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0 ||
                    json_object_get_string_len(v) > 128) {
                        *ret_why = "\"environment\" must be an environment's name";
                        return -EBADMSG;
                }
                r.environment = json_object_get_string(v);
        }
        env = json_object_new_object();
        if (!env)
                return -ENOMEM;
        if (body && json_object_object_get_ex(body, "env", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_object)) {
                        *ret_why = "\"env\" must be an object of strings";
                        return -EBADMSG;
                }
                /* KERNEL_* only (as Enterprise Gateway passes them); other keys are dropped, never
                 * an error: jupyter_server sends its whole allowed environment. */
                json_object_object_foreach(v, key, val) {
                        if (!json_object_is_type(val, json_type_string)) {
                                *ret_why = "\"env\" must be an object of strings";
                                return -EBADMSG;
                        }
                        if (kg_env_key_valid(key) &&
                            json_object_object_add(env, key, json_object_get(val)) < 0)
                                return -ENOMEM;
                }
        }
        r.env = env;
        *ret = r;
        *ret_env = STEAL(env);
        return 0;
}

void kg_kernel_create(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *env = NULL, *model = NULL;
        _cleanup_free_ char *error = NULL;
        KernelStartRequest r = {};
        const char *why = NULL;
        char location[96];
        Kernel *k = NULL;
        int e;

        if (body && !json_object_is_type(body, json_type_object))
                return kg_reply_error(req, 400, "The body must be a JSON object.");
        e = kg_start_request_parse(body, owner, &r, &env, &why);
        if (e == -ENOMEM)
                return http_reply_oom(req);
        if (e < 0)
                return kg_reply_error(req, 400, "%s.", why);

        e = kernel_manager_start(m->kernels, &r, &k, &error);
        switch (e) {
        case 0:
                break;
        case -EUSERS:
                /* The Kernel Gateway's words at its KG_MAX_KERNELS. */
                return kg_reply_error(req, 403, "Resource Limit%s%s", error ? ": " : "", error ?: "");
        case -ENOENT:
        case -EINVAL:
                return kg_reply_error(req, 400, "%s", error ?: "Unknown kernel spec or workspace.");
        case -EBUSY:
                return kg_reply_error(req, 409, "%s", error ?: "The workspace is busy (its write lease is held).");
        case -ENOMEM:
        case -EAGAIN:
                return kg_reply_error(req, 503, "%s", error ?: "No kernel can be started now; retry later.");
        default:
                log_warning_errno(e, "Failed to start a kernel: %s", error ?: "(no reason)");
                return kg_reply_error(req, 500, "%s", error ?: "The kernel could not be started.");
        }

        model = kernel_model(k);
        if (!model)
                return http_reply_oom(req);
        (void) snprintf(location, sizeof(location), "/api/kernels/%s", kernel_id(k));
        {
                const char *const hdr[] = { "Location", location, NULL };
                const char *s = json_object_to_json_string_ext(model, JSON_C_TO_STRING_PLAIN);

                if (!s || http_request_reply(req, 201, "application/json", s, strlen(s), false, hdr) < 0)
                        http_reply_oom(req);
        }
}

/* The kernel of the {id} of the path, of this credential; answers 404 where there is none. */
Kernel *kg_kernel_of(Manager *m, HttpRequest *req, const char *owner, const char **params, size_t *lens) {
        char id[65];
        Kernel *k;

        if (kg_param_kernel_id(params[0], lens[0], id) < 0) {
                kg_reply_error(req, 404, "Kernel does not exist: %.*s", (int) MIN(lens[0], (size_t) 64), params[0]);
                return NULL;
        }
        k = kernel_manager_find(m->kernels, owner, id);
        if (!k)
                kg_reply_error(req, 404, "Kernel does not exist: %s", id);
        return k;
}

void kg_kernel_get(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *model = NULL;
        Kernel *k = kg_kernel_of(m, req, owner, params, lens);

        if (!k)
                return;
        model = kernel_model(k);
        http_reply_json(req, 200, model);
}

void kg_kernel_delete(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        Kernel *k = kg_kernel_of(m, req, owner, params, lens);
        int r;

        if (!k)
                return;
        r = kernel_delete(k, KERNEL_END_DELETED);
        if (r < 0)
                log_warning_errno(r, "Deleting a kernel did not go cleanly, ignoring: %m");
        /* Gone from the manager either way (kernel.h): 204, then 404. */
        if (http_request_reply(req, 204, NULL, "", 0, false, NULL) < 0)
                http_reply_oom(req);
}

void kg_kernel_interrupt(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        Kernel *k = kg_kernel_of(m, req, owner, params, lens);
        int r;

        if (!k)
                return;
        r = kernel_interrupt(k);
        if (r < 0)
                return kg_reply_error(req, 500, "The kernel could not be interrupted: %s.", strerror(-r));
        if (http_request_reply(req, 204, NULL, "", 0, false, NULL) < 0)
                http_reply_oom(req);
}

void kg_kernel_restart(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params, size_t *lens) {
        _cleanup_(json_object_putp) json_object *model = NULL;
        Kernel *k = kg_kernel_of(m, req, owner, params, lens);
        int r;

        if (!k)
                return;
        r = kernel_restart(k);
        if (r < 0)
                return kg_reply_error(req, 500, "The kernel could not be restarted: %s.", strerror(-r));
        model = kernel_model(k);
        http_reply_json(req, 200, model);
}
