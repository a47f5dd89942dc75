/* libFuzzer: durations, sizes, address blocks and host:port, on any string. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    struct config_cidr cidr;
    struct config_endpoint endpoint = {0};
    int64_t ns;
    uint64_t bytes;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (config_parse_duration(text, &ns) == 0 && ns < 0)
        abort();
    config_parse_size(text, &bytes);
    if (config_parse_cidr(text, &cidr) == 0 &&
        cidr.prefix_len > (cidr.family == 2 /* AF_INET */ ? 32u : 128u))
        abort();
    if (config_parse_endpoint(text, &endpoint) == 0 && endpoint.host == NULL)
        abort();
    free(endpoint.host);
    free(text);
    return 0;
}
