/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POST /api/kernels/{id}/execute: our extension beside the Kernel Gateway routes (docs/api.md,
 * kernels). One execute_request on the kernel's shell channel, answered as one JSON document
 * once its execute_reply and the kernel's status idle for it have arrived: for clients (and
 * sandbox-runnerctl kernel exec) that want a stateful kernel without speaking the WebSocket
 * protocol. The kernel's state is the same one the WebSocket clients see; its iopub goes to them
 * too. A client that goes away leaves the execution running (as Jupyter's do); a timeout
 * interrupts it and answers what came so far.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "api/kg-execute.h"
#include "api/kg-internal.h"
#include "core/manager.h"
#include "http/http-reply.h"
#include "http/http-server.h"
#include "kernel/kernel.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"

typedef struct KgText {
        char *data;
        size_t size, allocated;
} KgText;

typedef struct KgExecution {
        HttpRequest *req;               /* NULL once the client went away */
        Kernel *kernel;
        KernelClient *client;           /* NULL once the kernel is gone */
        sd_event_source *timer;
        sd_event_source *finisher;      /* answers outside the kernel's callbacks */
        char *msg_id;
        KgText out, err;
        json_object *outputs;           /* [{type, data, metadata}] */
        json_object *reply;             /* execute_reply content */
        size_t n_bytes;                 /* output kept so far */
        bool truncated;
        bool idle;
        bool timed_out;
        bool interrupted;
        bool dead;
        KernelEndReason dead_reason;
} KgExecution;

static KgExecution *kg_execution_free(KgExecution *x) {
        if (!x)
                return NULL;
        if (x->client)
                kernel_detach(x->client);
        sd_event_source_disable_unref(x->timer);
        sd_event_source_disable_unref(x->finisher);
        free(x->msg_id);
        free(x->out.data);
        free(x->err.data);
        json_object_put(x->outputs);
        json_object_put(x->reply);
        return mfree(x);
}

static inline void kg_execution_freep(KgExecution **x) {
        kg_execution_free(*x);
}

/* Appends @text to @t, within the output budget (past it: truncated, said in the answer). */
static void append_text(KgExecution *x, KgText *t, const char *text) {
        size_t add = strlen(text), room = x->n_bytes < KG_EXECUTE_OUTPUT_MAX ? KG_EXECUTE_OUTPUT_MAX - x->n_bytes : 0;

        if (add > room) {
                add = room;
                x->truncated = true;
        }
        if (add == 0)
                return;
        if (t->size + add + 1 > t->allocated) {
                size_t n = MAX(t->allocated * 2, t->size + add + 1);
                char *p = realloc(t->data, n);

                if (!p) {
                        x->truncated = true;
                        return;
                }
                t->data = p;
                t->allocated = n;
        }
        memcpy(t->data + t->size, text, add);
        t->size += add;
        t->data[t->size] = '\0';
        x->n_bytes += add;
}

/* The answer, once: the reply and what the kernel sent for it (or why there is none). Frees @x. */
static void finish(KgExecution *x) {
        _cleanup_(kg_execution_freep) _unused_ KgExecution *owned = x;
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        HttpRequest *req = x->req;
        json_object *v;

        x->req = NULL;
        http_request_set_userdata(req, NULL, NULL);
        if (x->dead && !x->reply)
                return kg_reply_error(req, 409, "%s", x->dead_reason == KERNEL_END_OOM ?
                                      "The kernel ran out of memory and ended before the execution finished" :
                                      "The kernel ended before the execution finished");
        if (!o)
                return http_reply_oom(req);
        if (x->reply && json_object_object_get_ex(x->reply, "status", &v))
                json_object_object_add(o, "status", json_object_get(v));
        else
                json_object_object_add(o, "status", json_object_new_string("aborted"));
        if (x->reply && json_object_object_get_ex(x->reply, "execution_count", &v))
                json_object_object_add(o, "executionCount", json_object_get(v));
        json_object_object_add(o, "stdout", json_object_new_string_len(x->out.data ?: "", (int) x->out.size));
        json_object_object_add(o, "stderr", json_object_new_string_len(x->err.data ?: "", (int) x->err.size));
        json_object_object_add(o, "outputs", json_object_get(x->outputs));
        if (x->reply && json_object_object_get_ex(x->reply, "ename", &v)) {
                json_object *err = json_object_new_object(), *w;

                json_object_object_add(err, "ename", json_object_get(v));
                if (json_object_object_get_ex(x->reply, "evalue", &w))
                        json_object_object_add(err, "evalue", json_object_get(w));
                if (json_object_object_get_ex(x->reply, "traceback", &w))
                        json_object_object_add(err, "traceback", json_object_get(w));
                json_object_object_add(o, "error", err);
        } else
                json_object_object_add(o, "error", NULL);
        json_object_object_add(o, "truncated", json_object_new_boolean(x->truncated));
        json_object_object_add(o, "timedOut", json_object_new_boolean(x->timed_out));
        http_reply_json(req, 200, o);
}

static int on_finish(sd_event_source *s, void *userdata) {
        finish(userdata);
        return 0;
}

/* Answers from the event loop, after the kernel's callback has returned (finish() detaches). */
static void finish_soon(KgExecution *x) {
        if (x->finisher)
                return;
        if (sd_event_add_defer(sd_event_source_get_event(x->timer), &x->finisher, on_finish, x) < 0)
                /* Left to the timer: the answer comes at the deadline instead. */
                (void) sd_event_source_set_time_relative(x->timer, 0);
}

static void on_deliver(KernelClient *c, JupyterMsg *msg, void *userdata) {
        KgExecution *x = userdata;
        const char *type = jupyter_msg_type(msg), *parent = jupyter_msg_parent_id(msg);
        json_object *v, *w;

        if (!type || !parent || !streq(parent, x->msg_id))
                goto done;
        if (streq(type, "stream") && json_object_object_get_ex(msg->content, "name", &v) &&
            json_object_object_get_ex(msg->content, "text", &w) && json_object_is_type(w, json_type_string))
                append_text(x, json_object_is_type(v, json_type_string) && streq(json_object_get_string(v), "stderr") ?
                               &x->err : &x->out, json_object_get_string(w));
        else if (streq(type, "execute_result") || streq(type, "display_data")) {
                size_t size = strlen(json_object_to_json_string_ext(msg->content, JSON_C_TO_STRING_PLAIN));
                json_object *out;

                if (x->n_bytes + size > KG_EXECUTE_OUTPUT_MAX) {
                        x->truncated = true;
                        goto done;
                }
                out = json_object_new_object();
                if (!out) {
                        x->truncated = true;
                        goto done;
                }
                json_object_object_add(out, "type", json_object_new_string(type));
                if (json_object_object_get_ex(msg->content, "data", &v))
                        json_object_object_add(out, "data", json_object_get(v));
                if (json_object_object_get_ex(msg->content, "metadata", &v))
                        json_object_object_add(out, "metadata", json_object_get(v));
                json_object_array_add(x->outputs, out);
                x->n_bytes += size;
        } else if (streq(type, "execute_reply"))
                x->reply = json_object_get(msg->content);
        else if (streq(type, "status") && json_object_object_get_ex(msg->content, "execution_state", &v) &&
                 json_object_is_type(v, json_type_string) && streq(json_object_get_string(v), "idle"))
                x->idle = true;
done:
        jupyter_msg_free(msg);
        if (x->reply && x->idle)
                finish_soon(x);
}

static void on_closed(KernelClient *c, KernelEndReason reason, void *userdata) {
        KgExecution *x = userdata;

        kernel_detach(c);               /* unlinked from the kernel already: ours to free (kernel.h) */
        x->client = NULL;
        x->dead = true;
        x->dead_reason = reason;
        finish_soon(x);
}

static const KernelClientOps kg_execution_ops = {
        .deliver = on_deliver,
        .closed = on_closed,
};

/* The deadline: interrupt once, then give the kernel KG_EXECUTE_DRAIN_USEC to answer. */
static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        KgExecution *x = userdata;

        if (!x->interrupted && !x->dead && !x->finisher) {
                x->interrupted = x->timed_out = true;
                (void) kernel_interrupt(x->kernel);
                if (sd_event_source_set_time_relative(s, KG_EXECUTE_DRAIN_USEC) >= 0 &&
                    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) >= 0)
                        return 0;
        }
        finish(x);
        return 0;
}

static void on_request_gone(HttpRequest *req, void *userdata) {
        KgExecution *x = userdata;

        /* The execution goes on in the kernel (as a closed Jupyter WebSocket leaves it). */
        x->req = NULL;
        kg_execution_free(x);
}

/* The body: {"code": string, "timeoutMs": 1..KG_EXECUTE_TIMEOUT_MAX_MS (default
 * KG_EXECUTE_TIMEOUT_DEFAULT_MS), "silent": bool, "storeHistory": bool}; nothing else. */
static int parse_body(json_object *body, const char **ret_code, uint64_t *ret_timeout_ms, bool *ret_silent,
                      bool *ret_store, const char **ret_why) {
        json_object *v;

        *ret_timeout_ms = KG_EXECUTE_TIMEOUT_DEFAULT_MS;
        *ret_silent = false;
        *ret_store = true;
        if (!body || !json_object_object_get_ex(body, "code", &v) || !json_object_is_type(v, json_type_string))
                return *ret_why = "\"code\" must be a string", -EINVAL;
        *ret_code = json_object_get_string(v);
        json_object_object_foreach(body, key, val) {
                if (streq(key, "code"))
                        continue;
                if (streq(key, "timeoutMs")) {
                        int64_t t = json_object_get_int64(val);

                        if (!json_object_is_type(val, json_type_int) || t < 1 || t > KG_EXECUTE_TIMEOUT_MAX_MS)
                                return *ret_why = "\"timeoutMs\" must be an integer from 1 to 86400000", -EINVAL;
                        *ret_timeout_ms = (uint64_t) t;
                } else if (streq(key, "silent") || streq(key, "storeHistory")) {
                        if (!json_object_is_type(val, json_type_boolean))
                                return *ret_why = "\"silent\" and \"storeHistory\" must be booleans", -EINVAL;
                        *(streq(key, "silent") ? ret_silent : ret_store) = json_object_get_boolean(val);
                } else
                        return *ret_why = "unknown field: only code, timeoutMs, silent and storeHistory", -EINVAL;
        }
        return 0;
}

void kg_kernel_execute(Manager *m, HttpRequest *req, const char *owner, json_object *body, const char **params,
                       size_t *lens) {
        Kernel *k = kg_kernel_of(m, req, owner, params, lens);

        if (k)
                kg_execute(m, req, k, body);
}

void kg_execute(Manager *m, HttpRequest *req, Kernel *k, json_object *body) {
        _cleanup_(kg_execution_freep) KgExecution *x = NULL;
        _cleanup_(json_object_putp) json_object *content = NULL;
        _cleanup_jupyter_msg_ JupyterMsg *msg = NULL;
        const char *code, *why = NULL;
        uint64_t timeout_ms;
        bool silent, store;
        int r;

        if (parse_body(body, &code, &timeout_ms, &silent, &store, &why) < 0)
                return kg_reply_error(req, 400, "%s", why);
        if (kernel_state(k) == KERNEL_DEAD)
                return kg_reply_error(req, 409, "%s", "The kernel has ended");

        x = calloc(1, sizeof(*x));
        if (!x)
                return http_reply_oom(req);
        x->req = req;
        x->kernel = k;
        x->outputs = json_object_new_array();
        content = json_object_new_object();
        if (!x->outputs || !content)
                return http_reply_oom(req);
        json_object_object_add(content, "code", json_object_new_string(code));
        json_object_object_add(content, "silent", json_object_new_boolean(silent));
        json_object_object_add(content, "store_history", json_object_new_boolean(store));
        json_object_object_add(content, "user_expressions", json_object_new_object());
        json_object_object_add(content, "allow_stdin", json_object_new_boolean(false));
        /* One request at a time: nothing queued behind it to abort after an error. And ipykernel,
         * told to stop on error, also aborts a request that arrives right after the error's reply
         * (a loaded host): the next /execute would come back "aborted" for nothing. */
        json_object_object_add(content, "stop_on_error", json_object_new_boolean(false));
        r = jupyter_msg_new(JUPYTER_CHANNEL_SHELL, "execute_request", "sandbox-runner-execute", NULL,
                            STEAL(content), &msg);
        if (r < 0)
                return http_reply_oom(req);
        x->msg_id = strdup(jupyter_msg_id(msg));
        if (!x->msg_id)
                return http_reply_oom(req);
        r = kernel_attach(k, &kg_execution_ops, x, &x->client);
        if (r < 0)
                return kg_reply_error(req, r == -ENOMEM ? 500 : 409, "%s", "The kernel takes no new client now");
        r = sd_event_add_time_relative(m->event, &x->timer, CLOCK_MONOTONIC, timeout_ms * USEC_PER_MSEC, 0,
                                       on_timer, x);
        if (r < 0)
                return http_reply_oom(req);
        r = kernel_client_send(x->client, STEAL(msg));
        if (r < 0)
                return kg_reply_error(req, 409, "%s", "The kernel did not take the request");
        http_request_set_userdata(req, x, on_request_gone);
        http_request_suspend(req);
        x = NULL;
}
