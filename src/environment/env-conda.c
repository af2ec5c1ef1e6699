/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The conda provisioner's command line (pure) and the SHA-256 check of the micromamba binary (one
 * file read): environment/env-conda.h. Calls util/, libc and nettle.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "environment/env-conda.h"
#include "util/fd-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/strv.h"

/* An absolute path without "//", "." or ".." components, a trailing '/' or control bytes. */
static bool path_normalised(const char *p) {
        if (!p || p[0] != '/' || p[1] == '\0')
                return false;
        for (p++; *p; ) {
                size_t l = strcspn(p, "/");

                if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                for (size_t i = 0; i < l; i++)
                        if ((unsigned char) p[i] < 0x20 || p[i] == 0x7f)
                                return false;
                p += l;
                if (*p == '/' && *++p == '\0')
                        return false;
        }
        return true;
}

/* One channel or package: not empty, not an option, no control bytes; channels no space either. */
static bool entry_valid(const char *s, bool space_ok) {
        if (isempty(s) || s[0] == '-')
                return false;
        for (const char *c = s; *c; c++)
                if ((unsigned char) *c < 0x20 || *c == 0x7f || (*c == ' ' && !space_ok))
                        return false;
        return true;
}

static bool list_valid(char *const *l, bool space_ok) {
        if (!l || !l[0])
                return false;
        for (; *l; l++)
                if (!entry_valid(*l, space_ok))
                        return false;
        return true;
}

static int add(char ***a, const char *const *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int r = strv_extend(a, items[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int env_conda_argv(const EnvCondaPlan *p, char ***ret_argv) {
        _cleanup_strv_free_ char **a = NULL;
        _cleanup_free_ char *root = NULL;
        size_t l;
        int r;

        if (!p || !ret_argv || !path_normalised(p->micromamba) || !path_normalised(p->prefix) ||
            !list_valid(p->channels, false) || !list_valid(p->packages, true))
                return -EINVAL;
        if (p->pkgs_dir) {
                /* The cache is <root>/pkgs: the root is its parent, not "/" itself. */
                l = strlen(p->pkgs_dir);
                if (!path_normalised(p->pkgs_dir) || l <= strlen("/pkgs") ||
                    !streq(p->pkgs_dir + l - strlen("/pkgs"), "/pkgs"))
                        return -EINVAL;
                root = strndup(p->pkgs_dir, l - strlen("/pkgs"));
        } else
                root = strdup(ENV_CONDA_ROOT_PREFIX);
        if (!root)
                return -ENOMEM;

        r = add(&a, (const char *const[]) {
                        p->micromamba, "create", "--yes", "--no-rc", "--no-env",
                        "--root-prefix", root, "--prefix", p->prefix,
                        "--override-channels", "--strict-channel-priority",
                        "--always-copy", "--safety-checks", "enabled" }, 14);
        for (char *const *c = p->channels; r >= 0 && *c; c++)
                r = add(&a, (const char *const[]) { "-c", *c }, 2);
        if (r >= 0 && p->offline)
                r = strv_extend(&a, "--offline");
        if (r >= 0)
                r = strv_extend(&a, "--");
        for (char *const *s = p->packages; r >= 0 && *s; s++)
                r = strv_extend(&a, *s);
        if (r < 0)
                return r;

        *ret_argv = STEAL(a);
        return 0;
}

static int verify_fail(const char **ret_reason, int r, const char *reason) {
        if (ret_reason)
                *ret_reason = reason;
        return r;
}

static bool hex_valid(const char *s) {
        if (!s || strlen(s) != 2 * SHA256_DIGEST_SIZE)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')))
                        return false;
        return true;
}

int env_micromamba_verify(const char *path, const char *sha256_hex, const char **ret_reason) {
        static const char hex[] = "0123456789abcdef";
        uint8_t digest[SHA256_DIGEST_SIZE], buf[64 * 1024];
        char got[2 * SHA256_DIGEST_SIZE + 1];
        _cleanup_close_ int fd = -EBADF;
        struct sha256_ctx h;
        struct stat st;
        ssize_t n;

        if (!hex_valid(sha256_hex))
                return verify_fail(ret_reason, -EINVAL, "bad configured hash");
        if (!path || path[0] != '/')
                return verify_fail(ret_reason, -EINVAL, "bad configured path");

        /* O_NONBLOCK: a FIFO put in its place must not hang the daemon (no effect on a file). */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                if (errno == ELOOP)
                        return verify_fail(ret_reason, -ELOOP, "is a symbolic link");
                return verify_fail(ret_reason, negative_errno(), "cannot be opened");
        }
        if (fstat(fd, &st) < 0)
                return verify_fail(ret_reason, negative_errno(), "cannot be examined");
        if (S_ISDIR(st.st_mode))
                return verify_fail(ret_reason, -EISDIR, "is a directory");
        if (!S_ISREG(st.st_mode))
                return verify_fail(ret_reason, -ENOEXEC, "not a regular file");

        sha256_init(&h);
        while ((n = loop_read(fd, buf, sizeof(buf))) > 0)
                sha256_update(&h, (size_t) n, buf);
        if (n < 0)
                return verify_fail(ret_reason, errno_from_ssize(n), "cannot be read");
        sha256_digest(&h, sizeof(digest), digest);

        for (size_t i = 0; i < sizeof(digest); i++) {
                got[2 * i] = hex[digest[i] >> 4];
                got[2 * i + 1] = hex[digest[i] & 15];
        }
        got[sizeof(got) - 1] = '\0';
        if (strcasecmp(got, sha256_hex) != 0)
                return verify_fail(ret_reason, -EBADMSG, "hash mismatch");
        return verify_fail(ret_reason, 0, NULL);
}
