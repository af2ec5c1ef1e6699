/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ScienceDiscovery dialect's entry points: our own API's begin() and dispatch() (api-routes.c)
 * hand over the requests of listeners tagged HTTP_DIALECT_SCIENCEDISCOVERY. @userdata: the Manager.
 */
#pragma once

#include <stdint.h>

typedef struct HttpRequest HttpRequest;

uint64_t sdp_api_begin(HttpRequest *req, void *userdata);
void sdp_api_dispatch(HttpRequest *req, void *userdata);
