/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A kernel's per-request output budget and its truncation marker (kernel-output.h). May call util/. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel-output.h"
#include "util/json-util.h"
#include "util/macro.h"

typedef struct OutputEntry {
        char *parent;                   /* the request's msg_id; NULL: a free slot */
        uint64_t bytes;                 /* delivered so far */
        uint64_t last_use;
        bool truncated;
} OutputEntry;

struct KernelOutput {
        uint64_t max_bytes;
        uint64_t clock;
        OutputEntry entries[KERNEL_OUTPUT_TRACKED];
};

int kernel_output_new(uint64_t max_bytes, KernelOutput **ret) {
        KernelOutput *o = calloc(1, sizeof(*o));

        if (!o)
                return -ENOMEM;
        o->max_bytes = max_bytes;
        *ret = o;
        return 0;
}

KernelOutput *kernel_output_free(KernelOutput *o) {
        if (!o)
                return NULL;
        for (size_t i = 0; i < KERNEL_OUTPUT_TRACKED; i++)
                free(o->entries[i].parent);
        free(o);
        return NULL;
}

static bool is_output(const char *type) {
        static const char *const types[] = {
                "stream", "display_data", "update_display_data", "execute_result", "error",
        };

        if (!type)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (streq(type, types[i]))
                        return true;
        return false;
}

/* json-c's parser bounds the depth (JSON_TOKENER_DEFAULT_DEPTH): the recursion is bounded too. */
static uint64_t json_bytes(json_object *v) {
        uint64_t n = 0;

        switch (json_object_get_type(v)) {
        case json_type_string:
                return (uint64_t) json_object_get_string_len(v);
        case json_type_object: {
                json_object_object_foreach(v, key, val)
                        n += strlen(key) + json_bytes(val);
                return n;
        }
        case json_type_array:
                for (size_t i = 0, l = json_object_array_length(v); i < l; i++)
                        n += json_bytes(json_object_array_get_idx(v, i));
                return n;
        case json_type_null:
        case json_type_boolean:
        case json_type_double:
        case json_type_int:
        default:
                return 8;
        }
}

uint64_t kernel_output_message_bytes(const JupyterMsg *m) {
        uint64_t n;

        if (!is_output(jupyter_msg_type(m)))
                return 0;
        n = json_bytes(m->content);
        for (size_t i = 0; i < m->n_buffers; i++)
                n += m->buffers[i].iov_len;
        return n;
}

/* The entry of @parent, or a new one in a free slot or the least recently used one's. */
static OutputEntry *output_entry(KernelOutput *o, const char *parent) {
        OutputEntry *lru = &o->entries[0];
        char *copy;

        for (size_t i = 0; i < KERNEL_OUTPUT_TRACKED; i++) {
                OutputEntry *e = &o->entries[i];

                if (e->parent && streq(e->parent, parent)) {
                        e->last_use = ++o->clock;
                        return e;
                }
                if (!e->parent || (lru->parent && e->last_use < lru->last_use))
                        lru = e;
        }
        copy = strdup(parent);
        if (!copy)
                return NULL;
        free(lru->parent);
        *lru = (OutputEntry) { .parent = copy, .last_use = ++o->clock };
        return lru;
}

static int output_marker(const JupyterMsg *m, const char *session, uint64_t delivered, uint64_t max_bytes,
                         JupyterMsg **ret) {
        /* The marker's parent_header is the request's, as the output's was: jupyter_msg_new() takes
         * the header of its "parent". */
        const JupyterMsg parent = { .channel = JUPYTER_CHANNEL_SHELL, .header = m->parent_header };
        json_object *content = NULL;
        char text[160];

        (void) snprintf(text, sizeof(text),
                        "\n[sandbox-runner: output truncated after %" PRIu64 " bytes (MaxOutputBytes=%" PRIu64
                        "); the rest of this execution's output is dropped]\n", delivered, max_bytes);
        content = json_object_new_object();
        if (!content || json_add(content, "name", json_object_new_string("stderr")) < 0 ||
            json_add(content, "text", json_object_new_string(text)) < 0) {
                json_object_put(content);
                return -ENOMEM;
        }
        return jupyter_msg_new(JUPYTER_CHANNEL_IOPUB, "stream", session, &parent, content, ret);
}

int kernel_output_judge(KernelOutput *o, const JupyterMsg *m, const char *session, JupyterMsg **ret_marker,
                        uint64_t *ret_delivered) {
        const char *parent = jupyter_msg_parent_id(m);
        OutputEntry *e;
        uint64_t n;
        int r;

        if (o->max_bytes == 0 || !is_output(jupyter_msg_type(m)) || isempty(parent))
                return KERNEL_OUTPUT_PASS;
        e = output_entry(o, parent);
        if (!e)
                return -ENOMEM;
        if (e->truncated)
                return KERNEL_OUTPUT_DROP;
        n = kernel_output_message_bytes(m);
        if (n <= o->max_bytes - e->bytes) {     /* e->bytes never passes max_bytes */
                e->bytes += n;
                return KERNEL_OUTPUT_PASS;
        }
        r = output_marker(m, session, e->bytes, o->max_bytes, ret_marker);
        if (r < 0)
                return r;
        e->truncated = true;
        *ret_delivered = e->bytes;
        return KERNEL_OUTPUT_TRUNCATE;
}
