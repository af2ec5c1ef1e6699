/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A kernel's side of the wire: its four sockets (DEALER shell, control, stdin; SUB iopub) over
 * ipc, every message from the kernel checked (signature, duplicates, shape), the execution state
 * taken from iopub's status, replies routed to the client that sent the request (or to the daemon,
 * for its own kernel_info and interrupt requests), iopub fanned out; and the clients: attach,
 * send, detach.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "config/config.h"
#include "kernel/kernel-internal.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"

static JupyterChannel socket_channel(Kernel *k, KernelSocket *s) {
        for (JupyterChannel c = 0; c < _JUPYTER_CHANNEL_MAX; c++)
                if (k->sockets[c] == s)
                        return c;
        return _JUPYTER_CHANNEL_INVALID;
}

/* Every client gets its own copy (the JSON shared): deliver() may keep it. */
static void fan_out(Kernel *k, const JupyterMsg *m) {
        unsigned epoch = k->clients_epoch;

        for (KernelClient *c = k->clients, *next; c; c = next) {
                JupyterMsg *d = NULL;

                /* A deliver() that ended the kernel closed every client: the list is gone. */
                if (k->clients_epoch != epoch || k->free_pending)
                        return;
                next = c->next;
                if (jupyter_msg_dup(m, &d) < 0) {
                        log_oom();
                        return;
                }
                c->ops.deliver(c, d, c->userdata);
        }
}

/* Output past the request's budget ([Kernels] MaxOutputBytes=): the marker once, then nothing.
 * Return: the message to fan out (@m or the marker in *@ret_marker), or NULL to drop it. */
static const JupyterMsg *output_budget(Kernel *k, const JupyterMsg *m, JupyterMsg **ret_marker) {
        _cleanup_free_ char *parent = NULL;
        uint64_t delivered = 0;
        int r;

        if (!k->output && kernel_output_new(k->manager->config->kernels_max_output_bytes, &k->output) < 0) {
                log_oom();
                return m;       /* no budget rather than a hole in the output */
        }
        r = kernel_output_judge(k->output, m, k->session, ret_marker, &delivered);
        if (r < 0) {
                log_oom();
                return m;
        }
        if (r == KERNEL_OUTPUT_DROP)
                return NULL;
        if (r == KERNEL_OUTPUT_PASS)
                return m;
        /* The request's msg_id is a client's string, echoed by the kernel. */
        parent = str_escape_log(jupyter_msg_parent_id(m), 128);
        log_struct(LOG_INFO,
                   "SANDBOX_KERNEL_ID=%s", k->id,
                   "JUPYTER_MSG_ID=%s", parent ?: "?",
                   "SANDBOX_KERNEL_OUTPUT_BYTES=%" PRIu64, delivered,
                   "MESSAGE=Kernel '%s': the output of request '%s' passed MaxOutputBytes=%" PRIu64
                   " after %" PRIu64 " bytes; truncated with a marker.", k->id, parent ?: "?",
                   k->manager->config->kernels_max_output_bytes, delivered);
        return *ret_marker;
}

static void on_iopub(Kernel *k, const JupyterMsg *m) {
        _cleanup_jupyter_msg_ JupyterMsg *marker = NULL;
        const char *type = jupyter_msg_type(m);
        const JupyterMsg *out;
        json_object *v;

        k->iopub_heard = true;
        if (streq(type, "status") && json_object_object_get_ex(m->content, "execution_state", &v) &&
            json_object_is_type(v, json_type_string) && k->ready) {
                const char *s = json_object_get_string(v);

                if (streq(s, "busy"))
                        kernel_set_state(k, KERNEL_BUSY);
                else if (streq(s, "idle"))
                        kernel_set_state(k, KERNEL_IDLE);
        }
        out = output_budget(k, m, &marker);
        if (out)
                fan_out(k, out);
        if (!k->ready && k->info_replied && k->state != KERNEL_DEAD)
                kernel_became_ready(k);
}

/* A reply to the daemon's own request. */
static void on_own_reply(Kernel *k, const JupyterMsg *m) {
        const char *type = jupyter_msg_type(m), *parent = jupyter_msg_parent_id(m);

        kernel_routes_remove(k->routes, parent);
        if (streq(type, "kernel_info_reply")) {
                /* Any answer will do: the kernel serves its shell socket. Ready once iopub also
                 * delivers (the slow joiner: a SUB misses what came before it was connected). */
                k->info_replied = true;
                if (!k->ready && k->iopub_heard)
                        kernel_became_ready(k);
        } else if (streq(type, "interrupt_reply") && streq(parent, k->interrupt_id)) {
                k->interrupt_id[0] = '\0';
                k->interrupt_timer = sd_event_source_disable_unref(k->interrupt_timer);
        }
}

static void handle_frames(Kernel *k, KernelSocket *s, const struct iovec *frames, size_t n) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        JupyterChannel channel = socket_channel(k, s);
        const char *why = NULL, *parent, *type;
        KernelClient *c;
        void *owner;
        int r;

        if (channel < 0)
                return;
        r = jupyter_msg_from_wire_dedup(channel, frames, n, (const uint8_t *) k->key, KERNEL_KEY_LEN, k->digests,
                                        &m, &why);
        if (r < 0) {
                /* The kernel runs untrusted code: what it sends is checked, and dropped when bad. */
                if (k->n_bad_messages++ < 10)
                        log_warning("Kernel '%s' sent a message on %s that is refused: %s.", k->id,
                                    jupyter_channel_to_string(channel), r == -ENOMEM ? "out of memory" : why);
                return;
        }
        kernel_touch(k);
        if (channel == JUPYTER_CHANNEL_IOPUB) {
                on_iopub(k, m);
                return;
        }
        parent = jupyter_msg_parent_id(m);
        owner = kernel_routes_find(k->routes, parent);
        if (!owner)
                return;   /* its client went away */
        if (owner == k) {
                on_own_reply(k, m);
                return;
        }
        c = owner;
        type = jupyter_msg_type(m);
        /* One reply per request; an input_request on stdin comes before it. */
        if (strlen(type) > 6 && streq(type + strlen(type) - 6, "_reply"))
                kernel_routes_remove(k->routes, parent);
        c->ops.deliver(c, STEAL(m), c->userdata);
}

static void on_frames(KernelSocket *s, const struct iovec *frames, size_t n, void *userdata) {
        Kernel *k = userdata;

        k->dispatching++;
        handle_frames(k, s, frames, n);
        k->dispatching--;
        kernel_free_pending(k);
}

int kernel_wire_connect(Kernel *k) {
        int r;

        for (JupyterChannel c = 0; c < _JUPYTER_CHANNEL_MAX; c++) {
                _cleanup_free_ char *endpoint = NULL;

                r = kernel_connection_endpoint(k->dir, c, &endpoint);
                if (r < 0)
                        return r;
                r = kernel_socket_new(k->manager->zmq, k->manager->event,
                                      c == JUPYTER_CHANNEL_IOPUB ? ZMQ_SUB : ZMQ_DEALER, endpoint,
                                      "kernel-socket", on_frames, k, &k->sockets[c]);
                if (r < 0)
                        return r;
        }
        return 0;
}

void kernel_wire_drop_pending(Kernel *k) {
        for (size_t i = 0; i < k->n_pending; i++) {
                kernel_routes_remove(k->routes, jupyter_msg_id(k->pending[i]));
                k->pending[i] = jupyter_msg_free(k->pending[i]);
        }
        k->n_pending = 0;
}

void kernel_wire_close(Kernel *k) {
        for (JupyterChannel c = 0; c < _JUPYTER_CHANNEL_MAX; c++)
                k->sockets[c] = kernel_socket_free(k->sockets[c]);
}

void kernel_wire_flush_pending(Kernel *k) {
        size_t n = k->n_pending;

        k->n_pending = 0;
        for (size_t i = 0; i < n; i++) {
                _cleanup_jupyter_msg_ JupyterMsg *m = STEAL(k->pending[i]);
                int r = kernel_wire_send(k, m);

                if (r < 0) {
                        kernel_routes_remove(k->routes, jupyter_msg_id(m));
                        log_info_errno(r, "Kernel '%s': a client's message sent before it was ready is dropped: %m",
                                       k->id);
                }
        }
}

int kernel_wire_send(Kernel *k, const JupyterMsg *m) {
        struct iovec *frames = NULL;
        size_t n;
        int r;

        if (m->channel < 0 || m->channel >= _JUPYTER_CHANNEL_MAX || !k->sockets[m->channel])
                return -ESHUTDOWN;
        r = jupyter_msg_to_wire(m, (const uint8_t *) k->key, KERNEL_KEY_LEN, &frames, &n);
        if (r < 0)
                return r;
        r = kernel_socket_send(k->sockets[m->channel], frames, n);
        jupyter_frames_free(frames, n);
        return r;
}

int kernel_wire_send_own(Kernel *k, JupyterChannel channel, const char *msg_type, json_object *content,
                         char ret_id[static JUPYTER_UUID_LEN + 1]) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        int r;

        r = jupyter_msg_new(channel, msg_type, k->session, NULL, content, &m);
        if (r < 0)
                return r;
        r = kernel_routes_add(k->routes, jupyter_msg_id(m), k);
        if (r < 0)
                return r;
        r = kernel_wire_send(k, m);
        if (r < 0) {
                kernel_routes_remove(k->routes, jupyter_msg_id(m));
                return r;
        }
        snprintf(ret_id, JUPYTER_UUID_LEN + 1, "%s", jupyter_msg_id(m));
        return 0;
}

/* What jupyter_server sends itself when a kernel restarts or dies: status on iopub. */
void kernel_broadcast_status(Kernel *k, const char *execution_state) {
        _cleanup_jupyter_msg_ JupyterMsg *m = NULL;
        json_object *content = json_object_new_object();

        if (!content || json_add(content, "execution_state", json_object_new_string(execution_state)) < 0 ||
            jupyter_msg_new(JUPYTER_CHANNEL_IOPUB, "status", k->session, NULL, content, &m) < 0) {
                log_oom();
                return;
        }
        fan_out(k, m);
}

void kernel_clients_closed(Kernel *k) {
        k->clients_epoch++;
        while (k->clients) {
                KernelClient *c = k->clients;

                k->clients = c->next;
                if (k->clients)
                        k->clients->prev = NULL;
                c->next = c->prev = NULL;
                c->kernel = NULL;
                k->n_clients--;
                kernel_routes_drop_owner(k->routes, c);
                c->ops.closed(c, k->reason, c->userdata);
        }
}

int kernel_attach(Kernel *k, const KernelClientOps *ops, void *userdata, KernelClient **ret) {
        KernelClient *c;

        if (k->state == KERNEL_DEAD)
                return -ESHUTDOWN;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (KernelClient) { .kernel = k, .ops = *ops, .userdata = userdata, .next = k->clients };
        if (k->clients)
                k->clients->prev = c;
        k->clients = c;
        k->n_clients++;
        kernel_touch(k);
        *ret = c;
        return 0;
}

int kernel_client_send(KernelClient *c, JupyterMsg *m) {
        _cleanup_jupyter_msg_ JupyterMsg *msg = m;
        Kernel *k = c->kernel;
        const char *id = jupyter_msg_id(msg);
        int r;

        if (!k || k->state == KERNEL_DEAD)
                return -ESHUTDOWN;
        if (msg->channel == JUPYTER_CHANNEL_IOPUB || msg->channel < 0 || msg->channel >= _JUPYTER_CHANNEL_MAX || !id)
                return -EINVAL;
        if (!k->ready && k->n_pending >= KERNEL_PENDING_MAX)
                return -EAGAIN;
        r = kernel_routes_add(k->routes, id, c);
        if (r < 0)
                return r;
        if (!k->ready) {
                /* Starting or restarting: sent once it is ready (kernel_wire_flush_pending()). */
                k->pending[k->n_pending++] = STEAL(msg);
                return 0;
        }
        r = kernel_wire_send(k, msg);
        if (r < 0) {
                kernel_routes_remove(k->routes, id);
                return r;
        }
        kernel_touch(k);
        return 0;
}

void kernel_detach(KernelClient *c) {
        Kernel *k;

        if (!c)
                return;
        k = c->kernel;
        if (k) {
                if (c->prev)
                        c->prev->next = c->next;
                else
                        k->clients = c->next;
                if (c->next)
                        c->next->prev = c->prev;
                k->n_clients--;
                kernel_routes_drop_owner(k->routes, c);
        }
        free(c);
}
