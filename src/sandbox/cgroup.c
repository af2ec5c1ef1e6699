/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's own cgroups: limits and accounting per execution without systemd. */

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "util/dirent-util.h"
#include "util/fd-util.h"
#include "util/json-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/string-util.h"

#define ROOT_NAME "sandbox-runner"
#define DAEMON_NAME "daemon"          /* v2 only: the daemon's own leaf under ROOT_NAME */
#define HIERARCHIES_MAX 4
#define KILL_ROUNDS 50

enum {
        CTRL_MEMORY  = 1U << 0,
        CTRL_PIDS    = 1U << 1,
        CTRL_CPU     = 1U << 2,
        CTRL_CPUACCT = 1U << 3,
};

static const char *const ctrl_names[] = { "memory", "pids", "cpu", "cpuacct" };

typedef struct Hierarchy {
        unsigned ctrls;          /* CTRL_*: what this one does for us */
        int fd;                  /* our ROOT_NAME directory in it */
} Hierarchy;

struct CgroupRoot {
        bool v2;
        Hierarchy h[HIERARCHIES_MAX];
        size_t n;
        char *description;
};

struct Cgroup {
        CgroupRoot *root;
        char *name;
        int fd[HIERARCHIES_MAX];
};

/* ---- control files ---------------------------------------------------------------------------- */

int cg_read_u64(int dir_fd, const char *path, uint64_t *ret) {
        char buf[64];
        _cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
        ssize_t n;
        char *end;
        unsigned long long v;

        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return n < 0 ? negative_errno() : -EBADMSG;
        buf[n] = '\0';
        if (strneq(buf, "max", 3)) {
                *ret = UINT64_MAX;
                return 0;
        }
        errno = 0;
        v = strtoull(buf, &end, 10);
        if (errno != 0 || end == buf)
                return -EBADMSG;
        *ret = v;
        return 0;
}

int cg_read_keyed(int dir_fd, const char *path, const char *key, uint64_t *ret) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
        char buf[4096], *line, *save = NULL;
        size_t l = strlen(key);
        ssize_t n;

        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned long long v;
                if (strneq(line, key, l) && line[l] == ' ' && sscanf(line + l + 1, "%llu", &v) == 1) {
                        *ret = v;
                        return 0;
                }
        }
        return -ENOENT;
}

static int write_at(int dir_fd, const char *file, const char *value) {
        _cleanup_close_ int fd = openat(dir_fd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        size_t n = strlen(value);

        if (fd < 0)
                return negative_errno();
        if (write(fd, value, n) != (ssize_t) n)
                return negative_errno();
        return 0;
}

static int write_u64_at(int dir_fd, const char *file, uint64_t v) {
        char buf[32];

        (void) snprintf(buf, sizeof(buf), "%" PRIu64, v);
        return write_at(dir_fd, file, buf);
}

/* ---- finding our cgroup ---------------------------------------------------------------------- */

static bool list_has(const char *list, const char *word) {
        size_t l = strlen(word);

        for (const char *p = list; p && *p;) {
                size_t k = strcspn(p, ",");
                if (k == l && strneq(p, word, l))
                        return true;
                p += k;
                if (*p == ',')
                        p++;
        }
        return false;
}

/* The directory of our cgroup in the hierarchy whose /proc/self/cgroup line says @ctrl
 * (NULL: the v2 line), from where that hierarchy is mounted. Return: a new string or NULL. */
static char *own_cgroup_dir(const char *ctrl) {
        _cleanup_free_ char *path = NULL, *line = NULL;
        char *found = NULL;
        size_t cap = 0;
        FILE *f;

        f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return NULL;
        while (getline(&line, &cap, f) > 0) {
                char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
                if (!b)
                        continue;
                *b = '\0';
                b[1 + strcspn(b + 1, "\n")] = '\0';
                if (ctrl ? list_has(a + 1, ctrl) : (streq(line, "0") && a[1] == '\0')) {
                        path = strdup(b + 1);
                        break;
                }
        }
        fclose(f);
        if (!path)
                return NULL;

        f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return NULL;
        while (!found && getline(&line, &cap, f) > 0) {
                char root[512], mnt[512], fstype[64], super[512];
                const char *sep = strstr(line, " - ");
                size_t lr;

                if (!sep || sscanf(line, "%*s %*s %*s %511s %511s", root, mnt) != 2 ||
                    sscanf(sep + 3, "%63s %*s %511s", fstype, super) != 2)
                        continue;
                if (ctrl ? !streq(fstype, "cgroup") || !list_has(super, ctrl) : !streq(fstype, "cgroup2"))
                        continue;
                /* Our path must lie in what is mounted there. */
                lr = streq(root, "/") ? 0 : strlen(root);
                if (lr > 0 && (!strneq(path, root, lr) || (path[lr] != '/' && path[lr] != '\0')))
                        continue;
                if (asprintf(&found, "%s%s", mnt, streq(path + lr, "/") ? "" : path + lr) < 0)
                        found = NULL;
        }
        fclose(f);
        return found;
}

/* Hand @fd (a directory we made) and its control files to @uid, as a delegation does. */
static int chown_delegated(int fd, uid_t uid, gid_t gid) {
        _cleanup_close_ int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        _cleanup_(closedirp) DIR *d = NULL;
        int r;

        if (dfd < 0)
                return negative_errno();
        if (fchown(fd, uid, gid) < 0)
                return negative_errno();
        r = opendir_fd(STEAL_FD(dfd), &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d)
                if (de->d_type == DT_REG && (streq(de->d_name, "cgroup.procs") || streq(de->d_name, "tasks") ||
                                             streq(de->d_name, "cgroup.subtree_control") ||
                                             streq(de->d_name, "cgroup.threads")) &&
                    fchownat(fd, de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        r = negative_errno();
        return r;
}

/* Make (or find) ROOT_NAME under @parent_path and open it: ours once we may write it. */
static int open_root_dir(const char *parent_path, uid_t uid, gid_t gid, int *ret_fd, char **ret_reason) {
        _cleanup_close_ int pfd = -EBADF, fd = -EBADF;
        int r;

        pfd = open(parent_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0)
                return set_message(ret_reason, negative_errno(), "cannot open %s: %m", parent_path);
        if (mkdirat(pfd, ROOT_NAME, 0755) < 0 && errno != EEXIST)
                return set_message(ret_reason, negative_errno(), "cannot create %s/" ROOT_NAME ": %m", parent_path);
        fd = openat(pfd, ROOT_NAME, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return set_message(ret_reason, negative_errno(), "cannot open %s/" ROOT_NAME ": %m", parent_path);
        if (geteuid() == 0) {
                r = chown_delegated(fd, uid, gid);
                if (r < 0)
                        return set_message(ret_reason, r, "cannot hand %s/" ROOT_NAME " to uid %u: %s", parent_path,
                                      (unsigned) uid, strerror(-r));
        } else if (faccessat(fd, "cgroup.procs", W_OK, AT_EACCESS) < 0 || faccessat(fd, ".", W_OK, AT_EACCESS) < 0)
                return set_message(ret_reason, negative_errno(), "%s/" ROOT_NAME " is not delegated to uid %u", parent_path,
                              (unsigned) geteuid());
        *ret_fd = STEAL_FD(fd);
        return 0;
}

/* Remove the empty "x-*" directories that a daemon which died left behind. Other daemons started
 * as root share the directory: one of theirs is empty only between its mkdir and the move of its
 * keeper (microseconds), and a populated one cannot be removed (EBUSY); so only those made more
 * than a minute ago go. */
#define STALE_SEC 60
static void remove_stale(int fd) {
        _cleanup_close_ int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        _cleanup_(closedirp) DIR *d = NULL;
        time_t now = time(NULL);

        if (dfd < 0 || opendir_fd(STEAL_FD(dfd), &d) < 0)
                return;
        FOREACH_DIRENT(de, d) {
                struct stat st;

                if (de->d_type != DT_DIR || !strneq(de->d_name, "x-", 2) ||
                    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_ctime > now - STALE_SEC)
                        continue;
                (void) unlinkat(fd, de->d_name, AT_REMOVEDIR);
        }
}

static bool v2_has(const char *dir, const char *file, unsigned need) {
        _cleanup_free_ char *p = NULL;
        char buf[512] = "";
        FILE *f;
        unsigned have = 0;

        if (asprintf(&p, "%s/%s", dir, file) < 0 || !(f = fopen(p, "re")))
                return false;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = '\0';
        fclose(f);
        for (char *save = NULL, *w = strtok_r(buf, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
                for (size_t i = 0; i < ELEMENTSOF(ctrl_names); i++)
                        if (streq(w, ctrl_names[i]))
                                have |= 1U << i;
        return (have & need) == need;
}

/* v2: OWN/sandbox-runner/{daemon,x-*}; the daemon moves into its leaf, so that OWN (which must
 * hold no other process) and our directory may hand the controllers down. */
static int prepare_v2(CgroupRoot *root, const char *own, uid_t uid, gid_t gid, char **ret_reason) {
        _cleanup_close_ int pfd = -EBADF, fd = -EBADF, dfd = -EBADF;
        const char *enable = v2_has(own, "cgroup.controllers", CTRL_CPU) ? "+memory +pids +cpu" : "+memory +pids";
        char pid[32];
        int r;

        if (geteuid() != 0)
                return set_message(ret_reason, -EPERM, "cgroup v2: only a daemon started as root sets up its own cgroups");
        r = open_root_dir(own, uid, gid, &fd, ret_reason);
        if (r < 0)
                return r;
        if (mkdirat(fd, DAEMON_NAME, 0755) < 0 && errno != EEXIST)
                return set_message(ret_reason, negative_errno(), "cgroup v2: cannot create %s/" ROOT_NAME "/" DAEMON_NAME ": %m",
                              own);
        dfd = openat(fd, DAEMON_NAME, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        (void) snprintf(pid, sizeof(pid), "%d", (int) getpid());
        r = dfd < 0 ? negative_errno() : write_at(dfd, "cgroup.procs", pid);
        if (r < 0)
                return set_message(ret_reason, r, "cgroup v2: cannot move the daemon into %s/" ROOT_NAME "/" DAEMON_NAME
                                   ": %s", own, strerror(-r));
        pfd = open(own, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = pfd < 0 ? negative_errno() : write_at(pfd, "cgroup.subtree_control", enable);
        if (r >= 0)
                r = write_at(fd, "cgroup.subtree_control", enable);
        if (r < 0) {
                /* Back where we were; EBUSY: other processes share our cgroup (a shell, say). */
                if (pfd >= 0)
                        (void) write_at(pfd, "cgroup.procs", pid);
                (void) unlinkat(fd, DAEMON_NAME, AT_REMOVEDIR);
                return set_message(ret_reason, r, "cgroup v2: cannot enable the controllers under %s: %s%s", own,
                              strerror(-r), r == -EBUSY ? " (other processes share the daemon's cgroup)" : "");
        }
        (void) chown_delegated(dfd, uid, gid);
        root->v2 = true;
        root->h[0] = (Hierarchy) { .ctrls = CTRL_MEMORY | CTRL_PIDS | CTRL_CPU | CTRL_CPUACCT, .fd = STEAL_FD(fd) };
        root->n = 1;
        return asprintf(&root->description, "cgroup v2 under %s/" ROOT_NAME, own) < 0 ? -ENOMEM : 0;
}

static int prepare_v1(CgroupRoot *root, uid_t uid, gid_t gid, char **ret_reason) {
        char *dirs[ELEMENTSOF(ctrl_names)] = {};
        _cleanup_free_ char *names = NULL;
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(ctrl_names); i++)
                dirs[i] = own_cgroup_dir(ctrl_names[i]);
        if (!dirs[0] || !dirs[1]) {
                r = set_message(ret_reason, -EOPNOTSUPP, "no cgroup v1 %s controller is mounted, and cgroup v2 has no "
                           "memory and pids controllers", !dirs[0] ? "memory" : "pids");
                goto finish;
        }
        for (size_t i = 0; i < ELEMENTSOF(ctrl_names); i++) {
                size_t j;
                if (!dirs[i])
                        continue;
                for (j = 0; j < root->n; j++)
                        if (i > 0 && dirs[j] && streq(dirs[i], dirs[j]))
                                break;
                if (j < root->n && j < i) {
                        root->h[j].ctrls |= 1U << i;      /* cpu,cpuacct mounted together */
                        continue;
                }
                r = open_root_dir(dirs[i], uid, gid, &root->h[root->n].fd, ret_reason);
                if (r < 0) {
                        if (i >= 2) {
                                /* cpu and cpuacct are nice to have: limits hold without them. */
                                log_warning("%s; executions run without %s.", *ret_reason,
                                            i == 2 ? "a CPU quota" : "CPU time accounting");
                                *ret_reason = mfree(*ret_reason);
                                r = 0;
                                continue;
                        }
                        goto finish;
                }
                root->h[root->n++].ctrls = 1U << i;
        }
        for (size_t i = 0; i < root->n; i++)
                for (size_t c = 0; c < ELEMENTSOF(ctrl_names); c++)
                        if (root->h[i].ctrls & (1U << c)) {
                                char *t = NULL;
                                if (asprintf(&t, "%s%s%s", names ?: "", names ? ", " : "", ctrl_names[c]) < 0) {
                                        r = -ENOMEM;
                                        goto finish;
                                }
                                free(names);
                                names = t;
                        }
        r = asprintf(&root->description, "cgroup v1 (%s) under %s/" ROOT_NAME, names, dirs[0]) < 0 ? -ENOMEM : 0;
finish:
        for (size_t i = 0; i < ELEMENTSOF(ctrl_names); i++)
                free(dirs[i]);
        return r;
}

/* What cgroup_root_prepare() would use, changing nothing: as root the hierarchy (it makes and
 * chowns the directory then), otherwise only a directory delegated to us already. */
int cgroup_root_check(bool as_root, char **ret_description, char **ret_reason) {
        _cleanup_free_ char *v2 = own_cgroup_dir(NULL), *mem = NULL, *pids = NULL, *dir = NULL;
        const char *where;

        *ret_description = *ret_reason = NULL;
        if (v2 && v2_has(v2, "cgroup.controllers", CTRL_MEMORY | CTRL_PIDS)) {
                if (!as_root)
                        return set_message(ret_reason, -EPERM,
                                           "cgroup v2: only a daemon started as root sets up its own cgroups");
                if (access(v2, W_OK) < 0)
                        return set_message(ret_reason, negative_errno(), "cgroup v2: cannot write %s: %m", v2);
                return set_message(ret_description, 0, "cgroup v2 under %s/" ROOT_NAME, v2);
        }
        mem = own_cgroup_dir("memory");
        pids = own_cgroup_dir("pids");
        if (!mem || !pids)
                return set_message(ret_reason, -EOPNOTSUPP, "no cgroup v1 %s controller is mounted, and cgroup v2 has "
                                   "no memory and pids controllers", !mem ? "memory" : "pids");
        where = as_root ? mem : (asprintf(&dir, "%s/" ROOT_NAME "/cgroup.procs", mem) < 0 ? NULL : dir);
        if (!where)
                return -ENOMEM;
        if (access(where, W_OK) < 0)
                return set_message(ret_reason, negative_errno(), "%s%s is not writable%s", mem, as_root ? "" : "/" ROOT_NAME,
                                   as_root ? "" : ": it is not delegated to this user");
        return set_message(ret_description, 0, "cgroup v1 (memory, pids) under %s/" ROOT_NAME, mem);
}

int cgroup_root_prepare(uid_t uid, gid_t gid, CgroupRoot **ret, char **ret_reason) {
        _cleanup_free_ char *v2 = own_cgroup_dir(NULL);
        CgroupRoot *root;
        int r;

        *ret_reason = NULL;
        root = calloc(1, sizeof(*root));
        if (!root)
                return -ENOMEM;
        if (v2 && v2_has(v2, "cgroup.controllers", CTRL_MEMORY | CTRL_PIDS))
                r = prepare_v2(root, v2, uid, gid, ret_reason);
        else
                r = prepare_v1(root, uid, gid, ret_reason);
        if (r < 0) {
                if (!*ret_reason)
                        r = set_message(ret_reason, r, "cannot set up the daemon's cgroups: %s", strerror(-r));
                cgroup_root_free(root);
                return r;
        }
        for (size_t i = 0; i < root->n; i++)
                remove_stale(root->h[i].fd);
        *ret = root;
        return 0;
}

CgroupRoot *cgroup_root_free(CgroupRoot *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n; i++)
                safe_close(r->h[i].fd);
        free(r->description);
        free(r);
        return NULL;
}

const char *cgroup_root_describe(const CgroupRoot *r) {
        return r ? r->description : NULL;
}

int cgroup_root_export(const CgroupRoot *r, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *a = json_object_new_array();

        if (!o || !a)
                return -ENOMEM;
        for (size_t i = 0; i < r->n; i++) {
                json_object *h = json_object_new_object();

                if (!h || json_object_array_add(a, h) < 0) {
                        json_object_put(h);
                        return -ENOMEM;
                }
                if (json_add(h, "ctrls", json_object_new_int64(r->h[i].ctrls)) < 0 ||
                    json_add(h, "fd", json_object_new_int(r->h[i].fd)) < 0)
                        return -ENOMEM;
                if (fd_cloexec(r->h[i].fd, 0) < 0)
                        return -EBADF;
        }
        if (json_add(o, "v2", json_object_new_boolean(r->v2)) < 0 ||
            json_add(o, "description", json_object_new_string(r->description ?: "")) < 0 ||
            json_add(o, "hierarchies", STEAL(a)) < 0)
                return -ENOMEM;
        *ret = STEAL(o);
        return 0;
}

int cgroup_root_import(json_object *o, CgroupRoot **ret) {
        json_object *v2, *d, *a;
        CgroupRoot *root;
        size_t n;

        if (!json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, "v2", &v2) || !json_object_is_type(v2, json_type_boolean) ||
            !json_object_object_get_ex(o, "description", &d) || !json_object_is_type(d, json_type_string) ||
            !json_object_object_get_ex(o, "hierarchies", &a) || !json_object_is_type(a, json_type_array))
                return -EINVAL;
        n = json_object_array_length(a);
        if (n == 0 || n > HIERARCHIES_MAX)
                return -EINVAL;
        root = calloc(1, sizeof(*root));
        if (!root)
                return -ENOMEM;
        root->v2 = json_object_get_boolean(v2);
        for (size_t i = 0; i < n; i++) {
                json_object *h = json_object_array_get_idx(a, i), *c, *f;
                struct stat st;
                int64_t ctrls, fd;

                if (!json_object_object_get_ex(h, "ctrls", &c) || !json_object_is_type(c, json_type_int) ||
                    !json_object_object_get_ex(h, "fd", &f) || !json_object_is_type(f, json_type_int))
                        goto invalid;
                ctrls = json_object_get_int64(c);
                fd = json_object_get_int64(f);
                if (ctrls <= 0 || ctrls >= (1 << ELEMENTSOF(ctrl_names)) || fd < 3 || fd > INT_MAX ||
                    fstat((int) fd, &st) < 0 || !S_ISDIR(st.st_mode) || fd_cloexec((int) fd, 1) < 0)
                        goto invalid;
                root->h[root->n++] = (Hierarchy) { .ctrls = (unsigned) ctrls, .fd = (int) fd };
        }
        root->description = strdup(json_object_get_string(d));
        if (!root->description) {
                cgroup_root_free(root);
                return -ENOMEM;
        }
        *ret = root;
        return 0;
invalid:
        cgroup_root_free(root);
        return -EINVAL;
}

/* ---- one execution --------------------------------------------------------------------------- */

static int set_limits(const CgroupRoot *root, unsigned ctrls, int fd, const ScopeLimits *l) {
        int r = 0;

        if ((ctrls & CTRL_MEMORY) && l->memory_max > 0) {
                r = write_u64_at(fd, root->v2 ? "memory.max" : "memory.limit_in_bytes", l->memory_max);
                /* No swap beyond it, as MemorySwapMax=0 (absent without swap accounting). */
                if (r >= 0)
                        (void) (root->v2 ? write_at(fd, "memory.swap.max", "0")
                                         : write_u64_at(fd, "memory.memsw.limit_in_bytes", l->memory_max));
        }
        if (r >= 0 && (ctrls & CTRL_PIDS) && l->tasks_max > 0)
                r = write_u64_at(fd, "pids.max", l->tasks_max);
        if (r >= 0 && (ctrls & CTRL_CPU) && l->cpu_quota_percent > 0) {
                if (root->v2) {
                        char v[64];
                        (void) snprintf(v, sizeof(v), "%u 100000", l->cpu_quota_percent * 1000U);
                        r = write_at(fd, "cpu.max", v);
                } else {
                        r = write_u64_at(fd, "cpu.cfs_period_us", 100000);
                        if (r >= 0)
                                r = write_u64_at(fd, "cpu.cfs_quota_us", (uint64_t) l->cpu_quota_percent * 1000U);
                }
        }
        return r;
}

int cgroup_new(CgroupRoot *root, const char *name, const ScopeLimits *limits, Cgroup **ret) {
        Cgroup *cg;
        int r = 0;

        if (!root || root->n == 0)
                return -EOPNOTSUPP;
        cg = calloc(1, sizeof(*cg));
        if (!cg)
                return -ENOMEM;
        cg->root = root;
        for (size_t i = 0; i < HIERARCHIES_MAX; i++)
                cg->fd[i] = -EBADF;
        if (asprintf(&cg->name, "x-%s", name) < 0) {
                free(cg);
                return -ENOMEM;
        }
        for (size_t i = 0; r >= 0 && i < root->n; i++) {
                if (mkdirat(root->h[i].fd, cg->name, 0755) < 0) {
                        r = negative_errno();
                        break;
                }
                cg->fd[i] = openat(root->h[i].fd, cg->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                r = cg->fd[i] < 0 ? negative_errno() : limits ? set_limits(root, root->h[i].ctrls, cg->fd[i], limits) : 0;
        }
        if (r < 0) {
                cgroup_free(cg);
                return r;
        }
        *ret = cg;
        return 0;
}

int cgroup_set_limits(Cgroup *cg, const ScopeLimits *limits) {
        for (size_t i = 0; i < cg->root->n; i++) {
                int r = set_limits(cg->root, cg->root->h[i].ctrls, cg->fd[i], limits);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cgroup_attach(Cgroup *cg, pid_t pid) {
        char v[32];

        (void) snprintf(v, sizeof(v), "%d", (int) pid);
        for (size_t i = 0; i < cg->root->n; i++) {
                int r = write_at(cg->fd[i], "cgroup.procs", v);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int fd_of(const Cgroup *cg, unsigned ctrl) {
        for (size_t i = 0; i < cg->root->n; i++)
                if (cg->root->h[i].ctrls & ctrl)
                        return cg->fd[i];
        return -EBADF;
}

int cgroup_read_accounting(Cgroup *cg, ScopeAccounting *ret) {
        ScopeAccounting a = {
                .memory_peak = UINT64_MAX, .cpu_usage_nsec = UINT64_MAX, .tasks_peak = UINT64_MAX,
        };
        int mem = fd_of(cg, CTRL_MEMORY), pids = fd_of(cg, CTRL_PIDS), cpu = fd_of(cg, CTRL_CPUACCT);
        uint64_t v;

        if (cg->root->v2) {
                if (cg_read_u64(mem, "memory.peak", &v) >= 0)
                        a.memory_peak = v;
                if (cg_read_keyed(mem, "cpu.stat", "usage_usec", &v) >= 0)
                        a.cpu_usage_nsec = v * 1000;
                if (cg_read_keyed(mem, "memory.events", "oom_kill", &v) >= 0)
                        a.oom_kills = v;
                if (cg_read_keyed(mem, "memory.events", "max", &v) >= 0)
                        a.memory_max_hits = v;
        } else {
                if (cg_read_u64(mem, "memory.max_usage_in_bytes", &v) >= 0)
                        a.memory_peak = v;
                if (cpu >= 0 && cg_read_u64(cpu, "cpuacct.usage", &v) >= 0)
                        a.cpu_usage_nsec = v;
                if (cg_read_keyed(mem, "memory.oom_control", "oom_kill", &v) >= 0)
                        a.oom_kills = v;
                if (cg_read_u64(mem, "memory.failcnt", &v) >= 0)
                        a.memory_max_hits = v;
        }
        if (cg_read_u64(pids, "pids.peak", &v) >= 0)
                a.tasks_peak = v;
        if (cg_read_keyed(pids, "pids.events", "max", &v) >= 0)
                a.tasks_max_hits = v;
        *ret = a;
        return 0;
}

int cgroup_kill(Cgroup *cg) {
        int fd = fd_of(cg, CTRL_PIDS);

        if (cg->root->v2 && write_at(fd, "cgroup.kill", "1") >= 0)
                return 0;
        /* v1: kill what is listed until nothing is (a fork between the read and the kill shows up
         * in the next round; the tasks limit bounds how many there can be). */
        for (unsigned round = 0; round < KILL_ROUNDS; round++) {
                _cleanup_close_ int pfd = openat(fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
                char buf[4096];
                bool any = false;
                ssize_t n;

                if (pfd < 0)
                        return negative_errno();
                while ((n = read(pfd, buf, sizeof(buf) - 1)) > 0) {
                        buf[n] = '\0';
                        for (char *save = NULL, *w = strtok_r(buf, "\n", &save); w; w = strtok_r(NULL, "\n", &save)) {
                                long pid = strtol(w, NULL, 10);
                                if (pid > 1 && kill((pid_t) pid, SIGKILL) >= 0)
                                        any = true;
                        }
                }
                if (!any)
                        return 0;
        }
        return -EBUSY;
}

Cgroup *cgroup_free(Cgroup *cg) {
        if (!cg)
                return NULL;
        /* Normally empty by now (the keeper, which reaps the sandbox, is gone). */
        if (fd_of(cg, CTRL_PIDS) >= 0)
                (void) cgroup_kill(cg);
        for (size_t i = 0; i < cg->root->n; i++) {
                if (cg->fd[i] < 0)
                        continue;
                cg->fd[i] = safe_close(cg->fd[i]);
                if (unlinkat(cg->root->h[i].fd, cg->name, AT_REMOVEDIR) < 0)
                        log_debug_errno(errno, "Cannot remove cgroup %s yet (removed at the next start): %m",
                                        cg->name);
        }
        free(cg->name);
        free(cg);
        return NULL;
}
