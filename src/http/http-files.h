/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Workspace file endpoints: streamed uploads (raw and multipart), downloads with digests, listing. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct HttpRequest HttpRequest;
typedef struct Manager Manager;

/* Begin hooks (headers in, no body yet): may reply; else set up the body sink. Return: body cap. */
uint64_t http_files_put_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens);
uint64_t http_files_post_begin(Manager *m, HttpRequest *req, const char **params, size_t *lens);

/* Dispatch (the whole body is in). */
void http_files_upload_finish(Manager *m, HttpRequest *req);
void http_files_get(Manager *m, HttpRequest *req, const char **params, size_t *lens);
void http_files_list(Manager *m, HttpRequest *req, const char **params, size_t *lens);
void http_files_delete(Manager *m, HttpRequest *req, const char **params, size_t *lens);
