/* libFuzzer: the X-Forwarded-For walk and client keys, on any header value. The peer is a
 * trusted proxy, so the walk always runs. */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct config_cidr trusted_items[2];
    static struct config_cidrs trusted = {trusted_items, 2};
    struct gw_addr peer = {.family = AF_INET, .bytes = {10, 0, 0, 1}}, client;
    char key[GW_KEY_LEN], *value;

    if (size == 0)
        return 0;
    config_parse_cidr("10.0.0.0/8", &trusted_items[0]);
    config_parse_cidr("fd00::/8", &trusted_items[1]);
    value = malloc(size);
    if (value == NULL)
        return 0;
    memcpy(value, data + 1, size - 1);
    value[size - 1] = '\0';
    client = gw_client_addr(&peer, value, &trusted);
    if (client.family != AF_INET && client.family != AF_INET6)
        abort();
    gw_ip_key(&client, 1 + data[0] % 128, key);
    if (strlen(key) >= GW_KEY_LEN)
        abort();
    gw_value_key("header", value, key);
    gw_addr_parse(value, strlen(value), &client);
    free(value);
    return 0;
}
