/* The modules' blocks of keys; design in blocks.h. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config/blocks.h"
#include "config/loader.h"

static struct config_block *registered[CONFIG_BLOCKS_MAX];
static size_t n_registered;

const char *config_place_section(enum config_place place)
{
    return place == CONFIG_IN_ROUTE ? "routes" : "server";
}

struct key_search {
    const char *section, *key;
    bool found;
};

static void match_key(const char *section, const char *key, void *cls)
{
    struct key_search *s = cls;

    if (strcmp(section, s->section) == 0 && strcmp(key, s->key) == 0)
        s->found = true;
}

int config_block_register(struct config_block *block)
{
    for (size_t i = 0; i < n_registered; i++)
        if (registered[i] == block)
            return 0;
    if (n_registered == CONFIG_BLOCKS_MAX)
        return -1;
    for (const struct config_option *o = block->options; o->key != NULL; o++) {
        struct key_search s = {config_place_section(block->place), o->key, false};

        config_known_keys(match_key, &s);
        if (s.found || o->type == CONFIG_CUSTOM)
            return -1;
    }
    registered[n_registered++] = block;
    block->slot = (unsigned)n_registered;
    return 0;
}

size_t config_blocks_count(void)
{
    return n_registered;
}

const struct config_block *config_blocks_at(size_t i)
{
    return registered[i];
}

static const void *block_in(void *const *blocks, const struct config_block *block)
{
    size_t i = block->slot - 1;

    return block->slot != 0 && i < n_registered && registered[i] == block ? blocks[i] : NULL;
}

const void *config_route_block(const struct config_route *route, const struct config_block *block)
{
    return block_in(route->blocks, block);
}

const void *config_server_block(const struct config *config, const struct config_block *block)
{
    return block_in(config->server_blocks, block);
}

int config_blocks_open(void **blocks, enum config_place place)
{
    for (size_t i = 0; i < n_registered; i++) {
        if (registered[i]->place != place || blocks[i] != NULL)
            continue;
        blocks[i] = calloc(1, registered[i]->size);
        if (blocks[i] == NULL)
            return -1;
        if (registered[i]->defaults != NULL)
            registered[i]->defaults(blocks[i]);
    }
    return 0;
}

const struct config_option *config_blocks_find(enum config_place place, const char *key,
                                               size_t *index)
{
    for (size_t i = 0; i < n_registered; i++) {
        if (registered[i]->place != place)
            continue;
        for (const struct config_option *o = registered[i]->options; o->key != NULL; o++) {
            if (strcmp(o->key, key) == 0) {
                *index = i;
                return o;
            }
        }
    }
    return NULL;
}

/* What the value of `option` holds that was allocated. */
static void free_value(const struct config_option *option, char *block)
{
    void *value = block + option->offset;

    switch (option->type) {
    case CONFIG_STRING:
        free(*(char **)value);
        break;
    case CONFIG_CIDRS:
        free(((struct config_cidrs *)value)->items);
        break;
    case CONFIG_ENDPOINT:
        free(((struct config_endpoint *)value)->host);
        break;
    default:
        break;
    }
}

void config_blocks_free(void **blocks)
{
    for (size_t i = 0; i < n_registered; i++) {
        if (blocks[i] == NULL)
            continue;
        for (const struct config_option *o = registered[i]->options; o->key != NULL; o++)
            free_value(o, blocks[i]);
        free(blocks[i]);
        blocks[i] = NULL;
    }
}
