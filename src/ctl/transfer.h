/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers of the CLI's transfers: request paths, Repr-Digest, writing, clean-up on interrupt. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRANSFER_SHA256_SIZE 32

/*
 * transfer_escape_path() - percent-encode each '/'-separated segment of @path (curl_easy_escape():
 * everything but A-Z a-z 0-9 - . _ ~), keeping the slashes, so that a file name with spaces, '?',
 * '#', '%' or non-ASCII bytes reaches the daemon as that name.
 * Return: 0, -ENOMEM.
 */
int transfer_escape_path(const char *path, char **ret);

/* transfer_escape() - percent-encode all of @s, '/' included (for a query parameter's value). */
int transfer_escape(const char *s, char **ret);

/*
 * transfer_repr_digest_sha256() - the SHA-256 in a Repr-Digest header (RFC 9530), a structured
 * field dictionary such as "sha-256=:<base64>:" (other algorithms and parameters may be present
 * and are skipped).
 * Return: 0, -ENOENT if there is no sha-256 member, -EBADMSG if it is malformed or not 32 bytes,
 * -ENOMEM.
 */
int transfer_repr_digest_sha256(const char *header, uint8_t ret[static TRANSFER_SHA256_SIZE]);

/* transfer_hex() - lowercase hex of @n bytes into @ret (2n + 1 bytes). */
void transfer_hex(const uint8_t *p, size_t n, char *ret);

/* transfer_basename() - the last component of @path (trailing slashes ignored), newly allocated;
 * NULL on OOM. "" for "/" or "". */
char *transfer_basename(const char *path);

/* transfer_write_all() - write all of @p to @fd, retrying on EINTR. Return: 0 or -errno. */
int transfer_write_all(int fd, const void *p, size_t n);

/*
 * On SIGINT, SIGTERM or SIGHUP: unlink the file named by transfer_interrupt_unlink() (a download's
 * temporary file), write the message set by transfer_interrupt_message() to standard error, then
 * die of the signal as usual. Signals ignored when the program started stay ignored. Both take a
 * copy; NULL clears. Paths and messages that do not fit (PATH_MAX, 1 KiB) are not installed.
 */
void transfer_interrupt_setup(void);
void transfer_interrupt_unlink(const char *path);
void transfer_interrupt_message(const char *message);

