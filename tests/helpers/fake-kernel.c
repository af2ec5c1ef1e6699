/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A test double of src/kernel/kernel.h (the real message codec, jupyter-msg.c, is used), linked only into
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
        char workspace[80];
        KernelClient *clients;
        Kernel *next;
};

struct KernelManager {
        Kernel *kernels;
        unsigned cap;
        unsigned next_id;
};

FakeKernelCounters fake_kernel_counters;

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
        if (r->workspace_id)
                (void) snprintf(k->workspace, sizeof(k->workspace), "%s", r->workspace_id);
        else
                (void) snprintf(k->workspace, sizeof(k->workspace), "kernel-%s", k->id);
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

Kernel *kernel_manager_find_by_workspace(KernelManager *km, const char *workspace_id) {
        for (Kernel *k = km ? km->kernels : NULL; k; k = k->next)
                if (workspace_id && streq(k->workspace, workspace_id))
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

KernelEndReason kernel_end_reason(Kernel *k) {
        return KERNEL_END_NONE;           /* the double's kernels are alive until deleted */
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
                c->kernel = NULL;
                /* As the real kernel side: unlinked, then closed(), whose callee detaches (frees) it. */
                c->ops.closed(c, reason, c->userdata);
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

        for (KernelClient **p = k ? &k->clients : NULL; p && *p; p = &(*p)->next)
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
