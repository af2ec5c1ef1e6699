/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Request paths with escaped segments, the Repr-Digest header, writing, and clean-up on interrupt. */

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "ctl-util.h"
#include "exec-util.h"
#include "transfer.h"

SR_DEFINE_FREE_FUNC(CURL *, curl_easy_cleanup);

static int escape_with(CURL *curl, const char *s, size_t n, FILE *f) {
        char *e;

        if (n == 0)
                return 0;
        if (n > INT_MAX)
                return -ENOMEM;
        e = curl_easy_escape(curl, s, (int) n);
        if (!e)
                return -ENOMEM;
        fputs(e, f);
        curl_free(e);
        return 0;
}

static int escape(const char *s, bool keep_slash, char **ret) {
        _cleanup_(curl_easy_cleanupp) CURL *curl = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;
        int r = 0;

        /* libcurl before 7.82 wants a handle here (it does not use it for anything else). */
        curl = curl_easy_init();
        if (!curl)
                return -ENOMEM;
        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        for (const char *p = s;;) {
                size_t n = keep_slash ? strcspn(p, "/") : strlen(p);

                r = escape_with(curl, p, n, f);
                if (r < 0 || p[n] == '\0')
                        break;
                fputc('/', f);
                p += n + 1;
        }
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        *ret = STEAL(buf);
        return 0;
}

int transfer_escape_path(const char *path, char **ret) {
        return escape(path, true, ret);
}

int transfer_escape(const char *s, char **ret) {
        return escape(s, false, ret);
}

int transfer_repr_digest_sha256(const char *header, uint8_t ret[static TRANSFER_SHA256_SIZE]) {
        const char *p = header;

        /* A dictionary: member *( OWS "," OWS member ); a member is key[=value] *(;param). */
        while (*p) {
                size_t n = strcspn(p, ","), kl;
                const char *m = p, *end;

                p += n + (p[n] == ',');
                while (n > 0 && (*m == ' ' || *m == '\t')) {
                        m++;
                        n--;
                }
                end = m + n;
                while (end > m && (end[-1] == ' ' || end[-1] == '\t'))
                        end--;

                kl = strcspn(m, "=;,");
                if (kl != strlen("sha-256") || strncasecmp(m, "sha-256", kl) != 0 || m + kl >= end || m[kl] != '=')
                        continue;

                /* The value: a byte sequence, ":base64:", maybe followed by parameters. */
                {
                        _cleanup_free_ char *decoded = NULL;
                        const char *v = m + kl + 1, *close;
                        size_t size = 0;
                        int r;

                        if (v >= end || *v != ':')
                                return -EBADMSG;
                        v++;
                        close = memchr(v, ':', end - v);
                        if (!close)
                                return -EBADMSG;
                        r = exec_base64_decode(v, close - v, &decoded, &size);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0 || size != TRANSFER_SHA256_SIZE)
                                return -EBADMSG;
                        if (close + 1 != end && close[1] != ';')
                                return -EBADMSG;
                        memcpy(ret, decoded, TRANSFER_SHA256_SIZE);
                        return 0;
                }
        }
        return -ENOENT;
}

void transfer_hex(const uint8_t *p, size_t n, char *ret) {
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                ret[2 * i] = digits[p[i] >> 4];
                ret[2 * i + 1] = digits[p[i] & 0xf];
        }
        ret[2 * n] = '\0';
}

char *transfer_basename(const char *path) {
        size_t n = strlen(path), start;

        while (n > 0 && path[n - 1] == '/')
                n--;
        start = n;
        while (start > 0 && path[start - 1] != '/')
                start--;
        return strndup(path + start, n - start);
}

int transfer_write_all(int fd, const void *p, size_t n) {
        const char *q = p;

        while (n > 0) {
                ssize_t k = write(fd, q, n);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                q += k;
                n -= (size_t) k;
        }
        return 0;
}

/* ---- interrupts ------------------------------------------------------------------------------- */

static char interrupt_path[PATH_MAX];
static char interrupt_text[1024];
static volatile sig_atomic_t interrupt_path_set = 0, interrupt_text_set = 0;

static void on_interrupt(int sig) {
        int saved = errno;

        if (interrupt_path_set)
                (void) unlink(interrupt_path);
        if (interrupt_text_set) {
                size_t n = strlen(interrupt_text);
                (void) !write(STDERR_FILENO, interrupt_text, n);
        }
        errno = saved;
        /* Die of the signal, as the caller expects (the shell reports 128 + N). */
        (void) signal(sig, SIG_DFL);
        (void) raise(sig);
}

void transfer_interrupt_setup(void) {
        struct sigaction sa = { .sa_handler = on_interrupt };
        static bool done = false;
        static const int signals[] = { SIGINT, SIGTERM, SIGHUP };

        if (done)
                return;
        sigemptyset(&sa.sa_mask);
        /* Block the others while one is handled, so the file is unlinked once. */
        for (size_t i = 0; i < ELEMENTSOF(signals); i++)
                sigaddset(&sa.sa_mask, signals[i]);
        for (size_t i = 0; i < ELEMENTSOF(signals); i++) {
                struct sigaction old;

                /* A signal ignored from the start (nohup, a shell's background job) stays ignored. */
                if (sigaction(signals[i], NULL, &old) < 0 || old.sa_handler == SIG_IGN)
                        continue;
                (void) sigaction(signals[i], &sa, NULL);
        }
        done = true;
}

static void set_text(char *buf, size_t size, volatile sig_atomic_t *flag, const char *s) {
        sigset_t all, saved;

        sigfillset(&all);
        (void) sigprocmask(SIG_BLOCK, &all, &saved);
        *flag = 0;
        if (s && strlen(s) < size) {
                memcpy(buf, s, strlen(s) + 1);
                *flag = 1;
        }
        (void) sigprocmask(SIG_SETMASK, &saved, NULL);
}

void transfer_interrupt_unlink(const char *path) {
        set_text(interrupt_path, sizeof(interrupt_path), &interrupt_path_set, path);
}

void transfer_interrupt_message(const char *message) {
        set_text(interrupt_text, sizeof(interrupt_text), &interrupt_text_set, message);
}
