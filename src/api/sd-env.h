/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * How the ScienceDiscovery dialect names our environments (notes §8): their environment ids
 * (our base environments are their starters: python-base is "starter-python", r-base
 * "starter-r"; a named environment keeps its name), their revision ids ("<environment id>@<N>"),
 * requirement names, and the name of a new environment made from their display name. Pure.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define SDP_ENV_ID_MAX 64               /* with the NUL: an id is at most 63 characters, like our names */
#define SDP_ENV_REVISION_ID_MAX 80

/* sdp_env_id() - their id of our environment @name (into @ret). */
void sdp_env_id(const char *name, char ret[static SDP_ENV_ID_MAX]);
/* sdp_env_name() - our environment for their id @id. Return: false for an id that names none
 * (not a starter, not a valid name of ours, or a base environment's own name). */
bool sdp_env_name(const char *id, char ret[static SDP_ENV_ID_MAX]);
/* sdp_env_revision_id() - "<their id of @name>@<revision>". */
void sdp_env_revision_id(const char *name, unsigned revision, char ret[static SDP_ENV_REVISION_ID_MAX]);
/* sdp_env_revision_parse() - our environment and revision number of their revision id @rid.
 * Return: false when it is not one of ours (no '@', a bad number, an unknown form). */
bool sdp_env_revision_parse(const char *rid, char ret_name[static SDP_ENV_ID_MAX], unsigned *ret_revision);
/*
 * sdp_env_spec_name() - the distribution name a requirement specifier (or a wheel's file name)
 * names, normalised as pip compares them (lower case, runs of '-', '_', '.' as one '-'), into
 * @ret (@size bytes). Return: false when @spec starts with no name.
 */
bool sdp_env_spec_name(const char *spec, bool wheel, char *ret, size_t size);
/* sdp_env_slug() - our name for a new environment called @display: lower case, other characters
 * as '-', at most 48 characters, never a base or reserved name ("env" when nothing is left). */
void sdp_env_slug(const char *display, char ret[static SDP_ENV_ID_MAX]);
