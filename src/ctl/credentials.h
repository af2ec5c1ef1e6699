/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Finding and reading the CLI's secrets (API token, signing key) from files and the environment. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Upper bound on a credential file; anything bigger is not a token or a key. */
#define CREDENTIAL_SIZE_MAX ((size_t) 64 * 1024)

/* Where the daemon's credentials live when systemd does not pass them (LoadCredential=). */
#define CREDENTIAL_FALLBACK_DIR "/var/lib/sandbox-runner/credentials"

typedef struct CredentialSpec {
        const char *explicit_file;      /* from the command line, or NULL */
        const char *option_name;        /* e.g. "--token-file", for messages */
        const char *env_value;          /* e.g. "SANDBOX_RUNNER_TOKEN": holds the secret itself */
        const char *env_file;           /* e.g. "SANDBOX_RUNNER_TOKEN_FILE": names a file */
        const char *credential_name;    /* e.g. "api-token", in $CREDENTIALS_DIRECTORY and the fallback dir */
        const char *fallback_dir;       /* usually CREDENTIAL_FALLBACK_DIR; NULL to skip */
        bool text;                      /* must be printable ASCII (it goes into an HTTP header) */
} CredentialSpec;

/*
 * credential_strip() - drop trailing whitespace (' ', '\t', '\r', '\n', '\v', '\f') in place.
 * @s: buffer, not necessarily NUL-terminated
 * @size: its length
 * Return: the new length. The dropped bytes are zeroed.
 */
size_t credential_strip(char *s, size_t size);

/*
 * credential_read_file() - read a credential file (at most CREDENTIAL_SIZE_MAX bytes) and strip
 * trailing whitespace. Pipes work too (e.g. "--token-file <(pass show runner)").
 * @path: file to read
 * @text: require printable ASCII without spaces (0x21..0x7e), as an HTTP header value needs
 * @ret: NUL-terminated secret; free it with erase_and_free()
 * @ret_size: its length (may be NULL)
 * Return: 0, -errno from open()/read() (-ENOENT, -EACCES, ...), -EFBIG if too big, -ENODATA if
 * empty after stripping, -EBADMSG if @text and a byte is not allowed, -ENOMEM.
 */
int credential_read_file(const char *path, bool text, char **ret, size_t *ret_size);

/*
 * credential_find() - resolve a secret through the chain: @spec->explicit_file, then
 * $env_value, then the file named by $env_file, then "$CREDENTIALS_DIRECTORY/<name>" if
 * readable, then "<fallback_dir>/<name>" if readable.
 * An explicitly named file (option or $env_file) that cannot be read is an error; the two
 * implicit locations are skipped when missing or not accessible.
 * @ret: NUL-terminated secret; free it with erase_and_free()
 * @ret_size: its length (may be NULL)
 * @ret_source: where it came from, e.g. "$SANDBOX_RUNNER_TOKEN_FILE (/x)"; on failure, what
 *   failed (caller frees; may be NULL). Never contains the secret.
 * Return: 0, -ENOKEY if no source has it, or the error of credential_read_file() for an
 * explicit or present-but-broken source (with @ret_source naming it), -ENOMEM.
 */
int credential_find(const CredentialSpec *spec, char **ret, size_t *ret_size, char **ret_source);
