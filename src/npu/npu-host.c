/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host's NPU device nodes, its chips' state (DCMI, else npu-smi), and bounded program runs. */

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npu/npu-host.h"
#include "util/dirent-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"
#include "util/strv.h"
#include "util/time-util.h"

/* The bytes of stderr kept to find its last line, and the longest last line reported. */
#define RUN_ERR_TAIL 4096
#define RUN_ERR_LINE_MAX 512
/* The most devices one card may report through DCMI (a 910B card has 1, a 310P or A3 card 2). */
#define DCMI_DEVICES_PER_CARD_MAX 16

/* ---- device nodes ----------------------------------------------------------------------------- */

/* "davinci" + 1-9 decimal digits without a leading zero: the N. */
static bool chip_node_name(const char *name, unsigned *ret) {
        const char *d;
        unsigned v = 0;
        size_t n;

        if (!strneq(name, "davinci", 7))
                return false;
        d = name + 7;
        n = strlen(d);
        if (n == 0 || n > 9 || (n > 1 && d[0] == '0'))
                return false;
        for (size_t i = 0; i < n; i++) {
                if (d[i] < '0' || d[i] > '9')
                        return false;
                v = v * 10 + (unsigned) (d[i] - '0');
        }
        *ret = v;
        return true;
}

static bool is_char_device_at(int dfd, const char *name) {
        struct stat st;

        return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode);
}

static int unsigned_compare(const void *a, const void *b) {
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;

        return x < y ? -1 : x > y;
}

/* The reason of a failed scan of @device_root, naming it (what users see in /npu/chips and /health). */
static int scan_refuse(char **ret_why, int error, const char *device_root, const char *what) {
        if (error == -ENOMEM || !ret_why)
                return error;
        if (error == -E2BIG)
                return set_message(ret_why, error,
                                   "the NPU device root '%s' ([NPU] DeviceRoot=) has more than %d chips",
                                   device_root, NPU_SMI_CHIPS_MAX);
        return set_message(ret_why, error, "cannot %s the NPU device root '%s' ([NPU] DeviceRoot=): %s", what,
                           device_root, strerror(-error));
}

int npu_host_scan_nodes(const char *device_root, NpuHostNodes *ret, char **ret_why) {
        static const char *const mgmt_names[] = { NPU_MGMT_NODES };
        bool mgmt_found[ELEMENTSOF(mgmt_names)] = {};
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_free_ unsigned *chips = NULL;
        _cleanup_strv_free_ char **mgmt = NULL;
        size_t n = 0;
        int r;

        if (!device_root || !ret)
                return -EINVAL;
        d = opendir(device_root);
        if (!d)
                return scan_refuse(ret_why, negative_errno(), device_root, "open");
        chips = malloc(NPU_SMI_CHIPS_MAX * sizeof(unsigned));
        mgmt = calloc(1, sizeof(char *));
        if (!chips || !mgmt)
                return -ENOMEM;

        for (;;) {
                struct dirent *de;
                unsigned v;

                r = readdir_no_dot(d, &de);
                if (r < 0)
                        return scan_refuse(ret_why, r, device_root, "read");
                if (r == 0)
                        break;
                if (chip_node_name(de->d_name, &v)) {
                        if (!is_char_device_at(dirfd(d), de->d_name))
                                continue;
                        if (n >= NPU_SMI_CHIPS_MAX)
                                return scan_refuse(ret_why, -E2BIG, device_root, "read");
                        chips[n++] = v;         /* names are unique in a directory: so are the ids */
                        continue;
                }
                for (size_t i = 0; i < ELEMENTSOF(mgmt_names); i++)
                        if (streq(de->d_name, mgmt_names[i]))
                                mgmt_found[i] = is_char_device_at(dirfd(d), de->d_name);
        }

        for (size_t i = 0; i < ELEMENTSOF(mgmt_names); i++) {
                if (!mgmt_found[i])
                        continue;
                r = strv_extend(&mgmt, mgmt_names[i]);
                if (r < 0)
                        return r;
        }
        if (n > 1)
                qsort(chips, n, sizeof(unsigned), unsigned_compare);
        *ret = (NpuHostNodes) { .chips = STEAL(chips), .n_chips = n, .mgmt = STEAL(mgmt) };
        return 0;
}

void npu_host_nodes_done(NpuHostNodes *n) {
        if (!n)
                return;
        free(n->chips);
        strv_free(n->mgmt);
        *n = (NpuHostNodes) {};
}

/* ---- running a program ------------------------------------------------------------------------ */

static int pidfd_open_(pid_t pid) {
        return (int) syscall(SYS_pidfd_open, pid, 0);
}

/* run_child() - in the child after fork(): stdio, signals, process group, exec. Never returns; an
 * exec failure's errno goes to @exec_fd (CLOEXEC: closed without a word when exec succeeds). */
static void run_child(char *const *argv, int out_fd, int err_fd, int exec_fd) {
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigset_t none;
        int null_fd, e;

        (void) setpgid(0, 0);
        for (int sig = 1; sig < NSIG; sig++)
                (void) sigaction(sig, &sa, NULL);       /* SIGKILL, SIGSTOP, glibc's own: EINVAL, fine */
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);

        /* Above 2 first, so that dup2() onto 0-2 never overwrites one of them (a daemon started
         * with its stdio closed gets pipes as fds 0-2). */
        exec_fd = fcntl(exec_fd, F_DUPFD_CLOEXEC, 3);
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        null_fd = null_fd >= 0 ? fcntl(null_fd, F_DUPFD_CLOEXEC, 3) : -1;
        out_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
        err_fd = fcntl(err_fd, F_DUPFD_CLOEXEC, 3);
        if (exec_fd < 0)
                _exit(127);
        if (null_fd < 0 || out_fd < 0 || err_fd < 0 ||
            dup2(null_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0) {
                e = errno;
                (void) !write(exec_fd, &e, sizeof(e));
                _exit(127);
        }
        (void) close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);        /* exec_fd too: it is closed by the exec */
        execvp(argv[0], argv);
        e = errno;
        (void) !write(exec_fd, &e, sizeof(e));
        _exit(127);
}

typedef struct Capture {
        int out_fd, err_fd, exec_fd, pidfd;
        pid_t pid;
        uint64_t deadline;              /* CLOCK_MONOTONIC; UINT64_MAX: none */
        char *out;
        size_t out_len, out_alloc;
        char err[RUN_ERR_TAIL];         /* the last bytes of stderr */
        size_t err_len;
        int exec_errno;
        int status;                     /* from waitpid() */
        bool exited, timed_out, overflow;
} Capture;

static void capture_done(Capture *c) {
        c->out_fd = safe_close(c->out_fd);
        c->err_fd = safe_close(c->err_fd);
        c->exec_fd = safe_close(c->exec_fd);
        c->pidfd = safe_close(c->pidfd);
        c->out = mfree(c->out);
}

/* capture_read() - one read() from the readable fd @fd. Return: 0, or 1 at its end of file (the fd
 * is then closed), or -errno. */
static int capture_read(Capture *c, int *fd) {
        char buf[RUN_ERR_TAIL];
        ssize_t n;

        if (*fd == c->out_fd) {
                size_t want = NPU_RUN_OUTPUT_MAX + 1 - c->out_len;

                if (c->out_alloc - c->out_len < MIN(want, (size_t) 4096) + 1) {
                        size_t a = MAX(c->out_alloc * 2, (size_t) 16384);
                        char *p;

                        a = MIN(a, NPU_RUN_OUTPUT_MAX + 2);
                        p = realloc(c->out, a);
                        if (!p)
                                return -ENOMEM;
                        c->out = p;
                        c->out_alloc = a;
                }
                n = read(*fd, c->out + c->out_len, MIN(want, c->out_alloc - c->out_len - 1));
        } else
                n = read(*fd, buf, *fd == c->exec_fd ? sizeof(int) : sizeof(buf));
        if (n < 0)
                return errno == EINTR || errno == EAGAIN ? 0 : negative_errno();
        if (n == 0) {
                *fd = safe_close(*fd);
                return 1;
        }
        if (*fd == c->out_fd) {
                c->out_len += (size_t) n;
                c->overflow = c->out_len > NPU_RUN_OUTPUT_MAX;
        } else if (*fd == c->exec_fd) {
                if ((size_t) n == sizeof(int))
                        memcpy(&c->exec_errno, buf, sizeof(int));
        } else {
                size_t keep = MIN(c->err_len, RUN_ERR_TAIL - (size_t) n);

                memmove(c->err, c->err + c->err_len - keep, keep);
                memcpy(c->err + keep, buf, (size_t) n);
                c->err_len = keep + (size_t) n;
        }
        return 0;
}

/* capture_reap() - waitpid() without blocking. Return: whether the child is reaped now. */
static bool capture_reap(Capture *c) {
        pid_t p;

        if (c->exited)
                return true;
        p = waitpid(c->pid, &c->status, WNOHANG);
        if (p == c->pid)
                c->exited = true;
        else if (p < 0 && errno == ECHILD) {
                c->exited = true;       /* reaped by someone else (SIGCHLD ignored): its status is lost */
                c->status = -1;         /* not WIFEXITED(): reported as -1 */
        }
        return c->exited;
}

/* capture_kill() - kill the child's group and reap it, waiting a second at most. */
static void capture_kill(Capture *c) {
        (void) kill(-c->pid, SIGKILL);
        (void) kill(c->pid, SIGKILL);
        for (unsigned i = 0; i < 100 && !capture_reap(c); i++) {
                struct pollfd p = { .fd = c->pidfd, .events = POLLIN };

                (void) poll(&p, c->pidfd >= 0 ? 1 : 0, 10);
        }
}

/* capture_loop() - read until the child exited and its pipes are drained, it timed out or its
 * stdout overflowed. Return: 0 or -errno. */
static int capture_loop(Capture *c) {
        int *const fds[] = { &c->out_fd, &c->err_fd, &c->exec_fd };

        for (;;) {
                struct pollfd p[ELEMENTSOF(fds) + 1];
                uint64_t t = now_usec(CLOCK_MONOTONIC);
                int timeout = -1, r;
                nfds_t n = 0;

                if (c->overflow)
                        return 0;
                if (c->deadline != UINT64_MAX && t >= c->deadline) {
                        c->timed_out = !capture_reap(c);
                        return 0;
                }
                if (c->deadline != UINT64_MAX)
                        timeout = (int) MIN((c->deadline - t + 999) / 1000, (uint64_t) 60000);
                if (capture_reap(c))
                        timeout = 0;    /* exited: drain what is there, not waiting for a grandchild
                                         * that holds the pipes */
                else if (c->pidfd < 0)
                        timeout = timeout < 0 ? 20 : MIN(timeout, 20);  /* no pidfd: look again every 20 ms */
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        if (*fds[i] >= 0)
                                p[n++] = (struct pollfd) { .fd = *fds[i], .events = POLLIN };
                if (!c->exited && c->pidfd >= 0)
                        p[n++] = (struct pollfd) { .fd = c->pidfd, .events = POLLIN };
                if (n == 0 && c->exited)
                        return 0;

                r = poll(p, n, timeout);
                if (r < 0 && errno != EINTR)
                        return negative_errno();
                if (r == 0 && c->exited)
                        return 0;       /* exited, nothing more to read now */
                for (nfds_t i = 0; r > 0 && i < n; i++)
                        for (size_t j = 0; j < ELEMENTSOF(fds); j++) {
                                int k;

                                if (p[i].fd != *fds[j] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                        continue;
                                k = capture_read(c, fds[j]);
                                if (k < 0)
                                        return k;
                                break;
                        }
        }
}

/* stderr_last_line() - the last non-empty line of the tail of stderr, at most RUN_ERR_LINE_MAX
 * bytes, bytes other than printable ASCII made '?'. Return: 0 (NULL when there is none) or -ENOMEM. */
static int stderr_last_line(const Capture *c, char **ret) {
        size_t end = c->err_len, start;
        char *s;

        while (end > 0 && (c->err[end - 1] == '\n' || c->err[end - 1] == '\r' || c->err[end - 1] == ' ' ||
                           c->err[end - 1] == '\t'))
                end--;
        for (start = end; start > 0 && c->err[start - 1] != '\n'; start--)
                ;
        if (end == start) {
                *ret = NULL;
                return 0;
        }
        s = strndup(c->err + start, MIN(end - start, (size_t) RUN_ERR_LINE_MAX));
        if (!s)
                return -ENOMEM;
        for (char *p = s; *p; p++)
                if (*p < 0x20 || *p > 0x7e)
                        *p = '?';
        *ret = s;
        return 0;
}

/* capture_start() - the pipes, fork(), the child's pidfd. */
static int capture_start(Capture *c, char *const *argv) {
        int out[2], err[2], ex[2];

        if (pipe2(out, O_CLOEXEC) < 0)
                return negative_errno();
        c->out_fd = out[0];
        if (pipe2(err, O_CLOEXEC) < 0) {
                (void) safe_close(out[1]);
                return negative_errno();
        }
        c->err_fd = err[0];
        if (pipe2(ex, O_CLOEXEC) < 0) {
                (void) safe_close(out[1]);
                (void) safe_close(err[1]);
                return negative_errno();
        }
        c->exec_fd = ex[0];

        c->pid = fork();
        if (c->pid == 0)
                run_child(argv, out[1], err[1], ex[1]);
        (void) safe_close(out[1]);
        (void) safe_close(err[1]);
        (void) safe_close(ex[1]);
        if (c->pid < 0)
                return negative_errno();
        (void) setpgid(c->pid, c->pid);         /* the child does so too: whoever runs first */
        c->pidfd = pidfd_open_(c->pid);         /* ENOSYS before Linux 5.3: polled instead */
        return 0;
}

int npu_run_capture(char *const *argv, uint64_t timeout_usec, char **ret_out, size_t *ret_len, int *ret_status,
                    char **ret_err) {
        _cleanup_(capture_done) Capture c = {
                .out_fd = -EBADF, .err_fd = -EBADF, .exec_fd = -EBADF, .pidfd = -EBADF,
                .deadline = timeout_usec > 0 ? now_usec(CLOCK_MONOTONIC) + timeout_usec : UINT64_MAX,
        };
        _cleanup_free_ char *err = NULL;
        int r;

        if (!argv || !argv[0] || !ret_out || !ret_len || !ret_status || !ret_err)
                return -EINVAL;
        r = capture_start(&c, argv);
        if (r < 0)
                return r;
        r = capture_loop(&c);
        if (!c.exited)
                capture_kill(&c);       /* timed out, overflowed, or a poll() failure */
        if (r < 0)
                return r;

        if (c.timed_out)
                return set_message(ret_err, -ETIMEDOUT, "'%s' did not finish within %" PRIu64 " ms and was killed",
                                   argv[0], (timeout_usec + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
        if (c.overflow)
                return set_message(ret_err, -EFBIG, "'%s' printed more than %zu bytes and was killed", argv[0],
                                   NPU_RUN_OUTPUT_MAX);
        if (c.exec_errno > 0)
                return set_message(ret_err, -c.exec_errno, "Failed to execute '%s': %s", argv[0],
                                   strerror(c.exec_errno));

        r = stderr_last_line(&c, &err);
        if (r < 0)
                return r;
        if (!c.out) {
                c.out = strdup("");
                if (!c.out)
                        return -ENOMEM;
        } else
                c.out[c.out_len] = '\0';
        *ret_len = c.out_len;
        *ret_out = STEAL(c.out);
        *ret_status = c.exited && WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1;
        *ret_err = STEAL(err);
        return 0;
}

/* ---- DCMI ------------------------------------------------------------------------------------- */

/* Mirrored from the Ascend DCMI API (dcmi_interface_api.h of the driver package): the struct that
 * dcmi_get_device_chip_info() fills, and the six entry points used here, by their C signatures. */
struct dcmi_chip_info {
        unsigned char chip_type[32];
        unsigned char chip_name[32];
        unsigned char chip_ver[32];
        unsigned int aicore_cnt;
};

typedef struct DcmiApi {
        int (*init)(void);
        int (*get_card_num_list)(int *card_num, int *card_list, int list_len);
        int (*get_device_num_in_card)(int card_id, int *device_num);
        int (*get_device_logic_id)(int *device_logic_id, int card_id, int device_id);
        int (*get_device_health)(int card_id, int device_id, unsigned int *health);
        int (*get_device_chip_info)(int card_id, int device_id, struct dcmi_chip_info *chip_info);
} DcmiApi;

static void dlclosep(void **h) {
        if (*h)
                (void) dlclose(*h);
        *h = NULL;
}

static const char *dcmi_health_to_string(unsigned h) {
        static const char *const table[] = { "OK", "Warning", "Alarm", "Critical" };

        return h < ELEMENTSOF(table) ? table[h] : "UNKNOWN";
}

/* dcmi_load() - dlopen() @path and look up the entry points. Return: 0, or -ENOENT/-ENXIO with why. */
static int dcmi_load(const char *path, void **ret_handle, DcmiApi *ret, char **ret_why) {
        static const char *const names[] = {
                "dcmi_init", "dcmi_get_card_num_list", "dcmi_get_device_num_in_card",
                "dcmi_get_device_logic_id", "dcmi_get_device_health", "dcmi_get_device_chip_info",
        };
        _cleanup_(dlclosep) void *h = NULL;
        void *sym[ELEMENTSOF(names)];
        const char *e;

        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return set_message(ret_why, -ENOENT, "%s", (e = dlerror()) ? e : path);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                sym[i] = dlsym(h, names[i]);
                if (!sym[i])
                        return set_message(ret_why, -ENXIO, "%s has no %s()", path, names[i]);
        }
        /* POSIX: a function pointer and void * convert (what dlsym() relies on) */
        *ret = (DcmiApi) {
                .init = (int (*)(void)) sym[0],
                .get_card_num_list = (int (*)(int *, int *, int)) sym[1],
                .get_device_num_in_card = (int (*)(int, int *)) sym[2],
                .get_device_logic_id = (int (*)(int *, int, int)) sym[3],
                .get_device_health = (int (*)(int, int, unsigned *)) sym[4],
                .get_device_chip_info = (int (*)(int, int, struct dcmi_chip_info *)) sym[5],
        };
        *ret_handle = STEAL(h);
        return 0;
}

/* dcmi_chip_name() - "chip_type chip_name" from fixed, maybe unterminated arrays of vendor code. */
static int dcmi_chip_name(const struct dcmi_chip_info *info, char **ret) {
        size_t nt = strnlen((const char *) info->chip_type, sizeof(info->chip_type));
        size_t nn = strnlen((const char *) info->chip_name, sizeof(info->chip_name));
        char *s;

        if (nn == 0)
                return -EBADMSG;
        for (size_t i = 0; i < nt; i++)
                if (info->chip_type[i] < 0x20 || info->chip_type[i] > 0x7e)
                        return -EBADMSG;
        for (size_t i = 0; i < nn; i++)
                if (info->chip_name[i] <= 0x20 || info->chip_name[i] > 0x7e)
                        return -EBADMSG;
        if (asprintf(&s, "%.*s%s%.*s", (int) nt, (const char *) info->chip_type, nt > 0 ? " " : "", (int) nn,
                     (const char *) info->chip_name) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* dcmi_add_device() - device @dev of card @card, if it has a logic id, into @c. */
static int dcmi_add_device(const DcmiApi *api, int card, int dev, NpuSmiChips *c, char **ret_why) {
        union {
                struct dcmi_chip_info info;
                unsigned char room[1024];       /* a newer driver's larger struct must not overrun */
        } u = {};
        _cleanup_free_ char *name = NULL;
        unsigned health = 0;
        int logic = -1, r;

        r = api->get_device_logic_id(&logic, card, dev);
        if (r != 0) {
                log_debug("DCMI: card %d device %d has no logic id (%d), skipping it.", card, dev, r);
                return 0;                       /* the MCU */
        }
        if (logic < 0 || (unsigned) logic > NPU_SMI_ID_MAX)
                return set_message(ret_why, -EBADMSG, "card %d device %d: logic id %d out of range", card, dev, logic);
        r = api->get_device_health(card, dev, &health);
        if (r != 0)
                return set_message(ret_why, -EIO, "dcmi_get_device_health(%d, %d) failed: %d", card, dev, r);
        r = api->get_device_chip_info(card, dev, &u.info);
        if (r != 0)
                return set_message(ret_why, -EIO, "dcmi_get_device_chip_info(%d, %d) failed: %d", card, dev, r);
        r = dcmi_chip_name(&u.info, &name);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_why, r, "card %d device %d: the chip name is empty or not printable ASCII",
                                   card, dev);

        if (c->n >= NPU_SMI_CHIPS_MAX)
                return set_message(ret_why, -EBADMSG, "more than %d chips", NPU_SMI_CHIPS_MAX);
        for (size_t i = 0; i < c->n; i++)
                if (c->chips[i].logic_id == (unsigned) logic)
                        return set_message(ret_why, -EBADMSG, "logic id %d is reported twice", logic);
        c->chips[c->n] = (NpuSmiChip) {
                .logic_id = (unsigned) logic,
                .npu_id = (unsigned) card,
                .chip_id = (unsigned) dev,
                .health = strdup(dcmi_health_to_string(health)),
                .name = STEAL(name),
        };
        if (!c->chips[c->n++].health)
                return -ENOMEM;
        return 0;
}

static int chip_compare_logic(const void *a, const void *b) {
        const NpuSmiChip *x = a, *y = b;

        return x->logic_id < y->logic_id ? -1 : x->logic_id > y->logic_id;
}

/* dcmi_read() - every chip DCMI knows. Return: 0, or -errno with why. */
static int dcmi_read(const DcmiApi *api, NpuSmiChips *ret, char **ret_why) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
        int cards[NPU_SMI_CHIPS_MAX], n_cards = -1, r;

        r = api->init();
        if (r != 0)
                return set_message(ret_why, -EIO, "dcmi_init() failed: %d", r);
        r = api->get_card_num_list(&n_cards, cards, (int) ELEMENTSOF(cards));
        if (r != 0)
                return set_message(ret_why, -EIO, "dcmi_get_card_num_list() failed: %d", r);
        if (n_cards < 0 || (size_t) n_cards > ELEMENTSOF(cards))
                return set_message(ret_why, -EBADMSG, "dcmi_get_card_num_list() says %d cards", n_cards);
        c.chips = calloc(NPU_SMI_CHIPS_MAX, sizeof(NpuSmiChip));
        if (!c.chips)
                return -ENOMEM;

        for (int i = 0; i < n_cards; i++) {
                int n_devices = -1;

                if (cards[i] < 0)
                        return set_message(ret_why, -EBADMSG, "card id %d out of range", cards[i]);
                r = api->get_device_num_in_card(cards[i], &n_devices);
                if (r != 0)
                        return set_message(ret_why, -EIO, "dcmi_get_device_num_in_card(%d) failed: %d", cards[i], r);
                if (n_devices < 0 || n_devices > DCMI_DEVICES_PER_CARD_MAX)
                        return set_message(ret_why, -EBADMSG, "card %d has %d devices", cards[i], n_devices);
                for (int dev = 0; dev < n_devices; dev++) {
                        r = dcmi_add_device(api, cards[i], dev, &c, ret_why);
                        if (r < 0)
                                return r;
                }
        }
        if (c.n > 1)
                qsort(c.chips, c.n, sizeof(NpuSmiChip), chip_compare_logic);
        *ret = c;
        c = (NpuSmiChips) {};
        return 0;
}

/* dcmi_try() - the chips from the first libdcmi.so that loads, or -errno with why. */
static int dcmi_try(const char *driver_dir, const char *dcmi_path, NpuSmiChips *ret, char **ret_why) {
        _cleanup_free_ char *driver_lib = NULL;
        _cleanup_(dlclosep) void *h = NULL;
        DcmiApi api;
        int r;

        if (!isempty(dcmi_path))
                r = dcmi_load(dcmi_path, &h, &api, ret_why);
        else {
                r = dcmi_load("libdcmi.so", &h, &api, ret_why);
                if (r == -ENOENT) {
                        free(*ret_why);
                        *ret_why = NULL;
                        if (asprintf(&driver_lib, "%s/lib64/driver/libdcmi.so",
                                     isempty(driver_dir) ? "/usr/local/Ascend/driver" : driver_dir) < 0)
                                return -ENOMEM;
                        r = dcmi_load(driver_lib, &h, &api, ret_why);
                }
        }
        if (r < 0)
                return r;
        return dcmi_read(&api, ret, ret_why);
}

/* ---- npu-smi ---------------------------------------------------------------------------------- */

/* smi_run() - `@smi @args` before @deadline (@timeout_usec after the first began), its stdout, or
 * -errno with why. */
static int smi_run(const char *smi, const char *args, uint64_t deadline, uint64_t timeout_usec, char **ret_out,
                   size_t *ret_len, char **ret_why) {
        char *argv[] = { (char *) smi, (char *) "info", streq(args, "info -m") ? (char *) "-m" : NULL, NULL };
        _cleanup_free_ char *err = NULL;
        uint64_t timeout = 0, t;
        int status, r;

        if (deadline != UINT64_MAX) {
                t = now_usec(CLOCK_MONOTONIC);
                if (t >= deadline)
                        return set_message(ret_why, -ETIMEDOUT, "`%s %s` did not start: no time left (%" PRIu64
                                           " ms for `info -m` and `info`)", smi, args,
                                           (timeout_usec + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
                timeout = deadline - t;
        }
        r = npu_run_capture(argv, timeout, ret_out, ret_len, &status, &err);
        if (r == -ENOMEM)
                return r;
        if (r == -ETIMEDOUT)
                return set_message(ret_why, r, "`%s %s` did not finish in time (%" PRIu64 " ms for `info -m` "
                                   "and `info`) and was killed", smi, args,
                                   (timeout_usec + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
        if (r < 0)
                return err ? set_message(ret_why, r, "`%s %s`: %s", smi, args, err)
                           : set_message(ret_why, r, "`%s %s`: %s", smi, args, strerror(-r));
        if (status == 0)
                return 0;
        *ret_out = mfree(*ret_out);
        if (status < 0)
                return set_message(ret_why, -EIO, "`%s %s` was killed by a signal%s%s", smi, args, err ? ": " : "",
                                   err ?: "");
        return set_message(ret_why, -EIO, "`%s %s` exited with status %d%s%s", smi, args, status, err ? ": " : "",
                           err ?: "");
}

/* smi_read() - the chips from `npu-smi info -m` and `npu-smi info`, or -errno with why. */
static int smi_read(const char *smi, uint64_t timeout_usec, NpuSmiChips *ret, char **ret_why) {
        _cleanup_(npu_smi_chips_done) NpuSmiChips c = {};
        _cleanup_free_ char *out = NULL, *why = NULL;
        uint64_t deadline = timeout_usec > 0 ? now_usec(CLOCK_MONOTONIC) + timeout_usec : UINT64_MAX;
        size_t len;
        int r;

        r = smi_run(smi, "info -m", deadline, timeout_usec, &out, &len, ret_why);
        if (r < 0)
                return r;
        r = npu_smi_parse_mapping(out, len, &c, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_why, r, "`%s info -m`: %s", smi, why);
        out = mfree(out);

        r = smi_run(smi, "info", deadline, timeout_usec, &out, &len, ret_why);
        if (r < 0)
                return r;
        r = npu_smi_parse_info(out, len, &c, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_why, r, "`%s info`: %s", smi, why);
        *ret = c;
        c = (NpuSmiChips) {};
        return 0;
}

int npu_host_read_state(const char *smi, const char *driver_dir, const char *dcmi_path, uint64_t timeout_usec,
                        NpuSmiChips *ret, const char **ret_source, char **ret_why) {
        _cleanup_free_ char *dcmi_why = NULL, *smi_why = NULL;
        NpuSmiChips c = {};
        int r;

        if (!ret || !ret_source)
                return -EINVAL;
        r = dcmi_try(driver_dir, dcmi_path, &c, &dcmi_why);
        if (r == -ENOMEM)
                return r;
        if (r >= 0) {
                *ret = c;
                *ret_source = "dcmi";
                return 0;
        }
        log_debug_errno(r, "DCMI not used (%s), falling back to npu-smi: %m", dcmi_why ?: "n/a");

        if (isempty(smi))
                smi = "npu-smi";
        r = smi_read(smi, timeout_usec, &c, &smi_why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return ret_why ? set_message(ret_why, r, "%s (DCMI not used: %s)", smi_why ?: "n/a",
                                             dcmi_why ?: "n/a") : r;
        *ret = c;
        *ret_source = "npu-smi";
        return 0;
}
