/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The environments' store inside: the struct and the helpers its files share (env-store.c,
 * env-store-wheel.c), and the steps of env_store_publish() one at a time, for the unit test of
 * its crash points (tests/unit/test-env-store.c): stopping after a step is what a crash there
 * leaves on disk. Nothing but the store's files and that test includes this header.
 */
#pragma once

#include <json-c/json.h>
#include <sys/types.h>

#include "environment/env-store.h"

/* Temporary files start with this; a crash's leftovers are removed by their name. */
#define ENV_STORE_TMP_PREFIX ".#"
/* A prefix, a build directory and a wheel's hash directory: readable by the sandbox user. */
#define ENV_STORE_PREFIX_MODE 0755
/* A stored wheel. */
#define ENV_STORE_WHEEL_MODE 0644

struct EnvStore {
        char *root;                     /* <state_dir>/environments */
        int root_fd;
        int envs_fd;
        int wheels_fd;
        int trash_fd;
};

/* env_store_random_name() - a name no other writer picks: @prefix + 16 random hex digits. Return: 0 or -errno. */
int env_store_random_name(const char *prefix, char **ret);

/*
 * env_store_mkdir_open() - create directory @name of @dfd with @mode (whatever the umask) unless it
 * exists, and open it (O_NOFOLLOW). Return: the fd or -errno.
 */
int env_store_mkdir_open(int dfd, const char *name, mode_t mode);

typedef enum EnvPublishStep {
        ENV_PUBLISH_RECORD,             /* revisions/<N>.json written */
        ENV_PUBLISH_PREFIX,             /* build-<id> renamed to r<N> */
        ENV_PUBLISH_SYMLINK,            /* live.new -> r<N> made */
        ENV_PUBLISH_SWAP,               /* live.new renamed over live */
        ENV_PUBLISH_SYNC,               /* the environment's directory fsync()ed */
        ENV_PUBLISH_META,               /* meta.json's revision updated: done */
        _ENV_PUBLISH_STEP_MAX,
} EnvPublishStep;

/* env_store_publish_upto() - env_store_publish(), stopping after step @upto. Return: as env_store_publish(). */
int env_store_publish_upto(EnvStore *s, const char *name, const char *setup_id, unsigned revision,
                           json_object *record, EnvPublishStep upto);
