/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Transient systemd scopes per execution over sd-bus, with limits and cgroup accounting. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "sandbox/limits.h"

#define SCOPE_SLICE "sandbox-runner.slice"
#define SCOPE_PREFIX "sandbox-runner-x-"

typedef struct ScopeManager ScopeManager;
typedef struct Scope Scope;

typedef void (*ScopeStartedFn)(Scope *s, int error, const char *error_message, void *userdata);

/*
 * scope_manager_new() - scopes over @bus, the daemon's system bus (attached to @e; referenced,
 * flushed and closed by its owner after scope_manager_free()). Return: 0 or -ENOMEM.
 */
int scope_manager_new(sd_event *e, sd_bus *bus, ScopeManager **ret);
ScopeManager *scope_manager_free(ScopeManager *sm);

/*
 * scope_manager_probe() - start (and remove) a scope around a throwaway child, synchronously,
 * to learn whether we may create scopes at all. Return: 0, or -errno with *ret_reason.
 */
int scope_manager_probe(ScopeManager *sm, char **ret_reason);

/*
 * scope_manager_open_system() - what start-up does to learn whether executions get scopes: the
 * system bus (attached to @e; *@ret_bus is set whenever it could be opened, also when the rest
 * fails: the egress units use it), a ScopeManager on it (*@ret, set whenever made) and
 * scope_manager_probe(). The caller owns what is returned, also on failure.
 * Return: 0 (scopes available); -ENOTCONN (no system bus) or the probe's -errno, with
 * *@ret_reason ("cannot connect to the system bus: ...", "a test scope could not be created:
 * <the bus error>"); -ENOMEM.
 */
int scope_manager_open_system(sd_event *e, sd_bus **ret_bus, ScopeManager **ret, char **ret_reason);

/*
 * scope_start() - StartTransientUnit(@name) around @pid, asynchronously; @cb runs once the job
 * finished (error 0) or failed. The scope stays referenced until scope_free().
 * Return: 0 or -errno (then @cb is never called).
 */
int scope_start(ScopeManager *sm, const char *name, pid_t pid, const ScopeLimits *limits,
                const char *description, ScopeStartedFn cb, void *userdata, Scope **ret);
/* scope_start_pids() - the same around up to SCOPE_PIDS_MAX processes, moved in one job. */
#define SCOPE_PIDS_MAX 4
int scope_start_pids(ScopeManager *sm, const char *name, const pid_t *pids, size_t n_pids, const ScopeLimits *limits,
                     const char *description, ScopeStartedFn cb, void *userdata, Scope **ret);
/*
 * scope_set_properties() - SetUnitProperties() of a started scope, for its runtime: @limits (all
 * three; 0 is none) unless NULL, @description unless NULL. @cb, unless NULL, runs with the reply
 * (error 0 once systemd applied them). Return: 0, -EBUSY (one in flight) or -errno.
 */
int scope_set_properties(Scope *s, const ScopeLimits *limits, const char *description, ScopeStartedFn cb,
                         void *userdata);
/* scope_set_properties_cancel() - no callback for the call in flight, if any (its owner goes). */
void scope_set_properties_cancel(Scope *s);
/* scope_limits() - the limits the scope was started with, or last set. */
const ScopeLimits *scope_limits(const Scope *s);
/* scope_set_userdata() - a new owner of a started scope (its start callback is not called again). */
void scope_set_userdata(Scope *s, ScopeStartedFn cb, void *userdata);
/* scope_kill_by_name() - SIGKILL every process of a unit we did not start (recovery). */
int scope_kill_by_name(ScopeManager *sm, const char *name);
/* scope_kill() - SIGKILL every process of the scope (asynchronous). */
int scope_kill(Scope *s);
/* scope_read_accounting() - read the scope's cgroup counters (call while the keeper holds it). */
int scope_read_accounting(Scope *s, ScopeAccounting *ret);
const char *scope_name(const Scope *s);
/* scope_free() - drop our reference (the unit is collected once empty) and free. */
Scope *scope_free(Scope *s);
