/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Execution records and managed-run logs under $STATE_DIRECTORY/records, surviving restarts. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "execution/records.h"
#include "util/dirent-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/string-table.h"
#include "workspace/workspace.h"

#define RECORD_MAX_BYTES (64U << 20)

static const char *const record_stream_table[_RECORD_STREAM_MAX] = {
        [RECORD_STREAM_STDOUT] = "stdout",
        [RECORD_STREAM_STDERR] = "stderr",
};

DEFINE_STRING_TABLE_LOOKUP(record_stream, RecordStream)

int records_open(const char *state_dir) {
        _cleanup_free_ char *p = NULL;
        int fd;

        if (asprintf(&p, "%s/records", state_dir) < 0)
                return -ENOMEM;
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        return fd < 0 ? negative_errno() : fd;
}

/* Write @o into @fd (the temporary file @tmp), optionally fsync, rename to @id's record, optionally
 * fsync the directory. @fd is closed; @tmp removed on failure. */
static int record_commit(int dir_fd, const char *id, const char *tmp, int fd, json_object *o, bool durable) {
        _cleanup_close_ int fd_close = fd;
        char name[160];
        const char *s;
        int r;

        (void) snprintf(name, sizeof(name), "%s.json", id);
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        r = loop_write(fd, s, strlen(s));
        if (r >= 0 && durable && fsync(fd) < 0)
                r = negative_errno();
        fd_close = safe_close(fd_close);
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = negative_errno();
        if (r < 0) {
                (void) unlinkat(dir_fd, tmp, 0);
                return r;
        }
        if (durable)
                (void) fsync(dir_fd);
        return 0;
}

/* The temporary file of @id's record: ".<id>.json<suffix>", created (truncated). Return: fd or -errno. */
static int record_tmp_open(int dir_fd, const char *id, const char *suffix, char tmp[static 192]) {
        int fd;

        if (!workspace_id_valid(id))
                return -EINVAL;
        (void) snprintf(tmp, 192, ".%s.json%s", id, suffix);
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        return fd < 0 ? negative_errno() : fd;
}

int record_write(int dir_fd, const char *id, json_object *o, bool durable) {
        char tmp[192];
        int fd;

        fd = record_tmp_open(dir_fd, id, ".tmp", tmp);
        if (fd < 0)
                return fd;
        return record_commit(dir_fd, id, tmp, fd, o, durable);
}

int record_prepare(int dir_fd, const char *id) {
        char tmp[192];

        return record_tmp_open(dir_fd, id, ".pre", tmp);
}

int record_write_prepared(int dir_fd, const char *id, int *fd, json_object *o, bool durable) {
        char tmp[192];

        if (*fd < 0)
                return record_write(dir_fd, id, o, durable);
        /* Only ids that record_prepare() took get here. */
        (void) snprintf(tmp, sizeof(tmp), ".%s.json.pre", id);
        return record_commit(dir_fd, id, tmp, STEAL_FD(*fd), o, durable);
}

void record_prepared_discard(int dir_fd, const char *id, int *fd) {
        char tmp[192];

        if (*fd < 0)
                return;
        *fd = safe_close(*fd);
        (void) snprintf(tmp, sizeof(tmp), ".%s.json.pre", id);
        (void) unlinkat(dir_fd, tmp, 0);
}

int record_read(int dir_fd, const char *id, json_object **ret) {
        char name[160];
        _cleanup_free_ char *buf = NULL;
        json_object *o;
        size_t n;
        int r;

        if (!workspace_id_valid(id))
                return -EINVAL;
        (void) snprintf(name, sizeof(name), "%s.json", id);
        r = read_file_limited(dir_fd, name, O_NOFOLLOW, RECORD_MAX_BYTES, 0, &buf, &n);
        if (r == -EBADFD || r == -EFBIG)
                return -EBADMSG;        /* not a regular file, or too large for a record */
        if (r < 0)
                return r;
        o = json_tokener_parse(buf);
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

static int record_log_openat(int dir_fd, const char *id, RecordStream s, int flags, mode_t mode) {
        char name[160];
        int fd;

        if (!workspace_id_valid(id) || !record_stream_to_string(s))
                return -EINVAL;
        (void) snprintf(name, sizeof(name), "%s.%s", id, record_stream_to_string(s));
        fd = openat(dir_fd, name, flags | O_CLOEXEC | O_NOFOLLOW, mode);
        return fd < 0 ? negative_errno() : fd;
}

int record_log_create(int dir_fd, const char *id, RecordStream s) {
        return record_log_openat(dir_fd, id, s, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
}

int record_log_open(int dir_fd, const char *id, RecordStream s) {
        return record_log_openat(dir_fd, id, s, O_RDONLY, 0);
}

int records_foreach_running(int dir_fd, void (*cb)(const char *id, json_object *record, void *userdata),
                            void *userdata) {
        _cleanup_(closedirp) DIR *d = NULL;
        int n = 0, r;

        r = opendir_at(dir_fd, ".", &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d) {
                size_t l = strlen(de->d_name);
                char id[160];
                json_object *o = NULL, *state;

                if (de->d_name[0] == '.' || l <= 5 || l >= sizeof(id) || !streq(de->d_name + l - 5, ".json"))
                        continue;
                memcpy(id, de->d_name, l - 5);
                id[l - 5] = '\0';
                if (record_read(dir_fd, id, &o) < 0)
                        continue;
                if (json_object_object_get_ex(o, "state", &state) &&
                    json_object_is_type(state, json_type_string) && streq(json_object_get_string(state), "running")) {
                        cb(id, o, userdata);
                        n++;
                }
                json_object_put(o);
        }
        return n;
}

typedef struct RecordAge {
        char *id;
        struct timespec mtime;
} RecordAge;

static int cmp_age(const void *a, const void *b) {
        const RecordAge *x = a, *y = b;

        if (x->mtime.tv_sec != y->mtime.tv_sec)
                return x->mtime.tv_sec > y->mtime.tv_sec ? -1 : 1;
        if (x->mtime.tv_nsec != y->mtime.tv_nsec)
                return x->mtime.tv_nsec > y->mtime.tv_nsec ? -1 : 1;
        return strcmp(x->id, y->id);
}

int records_prune(int dir_fd, unsigned keep) {
        _cleanup_(closedirp) DIR *d = NULL;
        RecordAge *list = NULL;
        size_t n = 0, cap = 0;
        int removed = 0, r;

        r = opendir_at(dir_fd, ".", &d);
        if (r < 0)
                return r;
        FOREACH_DIRENT(de, d) {
                size_t l = strlen(de->d_name);
                struct stat st;

                if (de->d_name[0] == '.' && l > 9 &&
                    (streq(de->d_name + l - 9, ".json.tmp") || streq(de->d_name + l - 9, ".json.pre"))) {
                        /* A temporary file that a daemon died with (an hour old: another daemon on
                         * the same state directory may be writing a young one). */
                        if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode) &&
                            st.st_mtim.tv_sec + 3600 < time(NULL))
                                (void) unlinkat(dir_fd, de->d_name, 0);
                        continue;
                }
                if (de->d_name[0] == '.' || l <= 5 || !streq(de->d_name + l - 5, ".json"))
                        continue;
                if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (n == cap) {
                        RecordAge *t = realloc(list, sizeof(*list) * (cap = cap ? cap * 2 : 256));
                        if (!t)
                                break;
                        list = t;
                }
                list[n].id = strndup(de->d_name, l - 5);
                list[n].mtime = st.st_mtim;
                if (list[n].id)
                        n++;
        }
        closedirp(&d);

        if (n > keep) {
                qsort(list, n, sizeof(*list), cmp_age);
                for (size_t i = keep; i < n; i++) {
                        char name[192];
                        (void) snprintf(name, sizeof(name), "%s.json", list[i].id);
                        if (unlinkat(dir_fd, name, 0) == 0)
                                removed++;
                        for (int s = 0; s < _RECORD_STREAM_MAX; s++) {
                                (void) snprintf(name, sizeof(name), "%s.%s", list[i].id, record_stream_table[s]);
                                (void) unlinkat(dir_fd, name, 0);
                        }
                }
        }
        for (size_t i = 0; i < n; i++)
                free(list[i].id);
        free(list);
        return removed;
}

uint64_t process_start_time(pid_t pid) {
        char path[64], buf[1024], *p;
        unsigned long long start = 0;
        FILE *f;
        size_t n;

        (void) snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* The command name may contain spaces and parentheses: fields start after the last ')'. */
        p = strrchr(buf, ')');
        if (!p)
                return 0;
        /* After ") ": field 3 (state) … field 22 (starttime): skip 19 fields. */
        p++;
        for (int i = 0; i < 20 && p; i++) {
                p = strchr(p + 1, ' ');
        }
        if (!p || sscanf(p, " %llu", &start) != 1)
                return 0;
        return start;
}
