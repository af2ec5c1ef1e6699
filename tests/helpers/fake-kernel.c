/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A test double of src/kernel/ (kernel.h and the WebSocket half of jupyter-msg.h), linked only into
 * tests/unit/test-kg-api: kernels that live in memory and answer every message a client sends with
 * iopub "status: busy", a reply on the request's channel whose parent is the request, and
 * "status: idle" — enough to drive the Kernel Gateway routes and channels (src/api/kg-*.c) through
 * the real HTTP server. Never part of the daemon: the real kernels are the .c files of src/kernel/.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake-kernel.h"
#include "util/macro.h"

struct KernelClient {
        Kernel *kernel;
        KernelClientOps ops;
        void *userdata;
        KernelClient *next;
};

struct Kernel {
        KernelManager *km;
        char id[37];
        char owner[64];
        KernelClient *clients;
        Kernel *next;
};

struct KernelManager {
        Kernel *kernels;
        unsigned cap;
        unsigned next_id;
};

FakeKernelCounters fake_kernel_counters;

static const char *const channel_names[_JUPYTER_CHANNEL_MAX] = {
        [JUPYTER_CHANNEL_SHELL] = "shell",
        [JUPYTER_CHANNEL_CONTROL] = "control",
        [JUPYTER_CHANNEL_STDIN] = "stdin",
        [JUPYTER_CHANNEL_IOPUB] = "iopub",
};

const char *jupyter_channel_to_string(JupyterChannel c) {
        return c >= 0 && c < _JUPYTER_CHANNEL_MAX ? channel_names[c] : NULL;
}

JupyterChannel jupyter_channel_from_string(const char *s) {
        for (int i = 0; s && i < _JUPYTER_CHANNEL_MAX; i++)
                if (streq(channel_names[i], s))
                        return (JupyterChannel) i;
        return _JUPYTER_CHANNEL_INVALID;
}

JupyterMsg *jupyter_msg_free(JupyterMsg *m) {
        if (!m)
                return NULL;
        json_object_put(m->header);
        json_object_put(m->parent_header);
        json_object_put(m->metadata);
        json_object_put(m->content);
        free(m);
        return NULL;
}

static json_object *part(json_object *o, const char *key) {
        json_object *v;

        if (json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_object))
                return json_object_get(v);
        return json_object_new_object();
}

int jupyter_msg_from_ws_text(const char *data, size_t len, JupyterMsg **ret, const char **ret_error) {
        json_object *o, *h, *id, *type, *ch;
        JupyterChannel c = JUPYTER_CHANNEL_SHELL;
        JupyterMsg *m;

        o = json_tokener_parse(strndupa(data, len));
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                *ret_error = "not a JSON object";
                return -EBADMSG;
        }
        if (!json_object_object_get_ex(o, "header", &h) || !json_object_is_type(h, json_type_object) ||
            !json_object_object_get_ex(h, "msg_id", &id) || !json_object_is_type(id, json_type_string) ||
            !json_object_object_get_ex(h, "msg_type", &type) || !json_object_is_type(type, json_type_string)) {
                json_object_put(o);
                *ret_error = "no header with msg_id and msg_type";
                return -EBADMSG;
        }
        if (json_object_object_get_ex(o, "channel", &ch)) {
                c = jupyter_channel_from_string(json_object_get_string(ch));
                if (c < 0) {
                        json_object_put(o);
                        *ret_error = "unknown channel";
                        return -EBADMSG;
                }
        }
        m = calloc(1, sizeof(*m));
        if (!m) {
                json_object_put(o);
                return -ENOMEM;
        }
        m->channel = c;
        m->header = json_object_get(h);
        m->parent_header = part(o, "parent_header");
        m->metadata = part(o, "metadata");
        m->content = part(o, "content");
        json_object_put(o);
        *ret = m;
        return 0;
}

int jupyter_msg_from_ws_binary(bool v1, const uint8_t *data, size_t len, JupyterMsg **ret, const char **ret_error) {
        *ret_error = "binary messages are not spoken by the test double";
        return -EBADMSG;
}

int jupyter_msg_to_ws(bool v1, const JupyterMsg *m, uint8_t **ret, size_t *ret_len, bool *ret_binary) {
        json_object *o = json_object_new_object(), *v;
        const char *s;

        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "header", json_object_get(m->header));
        json_object_object_add(o, "parent_header", json_object_get(m->parent_header));
        json_object_object_add(o, "metadata", json_object_get(m->metadata));
        json_object_object_add(o, "content", json_object_get(m->content));
        json_object_object_add(o, "buffers", json_object_new_array());
        json_object_object_add(o, "channel", json_object_new_string(jupyter_channel_to_string(m->channel)));
        if (json_object_object_get_ex(m->header, "msg_id", &v))
                json_object_object_add(o, "msg_id", json_object_get(v));
        if (json_object_object_get_ex(m->header, "msg_type", &v))
                json_object_object_add(o, "msg_type", json_object_get(v));
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        *ret = (uint8_t *) strdup(s);
        *ret_len = strlen(s);
        *ret_binary = false;
        json_object_put(o);
        return *ret ? 0 : -ENOMEM;
}

const char *kernel_state_to_string(KernelState s) {
        return s == KERNEL_IDLE ? "idle" : "starting";
}

const char *kernel_end_reason_to_string(KernelEndReason r) {
        return r == KERNEL_END_DELETED ? "deleted" : r == KERNEL_END_CRASHED ? "crashed" : "none";
}

KernelManager *fake_kernel_manager_new(unsigned cap) {
        KernelManager *km = calloc(1, sizeof(*km));

        if (km)
                km->cap = cap;
        return km;
}

KernelManager *kernel_manager_free(KernelManager *km) {
        while (km && km->kernels)
                (void) kernel_delete(km->kernels, KERNEL_END_DELETED);
        free(km);
        return NULL;
}

static json_object *spec_python3(void) {
        json_object *o = json_object_new_object(), *spec = json_object_new_object();

        json_object_object_add(spec, "display_name", json_object_new_string("Python 3 (test double)"));
        json_object_object_add(spec, "language", json_object_new_string("python"));
        json_object_object_add(o, "name", json_object_new_string("python3"));
        json_object_object_add(o, "spec", spec);
        json_object_object_add(o, "resources", json_object_new_object());
        return o;
}

json_object *kernel_manager_specs(KernelManager *km) {
        json_object *o = json_object_new_object(), *specs = json_object_new_object();

        json_object_object_add(specs, "python3", spec_python3());
        json_object_object_add(o, "default", json_object_new_string("python3"));
        json_object_object_add(o, "kernelspecs", specs);
        return o;
}

json_object *kernel_manager_spec(KernelManager *km, const char *name) {
        return streq(name, "python3") ? spec_python3() : NULL;
}

unsigned kernel_manager_count(KernelManager *km) {
        unsigned n = 0;

        for (Kernel *k = km->kernels; k; k = k->next)
                n++;
        return n;
}

int kernel_manager_start(KernelManager *km, const KernelStartRequest *r, Kernel **ret, char **ret_error) {
        Kernel *k;

        fake_kernel_counters.n_env_keys = r->env ? (unsigned) json_object_object_length(r->env) : 0;
        if (r->spec && !streq(r->spec, "python3")) {
                *ret_error = strdup("No such kernel spec.");
                return -ENOENT;
        }
        if (r->workspace_id && streq(r->workspace_id, "busy")) {
                *ret_error = strdup("Workspace 'busy' is leased.");
                return -EBUSY;
        }
        if (kernel_manager_count(km) >= km->cap)
                return -EUSERS;
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        k->km = km;
        km->next_id++;
        (void) snprintf(k->id, sizeof(k->id), "%08x-0000-4000-8000-%012x", km->next_id, km->next_id);
        (void) snprintf(k->owner, sizeof(k->owner), "%s", r->owner);
        k->next = km->kernels;
        km->kernels = k;
        *ret = k;
        return 0;
}

Kernel *kernel_manager_find(KernelManager *km, const char *owner, const char *id) {
        for (Kernel *k = km->kernels; k; k = k->next)
                if (streq(k->id, id) && (!owner || streq(k->owner, owner)))
                        return k;
        return NULL;
}

json_object *kernel_model(Kernel *k) {
        json_object *o = json_object_new_object();
        unsigned n = 0;

        for (KernelClient *c = k->clients; c; c = c->next)
                n++;
        json_object_object_add(o, "id", json_object_new_string(k->id));
        json_object_object_add(o, "name", json_object_new_string("python3"));
        json_object_object_add(o, "last_activity", json_object_new_string("2026-12-03T17:00:00.000000Z"));
        json_object_object_add(o, "execution_state", json_object_new_string("idle"));
        json_object_object_add(o, "connections", json_object_new_int((int) n));
        return o;
}

json_object *kernel_manager_list(KernelManager *km, const char *owner) {
        json_object *a = json_object_new_array();

        for (Kernel *k = km->kernels; k; k = k->next)
                if (!owner || streq(k->owner, owner))
                        json_object_array_add(a, kernel_model(k));
        return a;
}

const char *kernel_id(Kernel *k) {
        return k->id;
}

KernelState kernel_state(Kernel *k) {
        return KERNEL_IDLE;
}

int kernel_interrupt(Kernel *k) {
        fake_kernel_counters.n_interrupts++;
        return 0;
}

int kernel_restart(Kernel *k) {
        fake_kernel_counters.n_restarts++;
        return 0;
}

int kernel_delete(Kernel *k, KernelEndReason reason) {
        KernelManager *km = k->km;

        for (Kernel **p = &km->kernels; *p; p = &(*p)->next)
                if (*p == k) {
                        *p = k->next;
                        break;
                }
        while (k->clients) {
                KernelClient *c = k->clients;

                k->clients = c->next;
                c->ops.closed(c, reason, c->userdata);
                free(c);
        }
        free(k);
        return 0;
}

int kernel_attach(Kernel *k, const KernelClientOps *ops, void *userdata, KernelClient **ret) {
        KernelClient *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        *c = (KernelClient) { .kernel = k, .ops = *ops, .userdata = userdata, .next = k->clients };
        k->clients = c;
        *ret = c;
        return 0;
}

void kernel_detach(KernelClient *c) {
        Kernel *k = c->kernel;

        for (KernelClient **p = &k->clients; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        free(c);
}

static JupyterMsg *reply(JupyterChannel channel, const JupyterMsg *parent, const char *type, json_object *content) {
        JupyterMsg *m = calloc(1, sizeof(*m));
        char id[32];

        if (!m)
                abort();
        (void) snprintf(id, sizeof(id), "fake-%u", ++fake_kernel_counters.n_replies);
        m->channel = channel;
        m->header = json_object_new_object();
        json_object_object_add(m->header, "msg_id", json_object_new_string(id));
        json_object_object_add(m->header, "msg_type", json_object_new_string(type));
        m->parent_header = json_object_get(parent->header);
        m->metadata = json_object_new_object();
        m->content = content;
        return m;
}

static json_object *status(const char *state) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "execution_state", json_object_new_string(state));
        return o;
}

int kernel_client_send(KernelClient *c, JupyterMsg *m) {
        _cleanup_jupyter_msg_ JupyterMsg *msg = m;
        char type[64];
        const char *t;
        json_object *content;

        if (msg->channel == JUPYTER_CHANNEL_IOPUB)
                return -EINVAL;
        fake_kernel_counters.n_sent++;
        t = jupyter_msg_type(msg);
        (void) snprintf(type, sizeof(type), "%.40s", t ?: "unknown");
        if (strlen(type) > 8 && streq(type + strlen(type) - 8, "_request"))
                strcpy(type + strlen(type) - 8, "_reply");
        content = json_object_new_object();
        json_object_object_add(content, "status", json_object_new_string("ok"));
        json_object_object_add(content, "echo", json_object_get(msg->content));
        c->ops.deliver(c, reply(JUPYTER_CHANNEL_IOPUB, msg, "status", status("busy")), c->userdata);
        c->ops.deliver(c, reply(msg->channel, msg, type, content), c->userdata);
        c->ops.deliver(c, reply(JUPYTER_CHANNEL_IOPUB, msg, "status", status("idle")), c->userdata);
        return 0;
}

const char *jupyter_msg_type(const JupyterMsg *m) {
        json_object *v;

        return json_object_object_get_ex(m->header, "msg_type", &v) ? json_object_get_string(v) : NULL;
}
