/* A limit's count: which answers its charge stands for (the rest are given back once the
 * answer's status is known). See sections.h and config.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

#define FIRST_STATUS 100
#define LAST_STATUS  599

static void mark(struct config_count *count, unsigned status, bool counts)
{
    uint64_t bit = UINT64_C(1) << ((status - FIRST_STATUS) % 64);

    if (counts)
        count->bits[(status - FIRST_STATUS) / 64] |= bit;
    else
        count->bits[(status - FIRST_STATUS) / 64] &= ~bit;
}

bool config_count_holds(const struct config_count *count, unsigned status)
{
    if (!count->set || status < FIRST_STATUS || status > LAST_STATUS)
        return true; /* no count: every answer; no status (no answer came): kept charged */
    return (count->bits[(status - FIRST_STATUS) / 64] >> ((status - FIRST_STATUS) % 64)) & 1;
}

/* One item of statuses: or except:, 401 or 4xx: the first and last status it names, or false
 * after reporting it. */
static bool read_item(struct loader *ld, yaml_node_t *item, const char *key, unsigned range[2])
{
    const char *text = config_scalar(ld, item, key);
    char *end = NULL;
    unsigned long n;

    if (text == NULL)
        return false;
    if (strlen(text) == 3 && text[0] >= '1' && text[0] <= '5' && strcmp(text + 1, "xx") == 0) {
        range[0] = (unsigned)(text[0] - '0') * 100;
        range[1] = range[0] + 99;
        return true;
    }
    errno = 0;
    n = strtoul(text, &end, 10);
    if (text[0] >= '0' && text[0] <= '9' && *end == '\0' && errno == 0 && n >= FIRST_STATUS &&
        n <= LAST_STATUS) {
        range[0] = range[1] = (unsigned)n;
        return true;
    }
    config_error(ld, item, "%s: \"%s\" is not a status from 100 to 599 nor a class such as 4xx",
                 key, text);
    return false;
}

/* Its keys, for config_known_keys(): read by config_parse_count() itself, one of the two. */
const struct field config_count_fields[] = {
    {"statuses", CONFIG_CUSTOM, 0, 0, 0, NULL},
    {"except", CONFIG_CUSTOM, 0, 0, 0, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

/* count: {statuses: [...]} (only those count) or {except: [...]} (all but those). */
void config_parse_count(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config_count *count = &((struct config_limit *)object)->count;
    yaml_node_t *statuses, *except, *list;
    const char *key;

    if (node->type != YAML_MAPPING_NODE ||
        node->data.mapping.pairs.top - node->data.mapping.pairs.start != 1) {
        config_error(ld, node,
                     "count: expected {statuses: [401, 403]} or {except: [\"5xx\"]}, one of them");
        return;
    }
    statuses = config_find_value(ld, node, "statuses");
    except = config_find_value(ld, node, "except");
    if (statuses == NULL && except == NULL) {
        config_error(ld, node, "count: expected statuses: or except:, such as {statuses: [401]}");
        return;
    }
    list = statuses != NULL ? statuses : except;
    key = statuses != NULL ? "statuses" : "except";
    if (list->type != YAML_SEQUENCE_NODE ||
        list->data.sequence.items.top == list->data.sequence.items.start) {
        config_error(ld, list, "%s: expected a list of statuses or classes, such as [401, \"5xx\"]",
                     key);
        return;
    }
    memset(count, 0, sizeof *count);
    count->set = true;
    for (unsigned s = FIRST_STATUS; except != NULL && s <= LAST_STATUS; s++)
        mark(count, s, true);
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top;
         it++) {
        unsigned range[2];

        if (read_item(ld, config_node_at(ld, *it), key, range))
            for (unsigned s = range[0]; s <= range[1]; s++)
                mark(count, s, statuses != NULL);
    }
}
