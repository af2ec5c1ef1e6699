/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The retention buffer of one output stream: everything up to the limit, past it head + tail. */
#pragma once

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * An OutputBuffer retains at most @limit bytes of a stream (DESIGN.md section 7). While the
 * stream is no longer than the limit it is kept whole; past it the first limit/2 bytes (the
 * head) and the last limit - limit/2 bytes (the tail, a ring) are kept and the middle is
 * counted, never failing the run. Memory grows with what was appended, up to the limit; it is
 * never allocated up front.
 */
typedef struct OutputBuffer OutputBuffer;

/* The text put between head and tail; %PRIu64 is the number of bytes left out. */
#define OUTPUT_BUFFER_MARKER_FORMAT "\n[... %" PRIu64 " bytes omitted ...]\n"

/*
 * output_buffer_new() - an empty buffer.
 * @limit: bytes retained in total, 0 = unlimited (no truncation).
 * Return: 0 or -ENOMEM.
 */
int output_buffer_new(uint64_t limit, OutputBuffer **ret);

/* output_buffer_free() - accepts NULL. Return: NULL. */
OutputBuffer *output_buffer_free(OutputBuffer *b);
static inline void output_buffer_freep(OutputBuffer **b) {
        *b = output_buffer_free(*b);
}

/*
 * output_buffer_append() - add @n bytes of the stream. Bytes beyond the limit replace the
 * oldest tail bytes; this never fails because of the limit. On error the buffer is unchanged.
 * Return: 0 or -ENOMEM (growing the buffer, or an unlimited buffer beyond the address space).
 */
int output_buffer_append(OutputBuffer *b, const void *data, size_t n);

/* output_buffer_total() - bytes ever appended, retained or not. */
uint64_t output_buffer_total(const OutputBuffer *b);

/* output_buffer_truncated() - true once more than the limit was appended (never if limit = 0). */
bool output_buffer_truncated(const OutputBuffer *b);

/*
 * output_buffer_render() - the retained bytes: the head, then (if truncated) the marker
 * "\n[... N bytes omitted ...]\n" with N = total - limit, then the tail. The result is
 * NUL-terminated for convenience (not counted in @ret_size); it may contain NUL bytes itself.
 * Return: 0 or -ENOMEM.
 */
int output_buffer_render(const OutputBuffer *b, char **ret, size_t *ret_size);

/*
 * output_buffer_render_text() - the retained bytes ready for a JSON string.
 * If truncated, the head end is moved back and the tail start forward to UTF-8 character
 * boundaries (a cut inside a character drops that character's pieces, N counts them), so that
 * a stream of valid UTF-8 always renders as valid UTF-8. If the result is valid UTF-8 (strict:
 * no overlong forms, surrogates or code points past U+10FFFF; U+0000 is valid), it is returned
 * with @ret_encoding "utf-8". Otherwise the exact output_buffer_render() bytes are returned
 * base64-encoded (RFC 4648, padded, no line breaks) with @ret_encoding "base64".
 * The result is NUL-terminated; @ret_size excludes the NUL. @ret_encoding points to a static string.
 * Return: 0 or -ENOMEM.
 */
int output_buffer_render_text(const OutputBuffer *b, char **ret, size_t *ret_size,
                              const char **ret_encoding);
