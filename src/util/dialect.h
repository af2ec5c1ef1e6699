/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The API dialects a listener can speak: our own (the default) and the ScienceDiscovery runner
 * protocol. Chosen per listener: a socket's FileDescriptorName=, or a "NAME=ADDRESS" listen
 * address. Pure.
 */
#pragma once

typedef enum HttpDialect {
        HTTP_DIALECT_NATIVE,            /* 0: also every listener that names no dialect */
        HTTP_DIALECT_SCIENCEDISCOVERY,
        _HTTP_DIALECT_MAX,
        _HTTP_DIALECT_INVALID = -22,
} HttpDialect;

const char *http_dialect_to_string(HttpDialect d);

/*
 * http_dialect_from_fd_name() - the dialect of a socket systemd passed with FileDescriptorName=
 * @name: "sciencediscovery" for that dialect; anything else (NULL, "api", "unknown", the socket
 * unit's name) is our own API, as before.
 */
HttpDialect http_dialect_from_fd_name(const char *name);

/*
 * http_dialect_split_listen() - split a listen address "DIALECT=ADDRESS" ("api=…" or
 * "sciencediscovery=…") into its dialect and address; an address without a known "DIALECT="
 * prefix is our own API's, all of @spec being the address. @ret_address points into @spec.
 * Return: the dialect.
 */
HttpDialect http_dialect_split_listen(const char *spec, const char **ret_address);
