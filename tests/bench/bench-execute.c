/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Latency and throughput of POST /execute-shell running `true`, next to the floors measured in
 * the same run: a bare fork+exec of `true`, and a bare bwrap with the daemon's own arguments
 * (same probe, same argv builder, same seccomp program, same keeper-less fd layout). The three
 * take turns in runs of INTERLEAVE, so that load from elsewhere weighs on them alike.
 *
 *   bench-execute --url http://127.0.0.1:PORT --token-file F --key-file F --state-dir D [-n 500]
 *                 [--environment NAME]
 *
 * Before each floor's turn the daemon's pool of sandboxes built ahead ([Execution] Prebuilt=) is let
 * settle (it builds in the quiet after runs): its builds would otherwise weigh on the floors only.
 * The report gives the runs the pool served apart from the cold ones, and bursts of 20 requests
 * after an idle second, the p95s, and python `pass` over POST /execute next to python3 -c pass in a
 * cold bare bwrap of the daemon's argv, in turns too (issue 23).
 *
 * With --environment, a fourth path takes its turn in the same runs: the same request naming the
 * environment (its prefix bound read-only at /opt/science-env, the host's interpreters covered),
 * and the report adds its median over the plain request's (DESIGN.md §14: at most 1.10).
 */

#include <curl/curl.h>
#include <json-c/json.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http/auth.h"
#include "sandbox/sandbox-argv.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp-profile.h"
#include "util/fd-util.h"
#include "util/macro.h"
#include "util/strv.h"

static uint64_t now_ns(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

typedef struct Stats {
        double median_ms, p95_ms, p99_ms, mean_ms;
} Stats;

/* Over a sorted copy: the runs keep their order (the per-batch ratios and the paths apart read them
 * by index). */
static Stats stats(const uint64_t *runs, size_t n) {
        uint64_t *v = malloc(n * sizeof(*v));
        Stats s = {};
        double sum = 0;

        if (!v)
                abort();
        memcpy(v, runs, n * sizeof(*v));
        qsort(v, n, sizeof(*v), cmp_u64);
        for (size_t i = 0; i < n; i++)
                sum += (double) v[i];
        s.median_ms = (double) v[n / 2] / 1e6;
        s.p95_ms = (double) v[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1] / 1e6;
        s.p99_ms = (double) v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 1e6;
        s.mean_ms = sum / (double) n / 1e6;
        free(v);
        return s;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* The median of v[0..n) (copied: @v keeps its order). */
static double median_of(const uint64_t *v, size_t n) {
        uint64_t *c = malloc(n * sizeof(*c));
        double m;

        memcpy(c, v, n * sizeof(*c));
        qsort(c, n, sizeof(*c), cmp_u64);
        m = (double) c[n / 2];
        free(c);
        return m;
}

static char *read_secret(const char *path) {
        char buf[4200];
        FILE *f = fopen(path, "re");
        size_t n;

        if (!f)
                return NULL;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        while (n > 0 && strchr(" \r\n\t", buf[n - 1]))
                buf[--n] = '\0';
        return strdup(buf);
}

#define INTERLEAVE 20   /* runs of each kind in a row */

/* ---- floors ---------------------------------------------------------------------------------- */

static void floor_fork_exec(uint64_t *lat, size_t n) {
        char *const argv[] = { (char *) "/usr/bin/true", NULL };
        char *const envp[] = { NULL };

        for (size_t i = 0; i < n; i++) {
                uint64_t t0 = now_ns();
                pid_t pid = fork();
                if (pid == 0) {
                        execve(argv[0], argv, envp);
                        _exit(127);
                }
                (void) waitpid(pid, NULL, 0);
                lat[i] = now_ns() - t0;
        }
}

/* The daemon's argv for @payload in @workspace, built once (the probe runs bwrap a few times). */
static int bwrap_prepare(const char *bwrap, const char *workspace, char **payload, char ***ret_argv) {
        SandboxProbeReport probe = {};
        int r;

        r = sandbox_probe(bwrap, &probe);
        if (r < 0 || !probe.usable) {
                fprintf(stderr, "sandbox probe failed: %s\n", probe.reason ?: "?");
                return -EIO;
        }
        SandboxSpec spec = {
                .workspace = workspace, .cwd = "", .argv = payload, .tmp_size = 256ULL << 20,
                .seccomp_fd = SANDBOX_FD_SECCOMP, .passwd_fd = SANDBOX_FD_PASSWD, .group_fd = SANDBOX_FD_GROUP,
                .hosts_fd = SANDBOX_FD_HOSTS, .code_fd = -1,
        };
        r = sandbox_argv_build(&spec, &probe.probe, ret_argv);
        sandbox_probe_report_done(&probe);
        return r;
}

/* The floor runs bwrap as the daemon runs it: as the owner of its state directory (a daemon
 * started as root became that user; an unprivileged bwrap costs more than root's). */
static uid_t floor_uid;
static gid_t floor_gid;

static int floor_bwrap(const char *bwrap, char **argv, uint64_t *lat, size_t n) {
        for (size_t i = 0; i < n; i++) {
                /* Like the daemon: a fresh seccomp memfd and identity files per launch. */
                uint64_t t0 = now_ns();
                _cleanup_free_ char *err = NULL;
                int sfd = -1, pfd, gfd, hfd;

                if (seccomp_program_for_variant(SECCOMP_VARIANT_BASELINE, &sfd, &err) < 0)
                        return -EIO;
                pfd = memfd_new_data("p", "sandbox:x:1000:1000::/workspace:/bin/sh\n", 40);
                gfd = memfd_new_data("g", "sandbox:x:1000:\n", 16);
                hfd = memfd_new_data("h", "127.0.0.1 localhost\n", 20);
                pid_t pid = fork();
                if (pid == 0) {
                        int src[] = { sfd, pfd, gfd, hfd }, high[4];
                        for (int k = 0; k < 4; k++)
                                high[k] = fcntl(src[k], F_DUPFD, 100);
                        for (int k = 0; k < 4; k++)
                                (void) dup2(high[k], 3 + k);
                        if (geteuid() != floor_uid &&
                            (setgroups(0, NULL) < 0 || setresgid(floor_gid, floor_gid, floor_gid) < 0 ||
                             setresuid(floor_uid, floor_uid, floor_uid) < 0))
                                _exit(126);
                        execve(bwrap, argv, (char *[]) { (char *) "PATH=/usr/bin:/bin", NULL });
                        _exit(127);
                }
                int status;
                (void) waitpid(pid, &status, 0);
                /* bwrap exits once its pid 1 has reported the payload's status, before that pid 1
                 * (and so the pid namespace) is gone; as a subreaper we get and reap it, as the
                 * daemon's keeper does: the floor is the sandbox run to its end. */
                while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                        ;
                lat[i] = now_ns() - t0;
                safe_close(sfd);
                safe_close(pfd);
                safe_close(gfd);
                safe_close(hfd);
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        fprintf(stderr, "bare bwrap failed (status %d)\n", status);
                        return -EIO;
                }
        }
        return 0;
}

/* The throughput floor at @conc: @conc workers, each a subreaper running its share of @total bare
 * bwrap sandboxes one after another (as floor_bwrap()), all at once. Return: sandboxes per second,
 * or a negative value if one failed. */
static double floor_bwrap_rate(const char *bwrap, char **argv, unsigned conc, size_t total) {
        size_t share = (total + conc - 1) / conc;
        uint64_t t0 = now_ns();
        pid_t workers[64];
        bool failed = false;

        if (conc == 0 || conc > 64)
                return -1;
        for (unsigned w = 0; w < conc; w++) {
                workers[w] = fork();
                if (workers[w] < 0)
                        return -1;
                if (workers[w] == 0) {
                        uint64_t *lat = calloc(share, sizeof(uint64_t));
                        if (!lat || prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                                _exit(1);
                        _exit(floor_bwrap(bwrap, argv, lat, share) < 0 ? 1 : 0);
                }
        }
        for (unsigned w = 0; w < conc; w++) {
                int status;
                if (waitpid(workers[w], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        failed = true;
        }
        return failed ? -1 : (double) (share * conc) / ((double) (now_ns() - t0) / 1e9);
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

typedef struct Client {
        CURL *curl;
        struct curl_slist *headers;
        char body[256];
        char response[4096];
        size_t response_len;
        uint64_t t0;
        long status;
} Client;

static const char *arg_url, *arg_token, *arg_key, *arg_environment;
static bool use_environment;   /* the requests of run_http() name arg_environment */
static bool use_python;        /* the requests of run_http() are POST /execute python `pass` */
/* Which path served each measured request ("sandbox": "prebuilt" or "cold"), when recorded. */
static bool *served_prebuilt;

static size_t on_data(char *p, size_t size, size_t nmemb, void *userdata) {
        Client *c = userdata;
        size_t n = size * nmemb, room = sizeof(c->response) - 1 - c->response_len;

        memcpy(c->response + c->response_len, p, n < room ? n : room);
        c->response_len += n < room ? n : room;
        c->response[c->response_len] = '\0';
        return n;
}

static void client_prepare(Client *c, unsigned workspace, uint64_t seq) {
        char ts[32], sig[65], h[256], url[512];

        const char *path = use_python ? "/execute" : "/execute-shell";

        (void) snprintf(c->body, sizeof(c->body),
                        "{%s,\"workspaceId\":\"bench-%u\",\"executionId\":\"bench-%d-%" PRIu64 "\"%s%s%s}",
                        use_python ? "\"language\":\"python\",\"code\":\"pass\"" : "\"command\":\"true\"",
                        workspace, (int) getpid(), seq, use_environment ? ",\"environment\":\"" : "",
                        use_environment ? arg_environment : "", use_environment ? "\"" : "");
        (void) snprintf(ts, sizeof(ts), "%lld", (long long) time(NULL));
        auth_signature_compute((const uint8_t *) arg_key, strlen(arg_key), ts, "POST", path,
                               c->body, strlen(c->body), sig);
        curl_slist_free_all(c->headers);
        c->headers = NULL;
        (void) snprintf(h, sizeof(h), "Authorization: Bearer %s", arg_token);
        c->headers = curl_slist_append(c->headers, h);
        (void) snprintf(h, sizeof(h), "X-Sandbox-Timestamp: %s", ts);
        c->headers = curl_slist_append(c->headers, h);
        (void) snprintf(h, sizeof(h), "X-Sandbox-Signature: v1=%s", sig);
        c->headers = curl_slist_append(c->headers, h);
        c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
        c->headers = curl_slist_append(c->headers, "Expect:");
        (void) snprintf(url, sizeof(url), "%s%s", arg_url, path);
        curl_easy_setopt(c->curl, CURLOPT_URL, url);
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(c->curl, CURLOPT_NOPROXY, "*");
        c->response_len = 0;
        c->t0 = now_ns();
}

static bool client_ok(Client *c) {
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->status);
        if (c->status != 200 || !strstr(c->response, "\"exitCode\":0")) {
                fprintf(stderr, "request failed: HTTP %ld: %s\n", c->status, c->response);
                return false;
        }
        return true;
}

static size_t on_health_data(char *p, size_t size, size_t nmemb, void *userdata) {
        char *buf = userdata;
        size_t n = size * nmemb, l = strlen(buf), room = 8191 - l;

        memcpy(buf + l, p, n < room ? n : room);
        buf[l + (n < room ? n : room)] = '\0';
        return n;
}

/* Before a floor's turn: wait until the daemon builds no sandbox ahead ([Execution] Prebuilt=, built
 * in the quiet after runs), so that its builds do not weigh on the floor (at most 5 s). */
static void wait_pool_settled(void) {
        char url[512], buf[8192], *bufp = buf;
        CURL *curl = curl_easy_init();

        (void) snprintf(url, sizeof(url), "%s/health", arg_url);
        for (unsigned i = 0; curl && i < 500; i++) {
                json_object *o, *pre = NULL, *shapes = NULL, *max = NULL;
                bool settled = true;

                buf[0] = '\0';
                curl_easy_setopt(curl, CURLOPT_URL, url);
                curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_health_data);
                curl_easy_setopt(curl, CURLOPT_WRITEDATA, bufp);
                curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
                if (curl_easy_perform(curl) != CURLE_OK)
                        break;
                o = json_tokener_parse(buf);
                if (o && json_object_object_get_ex(o, "sandbox", &pre) && json_object_object_get_ex(pre, "prebuilt", &pre) &&
                    json_object_object_get_ex(pre, "shapes", &shapes) && json_object_object_get_ex(pre, "max", &max)) {
                        json_object_object_foreach(shapes, name, shape) {
                                json_object *w, *r, *b, *t;
                                (void) name;
                                if (json_object_object_get_ex(shape, "building", &b) && json_object_get_int(b) > 0)
                                        settled = false;
                                /* its target (PrebuiltBurst=: more after a burst), else max */
                                if (!json_object_object_get_ex(shape, "target", &t))
                                        t = max;
                                if (json_object_object_get_ex(shape, "wanted", &w) && json_object_get_boolean(w) &&
                                    json_object_object_get_ex(shape, "ready", &r) &&
                                    json_object_get_int(r) < json_object_get_int(t))
                                        settled = false;
                        }
                }
                json_object_put(o);
                if (settled)
                        break;
                (void) usleep(10 * 1000);
        }
        if (curl)
                curl_easy_cleanup(curl);
}

/* @concurrency clients, each in its own workspace, @total requests overall. */
static int run_http(unsigned concurrency, size_t total, uint64_t *lat, double *ret_seconds) {
        CURLM *multi = curl_multi_init();
        Client *clients = calloc(concurrency, sizeof(Client));
        size_t started = 0, done = 0;
        static uint64_t seq = 0;
        uint64_t t_start = now_ns();
        int running = 0, rc = 0;

        for (unsigned i = 0; i < concurrency && started < total; i++, started++) {
                clients[i].curl = curl_easy_init();
                curl_easy_setopt(clients[i].curl, CURLOPT_PRIVATE, &clients[i]);
                client_prepare(&clients[i], i, seq++);
                curl_multi_add_handle(multi, clients[i].curl);
        }
        while (done < total) {
                CURLMsg *msg;
                int left;

                curl_multi_perform(multi, &running);
                while ((msg = curl_multi_info_read(multi, &left))) {
                        Client *c;
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &c);
                        curl_multi_remove_handle(multi, c->curl);
                        if (msg->data.result != CURLE_OK || !client_ok(c)) {
                                fprintf(stderr, "curl: %s\n", curl_easy_strerror(msg->data.result));
                                rc = -EIO;
                                goto out;
                        }
                        if (lat)
                                lat[done] = now_ns() - c->t0;
                        if (lat && served_prebuilt)
                                served_prebuilt[done] = strstr(c->response, "\"sandbox\":\"prebuilt\"") != NULL;
                        done++;
                        if (started < total) {
                                client_prepare(c, (unsigned) (c - clients), seq++);
                                curl_multi_add_handle(multi, c->curl);
                                started++;
                        }
                }
                if (done < total)
                        curl_multi_poll(multi, NULL, 0, 1000, NULL);
        }
out:
        *ret_seconds = (double) (now_ns() - t_start) / 1e9;
        for (unsigned i = 0; i < concurrency; i++) {
                if (!clients[i].curl)
                        continue;
                curl_multi_remove_handle(multi, clients[i].curl);
                curl_easy_cleanup(clients[i].curl);
                curl_slist_free_all(clients[i].headers);
        }
        free(clients);
        curl_multi_cleanup(multi);
        return rc;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "url", required_argument, NULL, 'u' },
                { "token-file", required_argument, NULL, 't' },
                { "key-file", required_argument, NULL, 'k' },
                { "state-dir", required_argument, NULL, 's' },
                { "bwrap", required_argument, NULL, 'b' },
                { "requests", required_argument, NULL, 'n' },
                { "label", required_argument, NULL, 'l' },
                { "environment", required_argument, NULL, 'e' },
                {}
        };
        const char *state = NULL, *bwrap = "/usr/bin/bwrap", *label = "unscoped";
        size_t n = 500;
        char workspace[512];
        double secs;
        int c;

        while ((c = getopt_long(argc, argv, "n:", options, NULL)) >= 0)
                switch (c) {
                case 'u': arg_url = optarg; break;
                case 't': arg_token = read_secret(optarg); break;
                case 'k': arg_key = read_secret(optarg); break;
                case 's': state = optarg; break;
                case 'b': bwrap = optarg; break;
                case 'n': n = strtoul(optarg, NULL, 10); break;
                case 'l': label = optarg; break;
                case 'e': arg_environment = optarg; break;
                default: return 2;
                }
        if (!arg_url || !arg_token || !arg_key || !state || n < 10) {
                fprintf(stderr, "usage: bench-execute --url U --token-file F --key-file F --state-dir D [-n N]\n");
                return 2;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
                perror("PR_SET_CHILD_SUBREAPER");
                return 1;
        }

        uint64_t *lat = calloc(n, sizeof(uint64_t));
        (void) snprintf(workspace, sizeof(workspace), "%s/bench-floor", state);
        (void) mkdir(workspace, 0700);
        {
                struct stat st;
                if (stat(state, &st) < 0) {
                        perror(state);
                        return 1;
                }
                floor_uid = st.st_uid;
                floor_gid = st.st_gid;
                if (chown(workspace, floor_uid, floor_gid) < 0 && geteuid() == 0) {
                        perror(workspace);
                        return 1;
                }
        }

        uint64_t *lat_fork = calloc(n, sizeof(uint64_t)), *lat_bwrap = calloc(n, sizeof(uint64_t));
        uint64_t *lat_env = calloc(n, sizeof(uint64_t));
        bool *prebuilt = calloc(n, sizeof(bool));
        _cleanup_strv_free_ char **bwrap_argv = NULL, **python_argv = NULL;
        double secs1 = 0;

        if (bwrap_prepare(bwrap, workspace, (char *[]) { (char *) "true", NULL }, &bwrap_argv) < 0 ||
            bwrap_prepare(bwrap, workspace, (char *[]) { (char *) "python3", (char *) "-c", (char *) "pass", NULL },
                          &python_argv) < 0)
                return 1;
        /* Warm up every path once so that page cache and first-time costs do not skew. */
        floor_fork_exec(lat, 10);
        if (floor_bwrap(bwrap, bwrap_argv, lat, 10) < 0 || run_http(1, 10, NULL, &secs) < 0)
                return 1;
        if (arg_environment) {
                use_environment = true;
                if (run_http(1, 10, NULL, &secs) < 0)
                        return 1;
                use_environment = false;
        }

        /* The floors and the HTTP path take turns, a few runs each, so that whatever else the
         * machine does at the time weighs on all three alike. */
        for (size_t done = 0; done < n; done += INTERLEAVE) {
                size_t k = n - done < INTERLEAVE ? n - done : INTERLEAVE;

                wait_pool_settled();
                floor_fork_exec(lat_fork + done, k);
                if (floor_bwrap(bwrap, bwrap_argv, lat_bwrap + done, k) < 0)
                        return 1;
                served_prebuilt = prebuilt + done;
                if (run_http(1, k, lat + done, &secs) < 0)
                        return 1;
                served_prebuilt = NULL;
                secs1 += secs;
                if (arg_environment) {
                        use_environment = true;
                        if (run_http(1, k, lat_env + done, &secs) < 0)
                                return 1;
                        use_environment = false;
                }
        }
        /* Each batch's own ratio (its HTTP median over its floor median, taken minutes apart at
         * most): their spread shows how much of the overall ratio is drift of the machine. */
        size_t n_batches = (n + INTERLEAVE - 1) / INTERLEAVE;
        double *batch = calloc(n_batches, sizeof(double));
        for (size_t b = 0; b < n_batches; b++) {
                size_t off = b * INTERLEAVE, k = n - off < INTERLEAVE ? n - off : INTERLEAVE;
                batch[b] = median_of(lat + off, k) / median_of(lat_bwrap + off, k);
        }
        qsort(batch, n_batches, sizeof(double), cmp_double);
        double batch_med = batch[n_batches / 2], batch_p25 = batch[n_batches / 4],
               batch_p75 = batch[(n_batches * 3) / 4 < n_batches ? (n_batches * 3) / 4 : n_batches - 1];
        free(batch);

        /* Python `pass` (POST /execute, the code shape) against python3 -c pass in a cold bare bwrap
         * of the daemon's argv, in turns as above: n/2 of each (issue 23: at most 0.85). */
        size_t n_py = n / 2;
        uint64_t *lat_py = calloc(n_py, sizeof(uint64_t)), *lat_py_floor = calloc(n_py, sizeof(uint64_t));
        bool *py_prebuilt = calloc(n_py, sizeof(bool));
        use_python = true;
        if (floor_bwrap(bwrap, python_argv, lat_py_floor, 5) < 0 || run_http(1, 5, NULL, &secs) < 0)
                return 1;
        for (size_t done = 0; done < n_py; done += INTERLEAVE) {
                size_t k = n_py - done < INTERLEAVE ? n_py - done : INTERLEAVE;

                wait_pool_settled();
                if (floor_bwrap(bwrap, python_argv, lat_py_floor + done, k) < 0)
                        return 1;
                served_prebuilt = py_prebuilt + done;
                if (run_http(1, k, lat_py + done, &secs) < 0)
                        return 1;
                served_prebuilt = NULL;
        }
        use_python = false;
        size_t n_py_prebuilt = 0;
        for (size_t i = 0; i < n_py; i++)
                n_py_prebuilt += py_prebuilt[i];
        double *py_batch = calloc((n_py + INTERLEAVE - 1) / INTERLEAVE, sizeof(double));
        size_t n_py_batches = 0;
        for (size_t off = 0; off < n_py; off += INTERLEAVE) {
                size_t k = n_py - off < INTERLEAVE ? n_py - off : INTERLEAVE;
                py_batch[n_py_batches++] = median_of(lat_py + off, k) / median_of(lat_py_floor + off, k);
        }
        qsort(py_batch, n_py_batches, sizeof(double), cmp_double);
        Stats py_s = stats(lat_py, n_py), py_floor_s = stats(lat_py_floor, n_py);

        /* Bursts of 20 after an idle second (issue 23): what a pool of sandboxes built ahead serves
         * at once, and what it has to build meanwhile; their p50 over the floor's median. */
        uint64_t lat_burst[5 * 20];
        for (unsigned b = 0; b < 5; b++) {
                (void) usleep(1000 * 1000);
                if (run_http(1, 20, lat_burst + b * 20, &secs) < 0)
                        return 1;
        }
        Stats burst_s = stats(lat_burst, 5 * 20);

        Stats fork_s = stats(lat_fork, n);
        Stats bwrap_s = stats(lat_bwrap, n);
        Stats http_s = stats(lat, n);
        double rps1 = (double) n / secs1;
        if (run_http(2, n, NULL, &secs) < 0)
                return 1;
        double rps2 = (double) n / secs;
        if (run_http(8, n, NULL, &secs) < 0)
                return 1;
        double rps8 = (double) n / secs;
        /* Issue 23: with 8 clients the runner keeps up with bare bwrap at 8 (its build rate). */
        wait_pool_settled();
        double bwrap_rps8 = floor_bwrap_rate(bwrap, bwrap_argv, 8, n);
        if (bwrap_rps8 < 0) {
                fprintf(stderr, "bare bwrap failed at 8 in parallel\n");
                return 1;
        }

        printf("# bench-execute (%s), %zu requests each\n", label, n);
        printf("fork+exec true        median %7.3f ms  p99 %7.3f ms\n", fork_s.median_ms, fork_s.p99_ms);
        printf("bare bwrap true       median %7.3f ms  p99 %7.3f ms\n", bwrap_s.median_ms, bwrap_s.p99_ms);
        printf("POST /execute-shell   median %7.3f ms  p99 %7.3f ms\n", http_s.median_ms, http_s.p99_ms);
        printf("ratio http/bwrap      median %.3f  p99 %.3f\n", http_s.median_ms / bwrap_s.median_ms,
               http_s.p99_ms / bwrap_s.p99_ms);
        printf("ratio per batch of %d  median %.3f  (p25 %.3f, p75 %.3f; %zu batches)\n", INTERLEAVE, batch_med, batch_p25,
               batch_p75, n_batches);
        printf("p95                   POST /execute-shell %.3f ms, bare bwrap %.3f ms: %.3f of the floor's median, "
               "%.3f of its p95\n", http_s.p95_ms, bwrap_s.p95_ms, http_s.p95_ms / bwrap_s.median_ms,
               http_s.p95_ms / bwrap_s.p95_ms);
        printf("python pass           bare bwrap median %7.3f ms, POST /execute median %7.3f ms: %.3f "
               "(per batch median %.3f; %zu of %zu served prebuilt)\n", py_floor_s.median_ms, py_s.median_ms,
               py_s.median_ms / py_floor_s.median_ms, py_batch[n_py_batches / 2], n_py_prebuilt, n_py);
        printf("throughput            1 client %.1f/s, 2 clients %.1f/s, 8 clients %.1f/s\n", rps1, rps2, rps8);
        printf("throughput at 8       bare bwrap %.1f/s; 8 clients %.3f of it\n", bwrap_rps8, rps8 / bwrap_rps8);
        printf("burst of 20 after 1 s median %7.3f ms (%.3f of bare bwrap), 5 bursts\n", burst_s.median_ms,
               burst_s.median_ms / bwrap_s.median_ms);
        size_t n_served_prebuilt = 0;
        {
                /* The paths apart ([Execution] Prebuilt=): how many the pool served, and each one's median. */
                uint64_t *pre = calloc(n, sizeof(uint64_t)), *cold = calloc(n, sizeof(uint64_t));
                size_t n_pre = 0, n_cold = 0;

                for (size_t i = 0; i < n; i++) {
                        if (prebuilt[i])
                                pre[n_pre++] = lat[i];
                        else
                                cold[n_cold++] = lat[i];
                }
                n_served_prebuilt = n_pre;
                printf("served prebuilt       %zu of %zu", n_pre, n);
                if (n_pre > 0)
                        printf(", median %.3f ms (%.3f of bare bwrap)", median_of(pre, n_pre) / 1e6,
                               median_of(pre, n_pre) / 1e6 / bwrap_s.median_ms);
                if (n_cold > 0)
                        printf("; cold median %.3f ms (%.3f)", median_of(cold, n_cold) / 1e6,
                               median_of(cold, n_cold) / 1e6 / bwrap_s.median_ms);
                printf("\n");
                free(pre);
                free(cold);
        }
        if (arg_environment) {
                Stats env_s = stats(lat_env, n);
                double *eb = calloc(n_batches, sizeof(double));
                for (size_t b = 0; b < n_batches; b++) {
                        size_t off = b * INTERLEAVE, k = n - off < INTERLEAVE ? n - off : INTERLEAVE;
                        eb[b] = median_of(lat_env + off, k) / median_of(lat + off, k);
                }
                qsort(eb, n_batches, sizeof(double), cmp_double);
                printf("POST /execute-shell with \"environment\": \"%s\"  median %7.3f ms  p99 %7.3f ms\n",
                       arg_environment, env_s.median_ms, env_s.p99_ms);
                printf("ratio environment/plain  median %.3f  per batch median %.3f (p25 %.3f, p75 %.3f)  (target <= 1.10)\n",
                       env_s.median_ms / http_s.median_ms, eb[n_batches / 2], eb[n_batches / 4],
                       eb[(n_batches * 3) / 4 < n_batches ? (n_batches * 3) / 4 : n_batches - 1]);
                printf("{\"label\":\"%s-environment\",\"n\":%zu,\"environment\":\"%s\",\"envMedianMs\":%.4f,"
                       "\"plainMedianMs\":%.4f,\"ratioEnvPlain\":%.4f,\"ratioEnvPlainBatchMedian\":%.4f,"
                       "\"ratioEnvPlainBatchP25\":%.4f,\"ratioEnvPlainBatchP75\":%.4f,\"batches\":%zu}\n",
                       label, n, arg_environment, env_s.median_ms, http_s.median_ms,
                       env_s.median_ms / http_s.median_ms, eb[n_batches / 2], eb[n_batches / 4],
                       eb[(n_batches * 3) / 4 < n_batches ? (n_batches * 3) / 4 : n_batches - 1], n_batches);
                free(eb);
        }
        printf("{\"label\":\"%s\",\"n\":%zu,\"forkMedianMs\":%.4f,\"bwrapMedianMs\":%.4f,\"bwrapP99Ms\":%.4f,"
               "\"httpMedianMs\":%.4f,\"httpP99Ms\":%.4f,\"ratioMedian\":%.4f,\"ratioBatchMedian\":%.4f,"
               "\"ratioBatchP25\":%.4f,\"ratioBatchP75\":%.4f,\"rps1\":%.1f,\"rps2\":%.1f,\"rps8\":%.1f,"
               "\"bwrapRps8\":%.1f,\"burstMedianMs\":%.4f,\"prebuiltServed\":%zu,\"httpP95Ms\":%.4f,"
               "\"bwrapP95Ms\":%.4f,\"pyN\":%zu,\"pyBwrapMedianMs\":%.4f,\"pyHttpMedianMs\":%.4f,"
               "\"pyRatioBatchMedian\":%.4f,\"pyRatioBatchP25\":%.4f,\"pyRatioBatchP75\":%.4f,"
               "\"pyPrebuiltServed\":%zu}\n",
               label, n, fork_s.median_ms, bwrap_s.median_ms, bwrap_s.p99_ms, http_s.median_ms, http_s.p99_ms,
               http_s.median_ms / bwrap_s.median_ms, batch_med, batch_p25, batch_p75, rps1, rps2, rps8, bwrap_rps8,
               burst_s.median_ms, n_served_prebuilt, http_s.p95_ms, bwrap_s.p95_ms, n_py, py_floor_s.median_ms,
               py_s.median_ms, py_batch[n_py_batches / 2], py_batch[n_py_batches / 4],
               py_batch[(n_py_batches * 3) / 4 < n_py_batches ? (n_py_batches * 3) / 4 : n_py_batches - 1],
               n_py_prebuilt);
        free(lat);
        free(lat_fork);
        free(lat_bwrap);
        free(lat_env);
        free(prebuilt);
        free(lat_py);
        free(lat_py_floor);
        free(py_prebuilt);
        free(py_batch);
        curl_global_cleanup();
        return 0;
}
