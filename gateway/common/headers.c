#include <string.h>
#include <strings.h>

#include "gateway/common/headers.h"

#define HOP(name)                                                                                  \
    {                                                                                              \
        name, sizeof name - 1                                                                      \
    }

/* With their lengths: a field is compared only with those of its own length, so most
 * fields (every one a proxied request forwards, both ways) cost one strlen(). */
static const struct {
    const char *name;
    size_t len;
} hop_by_hop[] = {
    HOP("Connection"),
    HOP("Keep-Alive"),
    HOP("Proxy-Connection"),
    HOP("TE"),
    HOP("Trailer"),
    HOP("Transfer-Encoding"),
    HOP("Upgrade"),
    HOP("Proxy-Authorization"),
    HOP("Proxy-Authenticate"),
};

bool gw_header_list_has(const char *list, const char *name)
{
    size_t name_len = strlen(name);

    while (*list != '\0') {
        size_t len;

        list += strspn(list, " \t,");
        len = strcspn(list, ",");
        while (len > 0 && (list[len - 1] == ' ' || list[len - 1] == '\t'))
            len--;
        if (len == name_len && strncasecmp(list, name, len) == 0)
            return true;
        list += strcspn(list, ",");
    }
    return false;
}

bool gw_field_next(const char *fields, size_t len, size_t *cursor, const char **name,
                   const char **value)
{
    if (*cursor >= len)
        return false;
    *name = fields + *cursor;
    *cursor += strlen(*name) + 1;
    *value = fields + *cursor;
    *cursor += strlen(*value) + 1;
    return true;
}

bool gw_header_is_hop_by_hop(const char *name, const char *connection)
{
    size_t len = strlen(name);

    for (size_t i = 0; i < sizeof hop_by_hop / sizeof hop_by_hop[0]; i++)
        if (len == hop_by_hop[i].len && strcasecmp(name, hop_by_hop[i].name) == 0)
            return true;
    return connection != NULL && gw_header_list_has(connection, name);
}
