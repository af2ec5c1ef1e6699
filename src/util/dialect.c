/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Names of the API dialects and the listen-address form that picks one. */

#include <string.h>

#include "util/dialect.h"
#include "util/macro.h"
#include "util/string-table.h"

static const char *const http_dialect_table[_HTTP_DIALECT_MAX] = {
        [HTTP_DIALECT_NATIVE] = "api",
        [HTTP_DIALECT_SCIENCEDISCOVERY] = "sciencediscovery",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(http_dialect, HttpDialect)

HttpDialect http_dialect_from_fd_name(const char *name) {
        return name && streq(name, "sciencediscovery") ? HTTP_DIALECT_SCIENCEDISCOVERY : HTTP_DIALECT_NATIVE;
}

HttpDialect http_dialect_split_listen(const char *spec, const char **ret_address) {
        for (HttpDialect d = 0; d < _HTTP_DIALECT_MAX; d++) {
                size_t l = strlen(http_dialect_table[d]);

                if (strncmp(spec, http_dialect_table[d], l) == 0 && spec[l] == '=') {
                        *ret_address = spec + l + 1;
                        return d;
                }
        }
        *ret_address = spec;
        return HTTP_DIALECT_NATIVE;
}
