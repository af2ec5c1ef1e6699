/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Environment sources: kinds, index URLs, presets, package specifiers, channels, offline mode. */

#include <errno.h>
#include <stdio.h>
#include <http_parser.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress-policy.h"
#include "environment/env-source.h"
#include "util/macro.h"
#include "util/string-table.h"

static const char *const env_kind_table[_ENV_KIND_MAX] = {
        [ENV_KIND_PYTHON] = "python",
        [ENV_KIND_R] = "r",
        [ENV_KIND_CONDA] = "conda",
};

DEFINE_STRING_TABLE_LOOKUP(env_kind, EnvKind);

static int refuse(const char **ret_reason, const char *why) {
        if (ret_reason)
                *ret_reason = why;
        return -EINVAL;
}

/* ---- index URLs -------------------------------------------------------------------------------- */

int env_index_url_check(const char *url, const char **ret_reason) {
        return env_index_url_allow_entry(url, NULL, ret_reason);
}

int env_index_url_allow_entry(const char *url, char **ret_entry, const char **ret_reason) {
        _cleanup_free_ char *host = NULL, *canonical = NULL;
        struct http_parser_url u;
        const char *why = NULL;
        size_t n;
        int r;

        if (!url || !*url)
                return refuse(ret_reason, "the index URL is empty");
        n = strlen(url);
        if (n > ENV_INDEX_URL_MAX)
                return refuse(ret_reason, "the index URL is longer than 2048 bytes");
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) url[i];

                if (c <= 0x20 || c >= 0x7f)
                        return refuse(ret_reason, "the index URL holds whitespace, a control byte or a non-ASCII byte");
                if (c == '\\')
                        return refuse(ret_reason, "the index URL holds a backslash");
        }
        if (strncasecmp(url, "https://", 8) != 0)
                return refuse(ret_reason, "the index URL must use https");

        http_parser_url_init(&u);
        if (http_parser_parse_url(url, n, 0, &u) != 0)
                return refuse(ret_reason, "the index URL is malformed");
        if (u.field_set & (1 << UF_USERINFO) || memchr(url, '@', n))
                return refuse(ret_reason, "the index URL holds credentials (userinfo)");
        if (u.field_set & (1 << UF_QUERY) || memchr(url, '?', n))
                return refuse(ret_reason, "the index URL has a query");
        if (u.field_set & (1 << UF_FRAGMENT) || memchr(url, '#', n))
                return refuse(ret_reason, "the index URL has a fragment");
        if (!(u.field_set & (1 << UF_HOST)) || u.field_data[UF_HOST].len == 0)
                return refuse(ret_reason, "the index URL has no host");
        if ((u.field_set & (1 << UF_PORT)) && u.port == 0)
                return refuse(ret_reason, "the index URL's port must be 1-65535");

        host = strndup(url + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len);
        if (!host)
                return -ENOMEM;
        r = egress_host_canonicalize_full(host, &canonical, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(ret_reason, why ?: "the index URL's host is not a valid host name");
        if (ret_entry &&
            asprintf(ret_entry, "%s:%u", canonical, (u.field_set & (1 << UF_PORT)) ? (unsigned) u.port : 443U) < 0)
                return -ENOMEM;
        return 0;
}

/* ---- presets ------------------------------------------------------------------------------------ */

static const struct {
        const char *name;
        const char *python;             /* a PEP 503 simple index */
        const char *conda;              /* a channel base; NULL: no such preset for conda */
} presets[] = {
        { "upstream",    "https://pypi.org/simple",                            "https://conda.anaconda.org" },
        { "tuna",        "https://pypi.tuna.tsinghua.edu.cn/simple",           "https://mirrors.tuna.tsinghua.edu.cn/anaconda" },
        { "ustc",        "https://mirrors.ustc.edu.cn/pypi/simple",            "https://mirrors.ustc.edu.cn/anaconda" },
        { "huaweicloud", "https://repo.huaweicloud.com/repository/pypi/simple", NULL },
};

const char *env_preset_url(const char *name, EnvKind kind) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(presets); i++)
                if (streq(presets[i].name, name))
                        return kind == ENV_KIND_PYTHON ? presets[i].python :
                               kind == ENV_KIND_CONDA ? presets[i].conda : NULL;
        return NULL;
}

int env_source_resolve(EnvKind kind, const char *request_url, const char *request_preset,
                       const char *global_preset, const char **ret_url, const char **ret_reason) {
        const char *url;
        int r;

        if (kind != ENV_KIND_PYTHON && kind != ENV_KIND_CONDA)
                return refuse(ret_reason, "this kind of environment takes no index");
        if (request_url) {
                r = env_index_url_check(request_url, ret_reason);
                if (r < 0)
                        return r;
                *ret_url = request_url;
                return 0;
        }
        if (request_preset || global_preset) {
                const char *name = request_preset ?: global_preset;

                url = env_preset_url(name, kind);
                if (!url)
                        return refuse(ret_reason, kind == ENV_KIND_CONDA && streq(name, "huaweicloud") ?
                                      "the preset huaweicloud has no conda channels" : "unknown preset");
                *ret_url = url;
                return 0;
        }
        *ret_url = env_preset_url("upstream", kind);
        return 0;
}

/* ---- package specifiers ------------------------------------------------------------------------- */

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static const char *skip_spaces(const char *p) {
        while (*p == ' ')
                p++;
        return p;
}

/* A name: alphanumeric at both ends, '.', '_', '-' inside (PEP 508). Return: past it, or NULL. */
static const char *parse_name(const char *p) {
        const char *start = p;

        if (!is_alnum(*p))
                return NULL;
        while (is_alnum(*p) || *p == '.' || *p == '_' || *p == '-')
                p++;
        return is_alnum(p[-1]) && p > start ? p : NULL;
}

/* "[extra, extra]". Return: past it, or NULL. */
static const char *parse_extras(const char *p) {
        p = skip_spaces(p + 1);
        for (;;) {
                p = parse_name(p);
                if (!p)
                        return NULL;
                p = skip_spaces(p);
                if (*p == ']')
                        return p + 1;
                if (*p != ',')
                        return NULL;
                p = skip_spaces(p + 1);
        }
}

/* One clause: an operator and a version. Return: past it, or NULL. */
static const char *parse_clause(const char *p) {
        static const char *const ops[] = { "===", "==", "!=", "<=", ">=", "~=", "<", ">" };
        const char *start;

        for (size_t i = 0; i < ELEMENTSOF(ops); i++)
                if (strncmp(p, ops[i], strlen(ops[i])) == 0) {
                        p = skip_spaces(p + strlen(ops[i]));
                        start = p;
                        while (is_alnum(*p) || (*p && strchr(".*+!_-", *p)))
                                p++;
                        return p > start ? p : NULL;
                }
        return NULL;
}

int env_package_spec_check(const char *spec, const char **ret_reason) {
        const char *p;

        if (!spec || !*spec)
                return refuse(ret_reason, "the package specifier is empty");
        if (strlen(spec) > ENV_PACKAGE_SPEC_MAX)
                return refuse(ret_reason, "the package specifier is longer than 256 bytes");
        if (spec[0] == '-')
                return refuse(ret_reason, "a package specifier may not start with '-' (no installer options)");
        if (strstr(spec, "://") || strncmp(spec, "git+", 4) == 0 || strncmp(spec, "file:", 5) == 0)
                return refuse(ret_reason, "a package specifier may not be a URL");
        if (spec[0] == '.' || spec[0] == '~' || strchr(spec, '/') || strchr(spec, '\\'))
                return refuse(ret_reason, "a package specifier may not be a path");
        if (strchr(spec, '@'))
                return refuse(ret_reason, "a package specifier may not be a direct reference ('@')");
        if (strchr(spec, ';'))
                return refuse(ret_reason, "a package specifier may not carry an environment marker (';')");

        p = parse_name(spec);
        if (!p)
                return refuse(ret_reason, "a package specifier starts with a distribution name (letters, digits, '.', '_', '-')");
        p = skip_spaces(p);
        if (*p == '[') {
                p = parse_extras(p);
                if (!p)
                        return refuse(ret_reason, "malformed extras");
                p = skip_spaces(p);
        }
        if (*p == '\0')
                return 0;
        for (;;) {
                p = parse_clause(p);
                if (!p)
                        return refuse(ret_reason, "malformed version clause (==, !=, <=, >=, <, >, ~=, === and a version)");
                p = skip_spaces(p);
                if (*p == '\0')
                        return 0;
                if (*p != ',')
                        return refuse(ret_reason, "version clauses are separated by ','");
                p = skip_spaces(p + 1);
        }
}

/* ---- channels and offline mode ------------------------------------------------------------------ */

static size_t len_without_slash(const char *s) {
        size_t n = strlen(s);

        return n > 0 && s[n - 1] == '/' ? n - 1 : n;
}

int env_channel_check(const char *channel, char *const *allowlist, const char **ret_reason) {
        size_t n;

        if (!channel || !*channel)
                return refuse(ret_reason, "the channel is empty");
        n = len_without_slash(channel);
        for (char *const *a = allowlist; a && *a; a++)
                if (len_without_slash(*a) == n && strncmp(*a, channel, n) == 0)
                        return 0;
        return refuse(ret_reason, "the channel is not in the operator's allowlist ([Environments] Channels=)");
}

int env_offline_check(const EnvSourceRequest *r, bool offline, const char **ret_reason) {
        if (!offline)
                return 0;
        if (r->index_url)
                return refuse(ret_reason, "offline mode: no index URL (use a wheelhouse or client wheels)");
        if (r->preset)
                return refuse(ret_reason, "offline mode: no preset (use a wheelhouse or client wheels)");
        if (r->cran)
                return refuse(ret_reason, "offline mode: CRAN cannot be reached (Debian's r-cran-* packages only)");
        if (r->bioconductor)
                return refuse(ret_reason, "offline mode: Bioconductor cannot be reached (Debian's r-bioc-* packages only)");
        if (r->n_channels > 0)
                return refuse(ret_reason, "offline mode: conda channels cannot be reached");
        return 0;
}
