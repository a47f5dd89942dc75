/* libFuzzer: the hop-by-hop filter, on any field name and Connection value (split at the
 * first newline). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/common/headers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *newline;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    newline = strchr(text, '\n');
    if (newline != NULL)
        *newline = '\0';
    /* Connection always stops here, whatever the list says. */
    if (!gw_header_is_hop_by_hop("Connection", newline ? newline + 1 : text))
        abort();
    gw_header_is_hop_by_hop(text, newline ? newline + 1 : NULL);
    free(text);
    return 0;
}
