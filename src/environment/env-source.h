/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Where an environment's packages may come from, and what a request may ask for (DESIGN.md §14,
 * API.md "Environments"): the kinds, the index URL rules, the presets and their precedence, the
 * requirement specifiers a package list may hold, the conda channel allowlist and the offline
 * mode. Pure: no I/O. May call util/ and egress/ (the host-name rules of the egress policy, so
 * that an index host is held to the same rules as any host the gateway would reach).
 *
 * Each check refuses with -EINVAL and a static reason; the API answers each check's refusal with
 * its own error code: env_index_url_check() and an unknown preset `index_url_invalid`,
 * env_package_spec_check() `package_spec_invalid`, env_offline_check()
 * `source_offline_unsupported`, env_channel_check() `channel_not_allowed`.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum EnvKind {
        ENV_KIND_PYTHON,                /* a venv with pip */
        ENV_KIND_R,                     /* Debian's R with a site library */
        ENV_KIND_CONDA,                 /* micromamba, when the operator configured it */
        _ENV_KIND_MAX,
        _ENV_KIND_INVALID = -EINVAL,
} EnvKind;

const char *env_kind_to_string(EnvKind k);
EnvKind env_kind_from_string(const char *s);

/* The longest index URL or channel URL accepted. */
#define ENV_INDEX_URL_MAX 2048
/* The longest requirement specifier accepted. */
#define ENV_PACKAGE_SPEC_MAX 256

/*
 * env_index_url_check() - a package index URL as a request or the configuration gives it: at most
 * ENV_INDEX_URL_MAX bytes, printable ASCII only (no whitespace, no control bytes, no '\'), the
 * https scheme, no userinfo (no credentials in a URL: they would land in records and logs), no
 * query, no fragment, and a host that the egress policy's host-name rules accept (an ASCII DNS
 * name of two or more labels, no IP literal: egress_host_canonicalize_full()). Parsed with
 * http_parser_parse_url(); every field checked again here.
 * Return: 0, or -EINVAL with a static reason in *@ret_reason (if not NULL).
 */
int env_index_url_check(const char *url, const char **ret_reason);

/*
 * env_index_url_allow_entry() - env_index_url_check(), and the egress allowlist entry that lets a
 * provisioning sandbox reach the index and nothing else: its canonical host pinned to its port
 * ("pypi.org:443").
 * Return: 0 with *@ret_entry (allocated; not touched if @ret_entry is NULL), -EINVAL with a
 * reason, -ENOMEM.
 */
int env_index_url_allow_entry(const char *url, char **ret_entry, const char **ret_reason);

/*
 * env_preset_url() - the index (python) or channel base (conda) of the preset @name for @kind:
 * "upstream", "tuna", "ustc", "huaweicloud" (python only: conda has no Huawei Cloud preset).
 * Return: a static URL, or NULL for an unknown preset, one that @kind does not have, and for R
 * (whose sources are Debian's packages and CRAN, not presets).
 */
const char *env_preset_url(const char *name, EnvKind kind);

/*
 * env_source_resolve() - the index a setup uses, by precedence: the request's explicit URL
 * (@request_url, checked), then the request's preset, then the instance's global preset
 * (@global_preset, from the catalog), then "upstream".
 * Return: 0 with *@ret_url (static, or @request_url itself), or -EINVAL with a reason (a bad URL,
 * an unknown preset, or R, which has no index).
 */
int env_source_resolve(EnvKind kind, const char *request_url, const char *request_preset,
                       const char *global_preset, const char **ret_url, const char **ret_reason);

/*
 * env_package_spec_check() - one entry of a package list: a requirement specifier and nothing
 * else. A distribution name (letters and digits, with '.', '_', '-' inside), optional extras in
 * brackets, and optional version clauses (operators ==, !=, <=, >=, <, >, ~=, ===, each followed
 * by a version of letters, digits and '.', '*', '+', '!', '_', '-'), comma-separated, spaces
 * allowed around operators and commas. Refused: anything that starts with '-' (pip options:
 * "--index-url=...", "-e", "--extra-index-url"), URLs ("https://...", "git+...", "file:..."),
 * direct references ("name @ ..."), paths ('/', '\', a leading '.' or '~'), environment markers
 * (';'), control bytes and more than ENV_PACKAGE_SPEC_MAX bytes.
 * Return: 0, or -EINVAL with a static reason.
 */
int env_package_spec_check(const char *spec, const char **ret_reason);

/*
 * env_channel_check() - a conda channel is allowed only if it is in the operator's @allowlist
 * (NULL-terminated; NULL or empty: none is). Compared as written, after one trailing '/' is
 * dropped from either side.
 * Return: 0, or -EINVAL with a static reason.
 */
int env_channel_check(const char *channel, char *const *allowlist, const char **ret_reason);

/* What a setup asks for, for env_offline_check(). */
typedef struct EnvSourceRequest {
        EnvKind kind;
        const char *index_url;          /* an explicit index (python, conda channel base) */
        const char *preset;
        bool cran;                      /* R: packages from CRAN */
        bool bioconductor;              /* R: packages from Bioconductor */
        size_t n_channels;              /* conda: channels asked for */
} EnvSourceRequest;

/*
 * env_offline_check() - in offline mode a setup has no network at all: only local wheelhouses,
 * client wheels and Debian's packages. An index URL, a preset, CRAN, Bioconductor and conda
 * channels are refused with a reason that names what was asked for. Online, everything passes.
 * Return: 0, or -EINVAL with a static reason.
 */
int env_offline_check(const EnvSourceRequest *r, bool offline, const char **ret_reason);
