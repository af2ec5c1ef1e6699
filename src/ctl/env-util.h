/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure parts of the env command (no request, no terminal): the PUT /environments/{name}
 * bodies of env create and env install (merging new specs and wheels into what an environment
 * has), WORKSPACE:PATH wheel arguments, the setup progress line, the outcome of a setup answer and
 * redrawing progress lines on a terminal. json-c and libc only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

/* What env create puts into its body (strings point into argv). */
typedef struct EnvCreateArgs {
        const char *kind;               /* python, r or conda */
        const char *index_url;          /* NULL: not given */
        const char *preset;
        bool offline;                   /* false: "offline" is not sent (the daemon's default) */
        const char *const *channels;
        size_t n_channels;
        const char *const *wheels;      /* "WORKSPACE:PATH" */
        size_t n_wheels;
        const char *const *packages;
        size_t n_packages;
} EnvCreateArgs;

/* Whether @kind is one the API knows: python, r or conda. */
bool env_kind_valid(const char *kind);

/*
 * env_wheel_parse() - "WORKSPACE:PATH" (split at the first colon, both parts non-empty) as the
 * API's {"workspaceId", "path"}.
 * Return: 0, -EINVAL if malformed, -ENOMEM.
 */
int env_wheel_parse(const char *arg, json_object **ret);

/*
 * env_spec_name() - the distribution name a requirement specifier is for, as compared when
 * env install replaces a spec: the leading name ("pkg" of "pkg[extra]>=1", "chan::pkg=1" for
 * conda), for python and conda folded as PEP 503 does (lower case, runs of "-", "_", "." one
 * "-"), for r kept as it is (R's names are case-sensitive).
 * Return: 0, -EINVAL when @spec does not start with a name (the daemon judges such a spec; it is
 * never merged away), -ENOMEM.
 */
int env_spec_name(const char *kind, const char *spec, char **ret);

/*
 * env_create_body() - the PUT body of env create: {"kind", "packages", "wheels", "source":
 * {"indexUrl"?, "preset"?, "offline"?}, "channels"?}.
 * Return: 0, -EINVAL for a malformed wheel argument, -ENOMEM.
 */
int env_create_body(const EnvCreateArgs *a, json_object **ret);

/*
 * env_install_body() - the PUT body of env install: the environment @current (the answer of GET
 * /environments/{name}) with @specs added to its "requested" (a spec for a name already
 * requested replaces it, in its place) and @wheels ("WORKSPACE:PATH") to its "wheels" (the stored
 * ones go back as their {"sha256", "file"}; a new wheel of the same distribution replaces one),
 * keeping its kind, source, channels and display name. PUT is declarative: this is the whole
 * wanted set.
 * Return: 0, -EINVAL for a malformed wheel argument, -EBADMSG when @current has no kind, -ENOMEM.
 */
int env_install_body(json_object *current, const char *const *specs, size_t n_specs,
                     const char *const *wheels, size_t n_wheels, json_object **ret);

/*
 * env_progress_line() - one entry of GET /environments/setup as "NAME PHASE DONE/TOTAL STEP"
 * ("NAME failed DONE/TOTAL: ERROR" when it failed with an error), the name padded to @width,
 * server strings escaped for a terminal.
 * Return: 0, -ENOMEM.
 */
int env_progress_line(json_object *entry, size_t width, char **ret);

/* Whether a setup phase (or environment state) is one a setup ends in. */
bool env_phase_final(const char *phase);

typedef enum EnvOutcome {
        ENV_OUTCOME_READY,              /* all ready (or nothing to set up) */
        ENV_OUTCOME_FAILED,             /* none pending or building, at least one failed */
        ENV_OUTCOME_RUNNING,            /* at least one pending or building */
} EnvOutcome;

/* The outcome of the "setup" list of a GET /environments/setup answer. */
EnvOutcome env_setup_outcome(json_object *answer);

/* The entry for @name of the "setup" list of @answer, or NULL. */
json_object *env_setup_entry(json_object *answer, const char *name);

/*
 * env_redraw() - replace the @n_old lines last written to the terminal @f (the cursor below them)
 * by @lines: the cursor goes up, each line is cleared and rewritten, surplus old lines are
 * cleared. Lines are cut to @columns characters (0: not cut) so that none wraps.
 * Return: 0, -EIO on a write error.
 */
int env_redraw(FILE *f, size_t n_old, char *const *lines, size_t n_lines, size_t columns);
