/* What the gateway sends a client; design in answer.h. */
#include <stdlib.h>
#include <string.h>

#include "gateway/common/text.h"
#include "gateway/core/answer.h"

void gw_answer_reset(struct gw_answer *a)
{
    gw_answer_free(a);
    gw_fields_init(&a->fields);
}

void gw_answer_free(struct gw_answer *a)
{
    if (a->kind == GW_ANSWER_OWNED)
        free((char *)a->body);
    gw_fields_free(&a->fields);
    a->kind = GW_ANSWER_NONE;
    a->body = NULL;
    a->body_len = 0;
    a->text_len = 0;
    a->close = false;
}

int gw_answer_field(struct gw_answer *a, const char *name, const char *value)
{
    return gw_fields_add(&a->fields, name, value);
}

int gw_answer_copied(struct gw_answer *a, const char *name, const char *value)
{
    size_t len = strlen(value);
    char *at = a->text + a->text_len;

    if (a->text_len + len + 1 > sizeof a->text)
        return -1;
    memcpy(at, value, len + 1);
    a->text_len += len + 1;
    return gw_answer_field(a, name, at);
}

int gw_answer_number(struct gw_answer *a, const char *name, uint64_t n)
{
    char value[24];
    struct gw_text t = gw_text_on(value, sizeof value - 1);

    gw_text_number(&t, n, 1);
    gw_text_finish(&t);
    return gw_answer_copied(a, name, value);
}
