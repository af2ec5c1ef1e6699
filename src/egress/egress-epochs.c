/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemon's side of egress: the network policy in force (config, then the API), one gateway
 * instance per policy revision (a systemd socket unit, or a child we socket-activate ourselves
 * when started by hand), and what a sandbox needs to use it.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <nettle/hmac.h>
#include <nettle/sha2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "build-config.h"
#include "egress/egress-policy.h"
#include "egress/egress-epochs.h"
#include "util/bus-util.h"
#include "util/json-util.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/helper-path.h"
#include "util/macro.h"
#include "util/string-util.h"

#define GATEWAY_IDLE_EXIT_SEC "60"

struct EgressEpochs {
        sd_event *event;
        sd_bus *bus;                     /* the daemon's system bus, under systemd only; not ours */
        char *state_dir, *runtime_dir;
        EgressPolicy *policy;            /* when the mode is "none" */
        EgressEpoch *epochs;             /* every revision still in use */
        EgressEpoch *current;
        bool under_systemd;
        char *gateway;                   /* sandbox-runner-egress, or NULL when missing */
        char *bridge;                    /* sandbox-runner-bridge, likewise */
        char build[9];                   /* the build of both: 8 hex digits, part of instance names */
        bool exiting;                    /* egress_epochs_free(): units are stopped synchronously */
        uint8_t auth_key[32];            /* keys the tags of upstream credentials (revisions, unit names) */
};

struct EgressEpoch {
        EgressEpochs *owner;
        EgressEpoch *next;
        EgressPolicy *policy;
        char *revision;
        char *instance;                  /* <revision>-<build>: the unit instance and file names */
        char *socket_path;
        char *policy_path;
        char *auth_path;                 /* <instance>.auth: the upstream's Proxy-Authorization (0600), or NULL */
        unsigned refs;                   /* executions using it, +1 while it is the current one */
        bool systemd;                    /* sandbox-runner-egress@<rev>.socket */
        bool failed;                     /* the unit could not be started */
        int listen_fd;                   /* by hand: ours, the gateway gets it as fd 3 */
        sd_event_source *listen_source;  /* by hand: start the gateway on the first connection */
        pid_t gateway_pid;
        sd_event_source *child_source;
};

/* ---- helper binaries ------------------------------------------------------------------------- */

const char *egress_bridge_path(EgressEpochs *ee) {
        return ee->bridge;
}

/* ---- epochs ---------------------------------------------------------------------------------- */

static void epoch_stop_gateway(EgressEpoch *ep) {
        ep->child_source = sd_event_source_disable_unref(ep->child_source);
        if (ep->gateway_pid > 0) {
                (void) kill(ep->gateway_pid, SIGTERM);
                (void) waitpid(ep->gateway_pid, NULL, 0);
                ep->gateway_pid = 0;
        }
}

/* StopUnit of a gateway's socket unit (its service goes with it). While the daemon runs, async;
 * when it exits, synchronously: polkit checks the caller, and one that has gone is refused. */
static void stop_unit(EgressEpochs *ee, const char *unit) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        if (!ee->exiting) {
                (void) bus_call_manager_async(ee->bus, NULL, "StopUnit", NULL, NULL, "ss", unit, "replace");
                return;
        }
        r = sd_bus_call_method(ee->bus, SYSTEMD_BUS_SERVICE, SYSTEMD_BUS_PATH, SYSTEMD_BUS_INTERFACE, "StopUnit",
                               &error, NULL, "ss", unit, "replace");
        if (r < 0)
                log_warning("Failed to stop %s: %s", unit, error.message ?: strerror(-r));
        sd_bus_error_free(&error);
}

static void epoch_free(EgressEpoch *ep) {
        EgressEpochs *ee = ep->owner;

        for (EgressEpoch **p = &ee->epochs; *p; p = &(*p)->next)
                if (*p == ep) {
                        *p = ep->next;
                        break;
                }
        epoch_stop_gateway(ep);
        ep->listen_source = sd_event_source_disable_unref(ep->listen_source);
        ep->listen_fd = safe_close(ep->listen_fd);
        if (ep->systemd && ee->bus) {
                _cleanup_free_ char *unit = NULL;
                if (asprintf(&unit, "sandbox-runner-egress@%s.socket", ep->instance) >= 0)
                        stop_unit(ee, unit);
        } else if (ep->socket_path)
                (void) unlink(ep->socket_path);
        if (ep->policy_path)
                (void) unlink(ep->policy_path);
        if (ep->auth_path)
                (void) unlink(ep->auth_path);
        free(ep->auth_path);
        egress_policy_free(ep->policy);
        free(ep->revision);
        free(ep->instance);
        free(ep->socket_path);
        free(ep->policy_path);
        free(ep);
}

void egress_epoch_release(EgressEpoch *ep) {
        if (!ep)
                return;
        if (ep->refs > 0)
                ep->refs--;
        if (ep->refs == 0)
                epoch_free(ep);
}

const char *egress_epoch_socket(const EgressEpoch *ep) {
        return ep->socket_path;
}

const char *egress_epoch_revision(const EgressEpoch *ep) {
        return ep->revision;
}

bool egress_epoch_open(const EgressEpoch *ep) {
        return ep && ep->policy && egress_policy_is_open(ep->policy);
}

static int on_gateway_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        EgressEpoch *ep = userdata;

        ep->gateway_pid = 0;
        ep->child_source = sd_event_source_disable_unref(ep->child_source);
        if (si->si_code != CLD_EXITED || si->si_status != 0)
                log_warning("Egress gateway for revision %s ended (%s %d).", ep->revision,
                            si->si_code == CLD_EXITED ? "status" : "signal", si->si_status);
        /* Socket activation by hand: the next connection starts it again. */
        if (ep->listen_source)
                (void) sd_event_source_set_enabled(ep->listen_source, SD_EVENT_ON);
        return 0;
}

static int epoch_spawn_gateway(EgressEpoch *ep) {
        EgressEpochs *ee = ep->owner;
        pid_t pid;
        int r;

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                char pidbuf[32];
                sigset_t none;
                char *argv[] = {
                        ee->gateway, (char *) "--policy", ep->policy_path,
                        (char *) "--idle-exit-sec", (char *) GATEWAY_IDLE_EXIT_SEC,
                        (char *) "--log-target", (char *) (log_to_journal() ? "journal" : "console"),
                        ep->auth_path ? (char *) "--upstream-auth" : NULL, ep->auth_path, NULL,
                };

                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (dup2(ep->listen_fd, 3) < 0)
                        _exit(127);
                (void) close_range(4, ~0U, 0);
                (void) snprintf(pidbuf, sizeof(pidbuf), "%d", (int) getpid());
                (void) setenv("LISTEN_FDS", "1", 1);
                (void) setenv("LISTEN_PID", pidbuf, 1);
                (void) setenv("LISTEN_FDNAMES", "egress", 1);
                execv(argv[0], argv);
                _exit(127);
        }
        ep->gateway_pid = pid;
        r = sd_event_add_child(ee->event, &ep->child_source, pid, WEXITED, on_gateway_exit, ep);
        if (r < 0)
                return r;
        return 0;
}

static int on_listen_ready(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EgressEpoch *ep = userdata;
        int r;

        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        if (ep->gateway_pid > 0)
                return 0;
        r = epoch_spawn_gateway(ep);
        if (r < 0) {
                log_error_errno(r, "Failed to start the egress gateway for revision %s: %m", ep->revision);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        }
        return 0;
}

static int epoch_listen_by_hand(EgressEpoch *ep) {
        EgressEpochs *ee = ep->owner;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (strlen(ep->socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, ep->socket_path);
        (void) unlink(ep->socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return negative_errno();
        /* Sandboxes connect as the daemon's own uid (user-namespace mapped): owner only. */
        (void) chmod(ep->socket_path, 0600);
        if (listen(fd, SOMAXCONN) < 0)
                return negative_errno();
        r = sd_event_add_io(ee->event, &ep->listen_source, fd, EPOLLIN, on_listen_ready, ep);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(ep->listen_source, "egress-listen");
        ep->listen_fd = STEAL_FD(fd);
        return 0;
}

static int epoch_start_systemd(EgressEpoch *ep) {
        EgressEpochs *ee = ep->owner;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *unit = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        if (asprintf(&unit, "sandbox-runner-egress@%s.socket", ep->instance) < 0)
                return -ENOMEM;
        /* Rare (a policy change or start-up): a synchronous call keeps the socket in place
         * before any sandbox binds it. */
        r = bus_message_new_manager_call(ee->bus, &m, "StartUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", unit, "replace");
        if (r >= 0)
                r = sd_bus_call(ee->bus, m, 0, &error, NULL);
        if (r < 0)
                log_warning("Failed to start %s: %s", unit, error.message ?: strerror(-r));
        sd_bus_error_free(&error);
        if (r < 0)
                return r;
        ep->systemd = true;
        return 0;
}

static int write_policy_file(const char *path, EgressPolicy *p) {
        _cleanup_(json_object_putp) json_object *o = egress_policy_to_json(p);
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *s;
        int r = 0;

        if (!o || asprintf(&tmp, "%s.tmp", path) < 0)
                return -ENOMEM;
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        /* 0644: the gateway may run as another (dynamic) user. */
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return negative_errno();
        if (write(fd, s, strlen(s)) != (ssize_t) strlen(s))
                r = errno > 0 ? -errno : -EIO;
        if (r >= 0 && fchmod(fd, 0644) < 0)
                r = negative_errno();
        if (r >= 0 && rename(tmp, path) < 0)
                r = negative_errno();
        if (r < 0)
                (void) unlink(tmp);
        return r;
}

/* A new epoch for the allowlist @p (ownership taken): its policy snapshot written and its
 * gateway started (a socket unit) or listened for (by hand). One reference, the caller's. */
/* "@what revision R @state (gateway G).", the journal's record of an epoch put to use. */
static void log_epoch(const EgressEpoch *ep, int priority, const char *what, const char *state) {
        log_struct(priority,
                   "MESSAGE_ID=" SR_MESSAGE_POLICY_ROTATED,
                   "SANDBOX_EGRESS_REVISION=%s", ep->revision,
                   "SANDBOX_EGRESS_GATEWAY=%s", ep->systemd ? "systemd" : "child",
                   "MESSAGE=%s revision %s %s (gateway %s).", what, ep->revision, state,
                   ep->systemd ? "sandbox-runner-egress@.socket" : "started by the daemon on demand");
}

/* The upstream's Proxy-Authorization value for the gateway alone: owner-only (under systemd the
 * unit loads it as a credential, LoadCredential=), never in the world-readable policy snapshot. */
static int write_auth_file(const char *path, const char *authorization) {
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(authorization);

        (void) unlink(path);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        if (write(fd, authorization, n) != (ssize_t) n) {
                (void) unlink(path);
                return errno > 0 ? -errno : -EIO;
        }
        return 0;
}

static int epoch_new(EgressEpochs *ee, EgressPolicy *p, const char *authorization, EgressEpoch **ret) {
        _cleanup_free_ char *dir = NULL;
        EgressEpoch *ep;
        int r;

        ep = calloc(1, sizeof(*ep));
        if (!ep) {
                egress_policy_free(p);
                return -ENOMEM;
        }
        *ep = (EgressEpoch) { .owner = ee, .listen_fd = -EBADF, .refs = 1 };
        ep->revision = strdup(egress_policy_revision(p));
        ep->policy = p;
        if (asprintf(&dir, "%s/egress", ee->runtime_dir) < 0 || !ep->revision ||
            asprintf(&ep->instance, "%s-%s", ep->revision, ee->build) < 0 ||
            asprintf(&ep->socket_path, "%s/%s.sock", dir, ep->instance) < 0 ||
            asprintf(&ep->policy_path, "%s/%s.json", dir, ep->instance) < 0 ||
            (authorization && asprintf(&ep->auth_path, "%s/%s.auth", dir, ep->instance) < 0)) {
                ep->policy = NULL;
                egress_policy_free(p);
                epoch_free(ep);
                return -ENOMEM;
        }
        ep->next = ee->epochs;
        ee->epochs = ep;

        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                r = log_error_errno(errno, "Failed to create '%s': %m", dir);
                epoch_free(ep);
                return r;
        }
        /* The service's UMask=0077 applies to mkdir(): the gateway runs as another (dynamic)
         * user and must be able to read the policy snapshots in there. */
        (void) chmod(dir, 0755);
        r = ep->auth_path ? write_auth_file(ep->auth_path, authorization) : 0;
        if (r >= 0)
                r = write_policy_file(ep->policy_path, p);
        if (r < 0) {
                log_error_errno(r, "Failed to write the policy snapshot '%s': %m", ep->policy_path);
                epoch_free(ep);
                return r;
        }

        if (ee->under_systemd) {
                /* No fallback to a child here: it would share the service's empty network. */
                r = ee->bus ? epoch_start_systemd(ep) : -ENOTCONN;
                if (r < 0)
                        ep->failed = true;
        } else {
                r = epoch_listen_by_hand(ep);
                if (r < 0) {
                        log_error_errno(r, "Failed to listen on '%s': %m", ep->socket_path);
                        epoch_free(ep);
                        return r;
                }
        }
        *ret = ep;
        return 0;
}

/* Make @p (ownership taken) the current epoch. */
static int egress_rotate(EgressEpochs *ee, EgressPolicy *p) {
        EgressEpoch *ep, *old = ee->current;
        int r;

        if (!egress_policy_is_allowlist(p)) {
                ee->current = NULL;
                egress_policy_free(ee->policy);
                ee->policy = p;
                if (old)
                        egress_epoch_release(old);
                return 0;
        }

        r = epoch_new(ee, p, NULL, &ep);
        if (r < 0)
                return r;

        /* The epoch owns the policy in force now; the one kept for mode "none" goes. */
        ee->policy = egress_policy_free(ee->policy);
        ee->current = ep;
        if (old)
                egress_epoch_release(old);
        log_epoch(ep, LOG_NOTICE, "Network policy", "in force");
        return 0;
}

/* Every gateway socket unit loaded but the current one's: also those whose files a daemon of
 * another build removed when it stopped without getting its StopUnit through. */
static void stop_other_units(EgressEpochs *ee) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_free_ char *current = NULL;
        const char *name;
        int r;

        if (ee->current && asprintf(&current, "sandbox-runner-egress@%s.socket", ee->current->instance) < 0)
                return;
        r = bus_message_new_manager_call(ee->bus, &m, "ListUnitsByPatterns");
        if (r >= 0)
                r = sd_bus_message_append(m, "as", 0);
        if (r >= 0)
                r = sd_bus_message_append(m, "as", 1, "sandbox-runner-egress@*.socket");
        if (r >= 0)
                r = sd_bus_call(ee->bus, m, 0, NULL, &reply);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssssssouso)", &name, NULL, NULL, NULL, NULL, NULL,
                                                  NULL, NULL, NULL, NULL)) > 0)
                if (!current || !streq(name, current))
                        stop_unit(ee, name);
        if (r < 0)
                log_debug_errno(r, "Failed to list the gateway units, ignoring: %m");
}

/* After a crash, or an upgrade, the runtime directory (preserved) may hold the snapshots and
 * sockets of instances nobody uses any more (other revisions, or the current one's of another
 * build, whose gateway may still run the old binary): stop their units and remove the files. */
static void egress_clean_stale(EgressEpochs *ee) {
        _cleanup_free_ char *dir = NULL;
        DIR *d;

        if (ee->bus)
                stop_other_units(ee);

        if (asprintf(&dir, "%s/egress", ee->runtime_dir) < 0)
                return;
        d = opendir(dir);
        if (!d)
                return;
        for (struct dirent *de; (de = readdir(d)); ) {
                size_t l = strlen(de->d_name);
                char rev[64], path[PATH_MAX];

                if (l > 5 && l - 5 < sizeof(rev) && streq(de->d_name + l - 5, ".auth")) {
                        (void) unlinkat(dirfd(d), de->d_name, 0);   /* no epoch of ours yet: stale */
                        continue;
                }
                if (l <= 5 || l - 5 >= sizeof(rev) || !streq(de->d_name + l - 5, ".json"))
                        continue;
                memcpy(rev, de->d_name, l - 5);
                rev[l - 5] = '\0';
                if (ee->current && streq(rev, ee->current->instance))
                        continue;
                (void) snprintf(path, sizeof(path), "%s/%s.json", dir, rev);
                (void) unlink(path);
                (void) snprintf(path, sizeof(path), "%s/%s.sock", dir, rev);
                (void) unlink(path);
        }
        closedir(d);
}

/* The build of the gateway and the bridge found: 8 hex digits of the SHA-256 of the version and
 * of both files' size and modification time (a stat each: reading the files, a megabyte, cost
 * every start of a socket-activated daemon milliseconds). Every instance name carries it, so that
 * a daemon never hands its sandboxes (and their bridge) to a gateway instance that another build
 * started and that may still run: after a package upgrade the new daemon starts instances of its
 * own, and egress_clean_stale() stops the old ones. */
static void helpers_build(EgressEpochs *ee) {
        struct sha256_ctx h;
        uint8_t digest[SHA256_DIGEST_SIZE];

        sha256_init(&h);
        sha256_update(&h, strlen(PACKAGE_VERSION), (const uint8_t *) PACKAGE_VERSION);
        for (unsigned i = 0; i < 2; i++) {
                const char *path = i == 0 ? ee->gateway : ee->bridge;
                struct stat st;

                if (path && stat(path, &st) == 0) {
                        uint64_t id[3] = { (uint64_t) st.st_size, (uint64_t) st.st_mtim.tv_sec,
                                           (uint64_t) st.st_mtim.tv_nsec };
                        sha256_update(&h, sizeof(id), (const uint8_t *) id);
                }
        }
        sha256_digest(&h, sizeof(digest), digest);
        (void) snprintf(ee->build, sizeof(ee->build), "%02x%02x%02x%02x", digest[0], digest[1], digest[2], digest[3]);
}

static const EgressPolicy *current_policy(EgressEpochs *ee) {
        return ee->current ? ee->current->policy : ee->policy;
}

/* ---- set-up, API ----------------------------------------------------------------------------- */

static char *network_settings_path(EgressEpochs *ee) {
        char *p;
        return asprintf(&p, "%s/settings/network.json", ee->state_dir) < 0 ? NULL : p;
}

int egress_epochs_new(sd_event *event, sd_bus *bus, const char *state_dir, const char *runtime_dir,
                      const Config *config, EgressEpochs **ret, char **ret_error) {
        _cleanup_(egress_epochs_freep) EgressEpochs *ee = NULL;
        _cleanup_free_ char *path = NULL;
        EgressPolicy *p = NULL;
        int r;

        ee = calloc(1, sizeof(*ee));
        if (!ee)
                return -ENOMEM;
        ee->event = sd_event_ref(event);
        ee->state_dir = strdup(state_dir);
        ee->runtime_dir = strdup(runtime_dir);
        path = network_settings_path(ee);
        if (!ee->state_dir || !ee->runtime_dir || !path)
                return -ENOMEM;
        ee->gateway = find_helper("egress", "sandbox-runner-egress");
        ee->bridge = find_helper("bridge", "sandbox-runner-bridge");
        helpers_build(ee);
        if (getrandom(ee->auth_key, sizeof(ee->auth_key), 0) != (ssize_t) sizeof(ee->auth_key))
                return negative_errno();

        /* Run as a systemd service, the gateway instances are units (the service itself has no
         * network: PrivateNetwork=yes); started by hand, we run them as children. */
        if (getenv("INVOCATION_ID")) {
                ee->under_systemd = true;
                ee->bus = bus ? sd_bus_ref(bus) : NULL;
        }

        if (access(path, F_OK) == 0) {
                _cleanup_(json_object_putp) json_object *o = json_object_from_file(path);
                if (!o) {
                        if (asprintf(ret_error, "%s: not valid JSON", path) < 0)
                                return -ENOMEM;
                        return -EINVAL;
                }
                r = egress_policy_from_json(o, &p, ret_error);
        } else
                r = egress_policy_new(config->network_mode == NETWORK_MODE_ALLOWLIST, config->network_allow,
                                      config->network_mirrors, &p, ret_error);
        if (r < 0)
                return r;
        r = egress_rotate(ee, p);
        if (r < 0)
                return r;
        egress_clean_stale(ee);
        *ret = STEAL(ee);
        return 0;
}

EgressEpochs *egress_epochs_free(EgressEpochs *ee) {
        if (!ee)
                return NULL;
        ee->current = NULL;
        ee->exiting = true;
        while (ee->epochs)
                epoch_free(ee->epochs);
        ee->policy = egress_policy_free(ee->policy);
        explicit_bzero(ee->auth_key, sizeof(ee->auth_key));
        ee->bus = sd_bus_unref(ee->bus);   /* the owner flushes and closes it */
        sd_event_unref(ee->event);
        free(ee->gateway);
        free(ee->bridge);
        free(ee->state_dir);
        free(ee->runtime_dir);
        free(ee);
        return NULL;
}

json_object *egress_current_json(EgressEpochs *ee) {
        return egress_policy_to_json(current_policy(ee));
}

int egress_set_policy(EgressEpochs *ee, json_object *body, char **ret_error) {
        _cleanup_free_ char *path = network_settings_path(ee), *tmp = NULL, *dir = NULL, *revision = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        EgressPolicy *p = NULL;
        int r;

        if (!path || asprintf(&tmp, "%s.tmp", path) < 0 || asprintf(&dir, "%s/settings", ee->state_dir) < 0)
                return -ENOMEM;
        r = egress_policy_from_json(body, &p, ret_error);
        if (r < 0)
                return r;
        if (egress_policy_is_open(p) || egress_policy_upstream(p)) {
                egress_policy_free(p);
                return ret_error ? set_message(ret_error, -EINVAL, "mode open and \"upstream\" are set per run "
                                               "(the ScienceDiscovery dialect), not as the policy in force") : -EINVAL;
        }
        if (streq(egress_policy_revision(p), egress_policy_revision(current_policy(ee)))) {
                egress_policy_free(p);
                return 0;   /* same content, same revision: nothing rotates */
        }

        o = egress_policy_to_json(p);
        if (!o) {
                egress_policy_free(p);
                return -ENOMEM;
        }
        if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
            json_object_to_file_ext(tmp, o, JSON_C_TO_STRING_PRETTY) < 0 || rename(tmp, path) < 0) {
                r = errno > 0 ? -errno : -EIO;
                (void) unlink(tmp);
                egress_policy_free(p);
                return ret_error ? set_message(ret_error, r, "it cannot be saved to '%s': %s", path, strerror(-r)) : r;
        }
        revision = strdup(egress_policy_revision(p));
        if (!revision) {
                egress_policy_free(p);
                return -ENOMEM;
        }
        r = egress_rotate(ee, p);
        if (r < 0 && r != -ENOMEM && ret_error)
                return set_message(ret_error, r, "the gateway of revision %s cannot be set up under '%s/egress': %s",
                                   revision, ee->runtime_dir, strerror(-r));
        return r;
}

int egress_epoch_acquire(EgressEpochs *ee, EgressEpoch **ret, const char **ret_reason) {
        EgressEpoch *ep = ee->current;

        *ret = NULL;
        if (!ep)
                return 0;   /* mode none: no network at all */
        if (!ee->bridge) {
                *ret_reason = "the sandbox-runner-bridge helper is not installed";
                return -EOPNOTSUPP;
        }
        if (!ep->systemd && !ee->gateway) {
                *ret_reason = "the sandbox-runner-egress gateway is not installed";
                return -EOPNOTSUPP;
        }
        if (ep->failed) {
                *ret_reason = "the gateway unit sandbox-runner-egress@.socket could not be started (see the journal)";
                return -EOPNOTSUPP;
        }
        ep->refs++;
        *ret = ep;
        return 0;
}

SR_DEFINE_FREE_FUNC(EgressPolicy *, egress_policy_free);

/* A tag of @authorization keyed by this daemon's random key: it tells credentials apart (in the
 * revision, so in unit names) and says nothing that would help guess them. */
static int auth_tag(EgressEpochs *ee, const char *authorization, char **ret) {
        struct hmac_sha256_ctx h;
        uint8_t digest[SHA256_DIGEST_SIZE];
        char *s;

        hmac_sha256_set_key(&h, sizeof(ee->auth_key), ee->auth_key);
        hmac_sha256_update(&h, strlen(authorization), (const uint8_t *) authorization);
        hmac_sha256_digest(&h, sizeof(digest), digest);
        s = malloc(33);
        if (!s)
                return -ENOMEM;
        for (unsigned i = 0; i < 16; i++)
                (void) snprintf(s + 2 * i, 3, "%02x", digest[i]);
        *ret = s;
        return 0;
}

int egress_epoch_acquire_for(EgressEpochs *ee, char *const *allow, char *const *mirrors, EgressEpoch **ret,
                             char **ret_error) {
        return egress_epoch_acquire_route(ee, false, allow, mirrors, NULL, NULL, ret, ret_error);
}

int egress_epoch_acquire_route(EgressEpochs *ee, bool open, char *const *allow, char *const *mirrors,
                               const EgressUpstream *upstream, const char *no_proxy, EgressEpoch **ret,
                               char **ret_error) {
        _cleanup_(egress_policy_freep) EgressPolicy *p = NULL;
        _cleanup_free_ char *tag = NULL;
        EgressEpoch *ep;
        int r;

        *ret = NULL;
        if (!ee->bridge || !ee->gateway)
                return asprintf(ret_error, "the %s helper is not installed",
                                !ee->bridge ? "sandbox-runner-bridge" : "sandbox-runner-egress") < 0 ? -ENOMEM : -EOPNOTSUPP;
        if (upstream && upstream->authorization && auth_tag(ee, upstream->authorization, &tag) < 0)
                return -ENOMEM;
        r = egress_policy_new_full(open ? EGRESS_MODE_OPEN : EGRESS_MODE_ALLOWLIST, allow, mirrors,
                                   &(EgressRoute) { .upstream = upstream ? upstream->url : NULL,
                                                    .upstream_auth = tag,
                                                    .no_proxy = upstream ? no_proxy : NULL },
                                   &p, ret_error);
        if (r < 0)
                return r;
        /* The same policy (an identical setup before): the same gateway. */
        for (ep = ee->epochs; ep; ep = ep->next)
                if (streq(ep->revision, egress_policy_revision(p)) && !ep->failed) {   /* same build */
                        ep->refs++;
                        *ret = ep;
                        return 0;
                }
        r = epoch_new(ee, STEAL(p), tag ? upstream->authorization : NULL, &ep);
        if (r < 0)
                return asprintf(ret_error, "its gateway could not be set up under '%s/egress': %s", ee->runtime_dir,
                                strerror(-r)) < 0 ? -ENOMEM : r;
        if (ep->failed) {
                egress_epoch_release(ep);
                return asprintf(ret_error, "the gateway unit sandbox-runner-egress@.socket could not be started "
                                           "(see the journal)") < 0 ? -ENOMEM : -EOPNOTSUPP;
        }
        log_epoch(ep, LOG_INFO, "Egress", "set up for a policy of its own");
        *ret = ep;
        return 0;
}

bool egress_available(EgressEpochs *ee, const char **ret_reason) {
        const char *reason = NULL;

        if (!ee->bridge)
                reason = "the sandbox-runner-bridge helper is not installed";
        else if (!ee->gateway)
                reason = "the sandbox-runner-egress gateway is not installed";
        else if (ee->under_systemd && !ee->bus)
                reason = "the system bus is not reachable: gateway units cannot be started";
        if (ret_reason)
                *ret_reason = reason;
        return !reason;
}

void egress_health(EgressEpochs *ee, json_object *o) {
        const EgressPolicy *p = current_policy(ee);
        EgressEpoch *ep = ee->current;
        const char *reason = NULL;
        bool available = true;

        json_object_object_add(o, "mode", json_object_new_string(ep ? "allowlist" : "none"));
        if (ep) {
                json_object_object_add(o, "revision", json_object_new_string(ep->revision));
                json_object_object_add(o, "instance", json_object_new_string(ep->instance));
                json_object_object_add(o, "gateway", json_object_new_string(
                                ep->systemd || ee->under_systemd ? "systemd" : "child"));
                json_object_object_add(o, "gatewayRunning",
                                       json_object_new_boolean(ep->systemd || ep->gateway_pid > 0));
                if (!ee->bridge)
                        reason = "the sandbox-runner-bridge helper is not installed";
                else if (ep->failed)
                        reason = "the gateway unit sandbox-runner-egress@.socket could not be started";
                else if (!ep->systemd && !ee->gateway)
                        reason = "the sandbox-runner-egress gateway is not installed";
                available = !reason;
        } else
                (void) p;
        json_object_object_add(o, "available", json_object_new_boolean(available));
        if (reason)
                json_object_object_add(o, "reason", json_object_new_string(reason));
}
