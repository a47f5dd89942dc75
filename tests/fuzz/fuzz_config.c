/* libFuzzer: the YAML config loader, on any bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *errors = NULL;
    struct config *config = config_parse("fuzz.yaml", (const char *)data, size, &errors);

    /* Exactly one of a config and an error text. */
    if ((config == NULL) == (errors == NULL))
        abort();
    config_free(config);
    free(errors);
    return 0;
}
