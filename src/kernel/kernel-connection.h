/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A kernel's connection file and the daemon's ends of its sockets. The kernel sees its directory at
 * KERNEL_SANDBOX_DIR and binds Unix sockets there ("transport": "ipc", named <ip>-<port>); the
 * daemon reaches the same files through the host path of that directory. The ports are fixed,
 * so that both sides know the names before the kernel runs.
 */
#pragma once

#include <stddef.h>
#include <json-c/json.h>

#include "kernel/jupyter-msg.h"

#define KERNEL_SANDBOX_DIR "/run/kernel"
#define KERNEL_SANDBOX_IP KERNEL_SANDBOX_DIR "/k"
#define KERNEL_CONNECTION_FILE "connection.json"
#define KERNEL_SANDBOX_CONNECTION_FILE KERNEL_SANDBOX_DIR "/" KERNEL_CONNECTION_FILE
#define KERNEL_KEY_LEN 64               /* 32 random bytes, as hex */
#define KERNEL_PORT_HB 5

/* What a socket path may hold: sizeof(sun_path) - 1. */
#define KERNEL_SUN_PATH_MAX 107

/* kernel_connection_key_new() - a fresh HMAC key: 32 bytes from getrandom(), hex. Return: 0 or -errno. */
int kernel_connection_key_new(char ret[static KERNEL_KEY_LEN + 1]);

/* kernel_connection_port() - the fixed port of @c's socket (1 to 4). */
unsigned kernel_connection_port(JupyterChannel c);

/* kernel_connection_json() - the connection file's object (ipc, KERNEL_SANDBOX_IP, the ports,
 * hmac-sha256 with @key). Return: NULL on OOM. */
json_object *kernel_connection_json(const char *key, const char *kernel_name);

/* kernel_connection_endpoint() - "ipc://<host_dir>/k-<port>" for @c. Return: 0, -ENAMETOOLONG if
 * the socket path would not fit sun_path, -ENOMEM. */
int kernel_connection_endpoint(const char *host_dir, JupyterChannel c, char **ret);
