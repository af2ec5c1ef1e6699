/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Kernel Gateway API (issue 22): its entry points for the HTTP server, called by api-routes.c
 * for the paths that are its own when the kernels are enabled. @userdata is the Manager.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct HttpRequest HttpRequest;

/* kg_api_path() - whether @path is the Kernel Gateway's: /api, /api/kernels..., /api/kernelspecs...,
 * /api/sessions..., /kernelspecs... (/api/network-policy and /api/quota-settings stay ours). */
bool kg_api_path(const char *path);
uint64_t kg_api_begin(HttpRequest *req, void *userdata);
void kg_api_dispatch(HttpRequest *req, void *userdata);
