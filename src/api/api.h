/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The HTTP API: the entry points the server calls for every request (route table, authentication
 * order, body checks, then the resource's handler), and the revision refs the API takes.
 */
#pragma once

#include <stdint.h>
#include <stddef.h>

typedef struct HttpRequest HttpRequest;

/* Entry points for HttpServerCallbacks; @userdata is the Manager. */
uint64_t http_api_begin(HttpRequest *req, void *userdata);
void http_api_dispatch(HttpRequest *req, void *userdata);

/*
 * http_revision_ref_parse() - the execution id of a revision ref of workspace @ws: @ref (@len
 * bytes, not NUL-terminated) is either an execution id, or "workspace/<ws>/<executionId>" as
 * GET /workspaces/{ws}/revisions lists it. The id goes to @ret_id.
 * Return: 0; -EXDEV when the ref names another workspace; -EINVAL when it is malformed (not an
 * id, or a "workspace/" ref without exactly two more segments, or with an invalid id).
 */
int http_revision_ref_parse(const char *ref, size_t len, const char *ws, char ret_id[static 129]);
