/* A message's header fields as name/value pairs; design in fields.h. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/common/fields.h"

void gw_fields_init(struct gw_fields *f)
{
    f->at = f->first;
    f->n = 0;
    f->cap = GW_FIELDS_INLINE;
}

void gw_fields_free(struct gw_fields *f)
{
    if (f->at != f->first)
        free(f->at);
    gw_fields_init(f);
}

int gw_fields_add(struct gw_fields *f, const char *name, const char *value)
{
    if (f->n == f->cap) {
        size_t cap = f->cap * 2;
        struct gw_field *grown = malloc(cap * sizeof *grown);

        if (grown == NULL)
            return -1;
        memcpy(grown, f->at, f->n * sizeof *grown);
        if (f->at != f->first)
            free(f->at);
        f->at = grown;
        f->cap = cap;
    }
    f->at[f->n++] = (struct gw_field){name, value};
    return 0;
}

const char *gw_fields_get(const struct gw_fields *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcasecmp(f->at[i].name, name) == 0)
            return f->at[i].value;
    return NULL;
}

unsigned gw_fields_count(const struct gw_fields *f, const char *name, const char **first)
{
    unsigned n = 0;

    *first = NULL;
    for (size_t i = 0; i < f->n; i++)
        if (strcasecmp(f->at[i].name, name) == 0 && n++ == 0)
            *first = f->at[i].value;
    return n;
}

char *gw_fields_join(const struct gw_fields *f, const char *name)
{
    char *list = NULL;

    for (size_t i = 0; i < f->n; i++)
        if (strcasecmp(f->at[i].name, name) == 0 && f->at[i].value != NULL &&
            gw_list_append(&list, f->at[i].value) != 0) {
            free(list);
            return NULL;
        }
    return list;
}

int gw_list_append(char **list, const char *value)
{
    size_t old_len = *list ? strlen(*list) : 0, len = strlen(value);
    char *grown = realloc(*list, old_len + len + 2);

    if (grown == NULL)
        return -1;
    if (old_len > 0)
        grown[old_len++] = ',';
    memcpy(grown + old_len, value, len + 1);
    *list = grown;
    return 0;
}
