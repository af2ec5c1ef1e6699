/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The client wheels of the environments' store (env-store.h): wheels/<sha256>/<file>, hashed
 * with nettle's SHA-256 while they are copied in. May call util/ and the store's internals
 * (env-store-internal.h).
 */

#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "environment/env-store-internal.h"
#include "environment/env-store.h"
#include "util/io-util.h"
#include "util/macro.h"

#define COPY_BUFFER (64U * 1024U)

/* Copy @fd from offset 0 into @out, hashing it; the lowercase hex digest into @hex. */
static int copy_hashing(int fd, int out, char hex[static SHA256_DIGEST_SIZE * 2 + 1]) {
        _cleanup_free_ uint8_t *buf = malloc(COPY_BUFFER);
        uint8_t digest[SHA256_DIGEST_SIZE];
        struct sha256_ctx ctx;
        off_t offset = 0;
        int r;

        if (!buf)
                return -ENOMEM;
        sha256_init(&ctx);
        for (;;) {
                ssize_t n = pread(fd, buf, COPY_BUFFER, offset);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        break;
                sha256_update(&ctx, (size_t) n, buf);
                r = loop_write(out, buf, (size_t) n);
                if (r < 0)
                        return r;
                offset += n;
        }
        sha256_digest(&ctx, sizeof(digest), digest);
        for (size_t i = 0; i < sizeof(digest); i++)
                (void) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        return 0;
}

int env_store_wheel_add(EnvStore *s, int fd, const char *file_name, EnvWheel *ret) {
        _cleanup_(env_wheel_done) EnvWheel w = {};
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int out = -EBADF, hash_fd = -EBADF;
        char hex[SHA256_DIGEST_SIZE * 2 + 1];
        bool kept = false;
        struct stat st;
        int r;

        if (!env_wheel_file_valid(file_name))
                return -EINVAL;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        r = env_store_random_name(ENV_STORE_TMP_PREFIX "wheel-", &tmp);
        if (r < 0)
                return r;
        out = openat(s->wheels_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, ENV_STORE_WHEEL_MODE);
        if (out < 0)
                return negative_errno();
        r = copy_hashing(fd, out, hex);
        if (r >= 0 && fchmod(out, ENV_STORE_WHEEL_MODE) < 0)
                r = negative_errno();
        if (r >= 0 && fsync(out) < 0)
                r = negative_errno();
        if (r >= 0) {
                hash_fd = env_store_mkdir_open(s->wheels_fd, hex, ENV_STORE_PREFIX_MODE);
                r = hash_fd < 0 ? hash_fd : 0;
        }
        if (r >= 0 && fstatat(hash_fd, file_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode))
                kept = true;            /* the same bytes under the same name: that copy stays */
        else if (r >= 0 && renameat(s->wheels_fd, tmp, hash_fd, file_name) < 0)
                r = negative_errno();
        if (r < 0 || kept)
                (void) unlinkat(s->wheels_fd, tmp, 0);
        if (r < 0)
                return r;
        if (!kept && (fsync(hash_fd) < 0 || fsync(s->wheels_fd) < 0))
                return negative_errno();

        w.sha256 = strdup(hex);
        w.file = strdup(file_name);
        if (!w.sha256 || !w.file)
                return -ENOMEM;
        if (ret) {
                *ret = w;
                w = (EnvWheel) {};
        }
        return 0;
}

char *env_store_wheel_path(EnvStore *s, const EnvWheel *w) {
        char *p;

        if (!env_sha256_valid(w->sha256) || !env_wheel_file_valid(w->file))
                return NULL;
        if (asprintf(&p, "%s/wheels/%s/%s", s->root, w->sha256, w->file) < 0)
                return NULL;
        return p;
}
