/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Finds and reads the CLI's secrets; buffers that held a secret are zeroed before they are freed. */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/io-util.h"
#include "credentials.h"

static void erase_and_freep_sized(char **p) {
        /* For buffers that may hold a secret but are not NUL-terminated at their end. */
        if (*p) {
                explicit_bzero(*p, CREDENTIAL_SIZE_MAX + 1);
                free(*p);
        }
        *p = NULL;
}

size_t credential_strip(char *s, size_t size) {
        while (size > 0 && strchr(" \t\r\n\v\f", s[size - 1]) && s[size - 1] != '\0') {
                s[size - 1] = '\0';
                size--;
        }
        return size;
}

static int validate(const char *s, size_t size, bool text) {
        if (size == 0)
                return -ENODATA;

        for (size_t i = 0; i < size; i++) {
                unsigned char c = s[i];

                /* A NUL would silently shorten the secret; refuse it in binary keys as well. */
                if (c == '\0')
                        return -EBADMSG;
                if (text && (c <= 0x20 || c >= 0x7f))
                        return -EBADMSG;
        }
        return 0;
}

int credential_read_file(const char *path, bool text, char **ret, size_t *ret_size) {
        _cleanup_(erase_and_freep_sized) char *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;
        size_t size;
        char *s;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();

        buf = calloc(1, CREDENTIAL_SIZE_MAX + 1);
        if (!buf)
                return -ENOMEM;

        /* Read one byte more than allowed to tell "exactly the limit" from "too big". */
        n = loop_read(fd, buf, CREDENTIAL_SIZE_MAX + 1);
        if (n < 0)
                return errno_from_ssize(n);
        size = (size_t) n;
        if (size > CREDENTIAL_SIZE_MAX)
                return -EFBIG;

        size = credential_strip(buf, size);
        r = validate(buf, size, text);
        if (r < 0)
                return r;

        s = malloc(size + 1);
        if (!s)
                return -ENOMEM;
        memcpy(s, buf, size);
        s[size] = '\0';

        *ret = s;
        if (ret_size)
                *ret_size = size;
        return 0;
}

static int from_env_value(const char *value, bool text, char **ret, size_t *ret_size) {
        size_t size;
        char *s;
        int r;

        s = strdup(value);
        if (!s)
                return -ENOMEM;

        size = credential_strip(s, strlen(s));
        r = validate(s, size, text);
        if (r < 0) {
                erase_and_free(s);
                return r;
        }

        *ret = s;
        if (ret_size)
                *ret_size = size;
        return 0;
}

static int set_source(char **ret_source, const char *fmt, const char *a, const char *b) {
        if (!ret_source)
                return 0;

        free(*ret_source);
        *ret_source = NULL;
        if (asprintf(ret_source, fmt, a, b) < 0) {
                *ret_source = NULL;
                return -ENOMEM;
        }
        return 0;
}

static bool error_is_absent(int r) {
        /* "if readable": a missing file, a missing directory or no permission means "not here". */
        return r == -ENOENT || r == -ENOTDIR || r == -EACCES || r == -EPERM;
}

int credential_find(const CredentialSpec *spec, char **ret, size_t *ret_size, char **ret_source) {
        _cleanup_free_ char *path = NULL;
        const char *e;
        int r;

        if (ret_source)
                *ret_source = NULL;

        if (spec->explicit_file) {
                r = set_source(ret_source, "%s %s", spec->option_name, spec->explicit_file);
                if (r < 0)
                        return r;
                return credential_read_file(spec->explicit_file, spec->text, ret, ret_size);
        }

        e = spec->env_value ? getenv(spec->env_value) : NULL;
        if (!isempty(e)) {
                r = set_source(ret_source, "$%s%s", spec->env_value, "");
                if (r < 0)
                        return r;
                return from_env_value(e, spec->text, ret, ret_size);
        }

        e = spec->env_file ? getenv(spec->env_file) : NULL;
        if (!isempty(e)) {
                r = set_source(ret_source, "$%s (%s)", spec->env_file, e);
                if (r < 0)
                        return r;
                return credential_read_file(e, spec->text, ret, ret_size);
        }

        /* The implicit locations: used only when they are there and readable by us. */
        const char *dirs[] = { getenv("CREDENTIALS_DIRECTORY"), spec->fallback_dir };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                if (isempty(dirs[i]))
                        continue;

                free(path);
                if (asprintf(&path, "%s/%s", dirs[i], spec->credential_name) < 0) {
                        path = NULL;
                        return -ENOMEM;
                }

                r = credential_read_file(path, spec->text, ret, ret_size);
                if (error_is_absent(r))
                        continue;

                if (set_source(ret_source, "%s%s", path, "") < 0) {
                        if (r >= 0)
                                erase_and_free(*ret);
                        return -ENOMEM;
                }
                return r;
        }

        return -ENOKEY;
}
