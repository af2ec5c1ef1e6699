/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What jupyter-msg.c and jupyter-ws.c share: parsing of one JSON part, a message from its parts. */
#pragma once

#include <sys/uio.h>
#include <json-c/json.h>

#include "kernel/jupyter-msg.h"

#define JUPYTER_PROTOCOL_VERSION "5.3"
/* Nesting the parsers accept in one part: display data and user_expressions nest, a stack does not. */
#define JUPYTER_JSON_MAX_DEPTH 128
/* "2026-12-03T17:41:52.123456Z" */
#define JUPYTER_DATE_LEN 27

/* jupyter_date_now() - the current time as ISO 8601 with microseconds and Z. Return: 0 or -errno. */
int jupyter_date_now(char ret[static JUPYTER_DATE_LEN + 1]);

/* jupyter_json_part() - @len bytes of strict JSON (UTF-8, no raw control characters) that must be an
 * object. Return: 0, -ENOMEM, -EBADMSG with a static reason in @ret_error. */
int jupyter_json_part(const void *data, size_t len, json_object **ret, const char **ret_error);

/* jupyter_msg_check_header() - header.msg_id and header.msg_type are strings. Return: 0 or -EBADMSG. */
int jupyter_msg_check_header(const JupyterMsg *m, const char **ret_error);

/* jupyter_msg_from_parts() - header, parent_header, metadata, content as JSON text, then buffers
 * (copied). Return: 0, -ENOMEM, -EBADMSG with @ret_error. */
int jupyter_msg_from_parts(JupyterChannel channel, const struct iovec *parts, size_t n_parts,
                           JupyterMsg **ret, const char **ret_error);
