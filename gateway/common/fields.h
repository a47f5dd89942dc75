/*
 * fields: a message's header fields as plain name/value pairs, the one view of them that the
 * request's phases read (gateway/core/request.h). The HTTP adapter fills it once from what its
 * library parsed; a unit test fills it by hand. Names keep the client's spelling and are
 * compared without case; values are the library's (or the test's) and must outlive the view.
 *
 * A request's fields are few: the first GW_FIELDS_INLINE take no allocation.
 */
#ifndef SLUICE_GATEWAY_FIELDS_H
#define SLUICE_GATEWAY_FIELDS_H

#include <stddef.h>

#define GW_FIELDS_INLINE 24

struct gw_field {
    const char *name;
    const char *value;
};

struct gw_fields {
    struct gw_field *at; /* `n` fields: `first` until it is full, then on the heap */
    size_t n, cap;
    struct gw_field first[GW_FIELDS_INLINE];
};

/* An empty view; gw_fields_free() lets go of what it grew. */
void gw_fields_init(struct gw_fields *f);
void gw_fields_free(struct gw_fields *f);

/* Appends one field (the strings are not copied). 0, or -1 when memory is short. */
int gw_fields_add(struct gw_fields *f, const char *name, const char *value);

/* The first field named `name`, or NULL. */
const char *gw_fields_get(const struct gw_fields *f, const char *name);

/* How many fields are named `name`; the first one's value into `*first` (NULL when none). */
unsigned gw_fields_count(const struct gw_fields *f, const char *name, const char **first);

/* Every `name` field's value joined with ",", as fields of one name combine; NULL when there
 * is none (or memory is short). The caller frees it. */
char *gw_fields_join(const struct gw_fields *f, const char *name);

/* Appends `value` to the comma-separated `*list` (NULL when empty). 0, or -1 when memory is
 * short (the list stays as it was). */
int gw_list_append(char **list, const char *value);

#endif
