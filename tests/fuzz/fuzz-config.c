/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * runner.conf: config_parse_buffer() on the input as one file (applied twice, as a drop-in
 * overriding the same keys would be), then config_verify(); and the value validators shared with
 * the command line and the API (bytes, seconds, booleans, listen addresses) on the whole input.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "config/config.h"
#include "fuzz.h"
#include "util/socket-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Config c;
        char *error = NULL, *s;
        ListenAddress la;
        uint64_t u;
        bool b;
        int r;

        if (size > 64 * 1024)
                return 0;

        if (config_init(&c) < 0)
                return 0;
        for (unsigned pass = 0; pass < 2; pass++) {
                r = config_parse_buffer(&c, "fuzz.conf", (const char *) data, size, &error);
                FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
                FUZZ_CHECK(r != -EINVAL || error);
                free(error);
                error = NULL;
                if (r < 0)
                        break;
        }
        if (r == 0) {
                r = config_verify(&c, &error);
                FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
                FUZZ_CHECK(r != -EINVAL || error);
                free(error);
        }
        config_done(&c);

        s = fuzz_strndup(data, size);
        (void) config_parse_bytes(s, &u);
        (void) config_parse_seconds(s, &u);
        (void) config_parse_bool(s, &b);
        (void) network_mode_from_string(s);
        (void) listen_address_parse(s, &la);
        free(s);
        return 0;
}
