/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Execution records and managed-run logs under $STATE_DIRECTORY/records, surviving restarts. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum RecordStream {
        RECORD_STREAM_STDOUT,
        RECORD_STREAM_STDERR,
        _RECORD_STREAM_MAX,
        _RECORD_STREAM_INVALID = -22,
} RecordStream;

const char *record_stream_to_string(RecordStream s);
RecordStream record_stream_from_string(const char *s);

/* records_open() - the records directory below @state_dir (created 0700). Return: fd or -errno. */
int records_open(const char *state_dir);

/*
 * record_write() - write @o as the record of @id atomically (temporary file + rename); with
 * @durable also fsync the file and the directory. Return: 0 or -errno.
 */
int record_write(int dir_fd, const char *id, json_object *o, bool durable);
/*
 * record_prepare() - create the temporary file of @id's final record ahead of time (creating a
 * file is the slow part of record_write() on a busy file system; a run does it while its sandbox
 * runs). Return: its fd or -errno.
 * record_write_prepared() - record_write() through that file (*@fd is closed, set to -EBADF).
 * record_prepared_discard() - remove it unused (*@fd is closed, set to -EBADF).
 */
int record_prepare(int dir_fd, const char *id);
int record_write_prepared(int dir_fd, const char *id, int *fd, json_object *o, bool durable);
void record_prepared_discard(int dir_fd, const char *id, int *fd);
/* record_read() - Return: 0, -ENOENT, -EBADMSG (unparsable), other -errno. */
int record_read(int dir_fd, const char *id, json_object **ret);

/* record_log_create() - the (new, empty) log of one stream, for appending. Return: fd or -errno. */
int record_log_create(int dir_fd, const char *id, RecordStream s);
/* record_log_open() - the log of one stream, for reading. Return: fd or -errno (-ENOENT). */
int record_log_open(int dir_fd, const char *id, RecordStream s);

/*
 * records_foreach_running() - call @cb for every record whose "state" is "running" (a run the
 * previous daemon did not finish). Return: number of such records, or -errno.
 */
int records_foreach_running(int dir_fd, void (*cb)(const char *id, json_object *record, void *userdata),
                            void *userdata);

/* process_start_time() - field 22 of /proc/PID/stat (clock ticks since boot), 0 if gone. */
uint64_t process_start_time(pid_t pid);

/* records_prune() - keep the newest @keep records (by mtime) with their logs. Return: removed count. */
int records_prune(int dir_fd, unsigned keep);
