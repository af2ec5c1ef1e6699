/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A kernel's connection file and socket names (kernel-connection.h). Pure but getrandom(). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kernel/kernel-connection.h"
#include "util/json-util.h"
#include "util/macro.h"
#include "util/string-util.h"

int kernel_connection_key_new(char ret[static KERNEL_KEY_LEN + 1]) {
        uint8_t b[KERNEL_KEY_LEN / 2];

        if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b))
                return negative_errno();
        hex_encode(b, sizeof(b), ret);
        explicit_bzero(b, sizeof(b));
        return 0;
}

unsigned kernel_connection_port(JupyterChannel c) {
        switch (c) {
        case JUPYTER_CHANNEL_SHELL:
                return 1;
        case JUPYTER_CHANNEL_IOPUB:
                return 2;
        case JUPYTER_CHANNEL_STDIN:
                return 3;
        case JUPYTER_CHANNEL_CONTROL:
                return 4;
        case _JUPYTER_CHANNEL_MAX:
        case _JUPYTER_CHANNEL_INVALID:
                break;
        }
        return 0;
}

json_object *kernel_connection_json(const char *key, const char *kernel_name) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "transport", json_object_new_string("ipc")) < 0 ||
            json_add(o, "ip", json_object_new_string(KERNEL_SANDBOX_IP)) < 0 ||
            json_add(o, "shell_port", json_object_new_int(kernel_connection_port(JUPYTER_CHANNEL_SHELL))) < 0 ||
            json_add(o, "iopub_port", json_object_new_int(kernel_connection_port(JUPYTER_CHANNEL_IOPUB))) < 0 ||
            json_add(o, "stdin_port", json_object_new_int(kernel_connection_port(JUPYTER_CHANNEL_STDIN))) < 0 ||
            json_add(o, "control_port", json_object_new_int(kernel_connection_port(JUPYTER_CHANNEL_CONTROL))) < 0 ||
            json_add(o, "hb_port", json_object_new_int(KERNEL_PORT_HB)) < 0 ||
            json_add(o, "key", json_object_new_string(key)) < 0 ||
            json_add(o, "signature_scheme", json_object_new_string("hmac-sha256")) < 0 ||
            json_add(o, "kernel_name", json_object_new_string(kernel_name ?: "")) < 0)
                return NULL;
        return STEAL(o);
}

int kernel_connection_endpoint(const char *host_dir, JupyterChannel c, char **ret) {
        unsigned port = kernel_connection_port(c);
        char *s;
        int n;

        if (port == 0)
                return -EINVAL;
        n = asprintf(&s, "ipc://%s/k-%u", host_dir, port);
        if (n < 0)
                return -ENOMEM;
        if ((size_t) n - strlen("ipc://") > KERNEL_SUN_PATH_MAX - 1) {
                free(s);
                return -ENAMETOOLONG;
        }
        *ret = s;
        return 0;
}
