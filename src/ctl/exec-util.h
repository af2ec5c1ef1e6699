/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers of the exec and shell commands: option values, input files, the execution answer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit codes of exec/shell for runs that did not end by themselves (timeout(1) uses 124 too). */
#define CTL_EXIT_EXEC_TIMEOUT   124     /* status "timeout" */
#define CTL_EXIT_EXEC_LIMIT     125     /* memory_limit, tasks_limit, cancelled, ... */

/*
 * exec_parse_uint() - a decimal number without sign, spaces or suffix.
 * Return: 0, -EINVAL if malformed, -ERANGE if above @max.
 */
int exec_parse_uint(const char *s, uint64_t max, uint64_t *ret);

/*
 * exec_parse_size() - a number of bytes with an optional binary suffix: K, M, G, T (1024-based,
 * upper or lower case, optionally followed by "iB" or "B"), e.g. "512M", "1G", "1048576".
 * Return: 0, -EINVAL if malformed, -ERANGE on overflow.
 */
int exec_parse_size(const char *s, uint64_t *ret);

/*
 * exec_utf8_valid() - whether @p holds well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF). NUL bytes are allowed: JSON carries them as \u0000.
 */
bool exec_utf8_valid(const void *p, size_t n);

/*
 * exec_read_fd() - read @fd to its end, at most @max bytes.
 * @ret: NUL-terminated buffer (the NUL is not counted in @ret_size); caller frees
 * Return: 0, -EFBIG if there is more than @max, -errno of read(), -ENOMEM.
 */
int exec_read_fd(int fd, size_t max, char **ret, size_t *ret_size);

/*
 * exec_base64_decode() - decode standard base64 (RFC 4648 §4, with padding).
 * @ret: decoded bytes, NUL-terminated (the NUL is not counted in @ret_size); caller frees
 * Return: 0, -EBADMSG if @s is not valid base64, -ENOMEM.
 */
int exec_base64_decode(const char *s, size_t n, char **ret, size_t *ret_size);

/*
 * exec_status_exit_code() - the CLI's exit code for an execution answer.
 * @status: the answer's "status"
 * @exit_code: "exitCode" (used for "exited")
 * @signal: "signal" (used for "signaled")
 * Return: @exit_code for "exited", 128 + @signal for "signaled", CTL_EXIT_EXEC_TIMEOUT for
 * "timeout", CTL_EXIT_EXEC_LIMIT for any other status; -EINVAL when "exited"/"signaled" come
 * with an out-of-range number.
 */
int exec_status_exit_code(const char *status, int64_t exit_code, int64_t signal);
