/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who is on the other end of a gateway connection: the execution whose scope holds the peer. */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/peer.h"
#include "sandbox/scope.h"
#include "util/io-util.h"
#include "util/macro.h"

#define CGROUP_FILE_MAX (64U * 1024U)
#define EXECUTION_ID_MAX 200U

static bool id_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.' || c == ':';
}

int peer_execution_id_from_cgroup(const char *text, char **ret) {
        static const char prefix[] = SCOPE_PREFIX;
        static const char suffix[] = ".scope";

        for (const char *p = text; p && *p;) {
                size_t n = strcspn(p, "/\n");

                if (n > strlen(prefix) + strlen(suffix) &&
                    strneq(p, prefix, strlen(prefix)) &&
                    strneq(p + n - strlen(suffix), suffix, strlen(suffix))) {
                        const char *id = p + strlen(prefix);
                        size_t len = n - strlen(prefix) - strlen(suffix);
                        bool ok = len <= EXECUTION_ID_MAX;

                        for (size_t i = 0; ok && i < len; i++)
                                ok = id_char_ok(id[i]);
                        if (ok) {
                                char *s = strndup(id, len);
                                if (!s)
                                        return -ENOMEM;
                                *ret = s;
                                return 0;
                        }
                }
                p += n;
                if (*p)
                        p++;
        }
        return -ENOENT;
}

static int read_cgroup_file(pid_t pid, char **ret) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        char path[64];
        ssize_t size;

        (void) snprintf(path, sizeof(path), "/proc/%i/cgroup", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        buf = malloc(CGROUP_FILE_MAX + 1);
        if (!buf)
                return -ENOMEM;
        size = loop_read(fd, buf, CGROUP_FILE_MAX);
        if (size < 0)
                return errno_from_ssize(size);
        buf[size] = '\0';
        *ret = STEAL(buf);
        return 0;
}

int peer_execution_id(int fd, char **ret) {
        _cleanup_free_ char *text = NULL;
        struct ucred cred = {};
        socklen_t len = sizeof(cred);
        char *id;
        int r;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) >= 0 && cred.pid > 0 &&
            read_cgroup_file(cred.pid, &text) >= 0) {
                r = peer_execution_id_from_cgroup(text, ret);
                if (r != -ENOENT)
                        return r;
        }
        id = strdup("unknown");
        if (!id)
                return -ENOMEM;
        *ret = id;
        return 0;
}
