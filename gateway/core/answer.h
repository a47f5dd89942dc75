/*
 * answer: what the gateway sends a client, in no library's terms. A module that answers a
 * request (a refusal, the upstream's answer, a switch of protocols) fills the request's answer;
 * the HTTP adapter turns it into its library's response. Every answer then passes each
 * module's answer hook (module.h), which adds its fields (the RateLimit fields, X-Request-Id)
 * or, for a denial, puts its own status and body.
 *
 * Field names and values are not copied: they point at the config, at the upstream's head, at
 * the request, or at the answer's own `text` (gw_answer_number() writes there). All of them
 * live until the request ends.
 */
#ifndef SLUICE_GATEWAY_CORE_ANSWER_H
#define SLUICE_GATEWAY_CORE_ANSWER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gateway/common/fields.h"

#define GW_ANSWER_TEXT 512

enum gw_answer_body {
    GW_ANSWER_NONE,   /* nothing decided yet */
    GW_ANSWER_STATIC, /* `body` lives as long as the request's config (on_limit's body) */
    GW_ANSWER_OWNED,  /* `body` is the answer's, freed with it */
    GW_ANSWER_COPY,   /* `body` is copied by the adapter before the request goes on */
    GW_ANSWER_STREAM, /* read with `read` as the client takes it; `length` bytes, or -1 */
    GW_ANSWER_SWITCH, /* a 101: the connection is handed to `switched` once it is sent */
};

/* What a stream's reader returns besides a count of bytes. */
#define GW_READ_WAIT  0 /* nothing yet: the request waits (request.h) and is read again */
#define GW_READ_END   (-1)
#define GW_READ_ERROR (-2)

struct gw_req;

/* The client's connection once the 101 has gone: its socket, the bytes the client sent
 * after the request (`early`, `early_len`), whether it is TLS (the adapter carries the
 * plaintext on `sock`), and how to close it when the tunnel ends (`close(close_cls)`). */
struct gw_switched {
    int sock;
    const char *early;
    size_t early_len;
    bool tls;
    void (*close)(void *close_cls);
    void *close_cls;
};

struct gw_answer {
    unsigned status;
    struct gw_fields fields;
    enum gw_answer_body kind;
    const char *body; /* STATIC, OWNED, COPY */
    size_t body_len;
    int64_t length; /* STREAM: -1 when unknown */
    ssize_t (*read)(struct gw_req *rq, uint64_t pos, char *buf, size_t max); /* STREAM */
    /* SWITCH: the connection is the module's; the request is then over for its client. */
    void (*switched)(struct gw_req *rq, const struct gw_switched *connection);
    bool close;                /* the connection ends after this answer */
    char text[GW_ANSWER_TEXT]; /* room for values made for this answer */
    size_t text_len;
};

/* Starts `a` afresh (its fields emptied, a body it owned freed). */
void gw_answer_reset(struct gw_answer *a);
void gw_answer_free(struct gw_answer *a);

/* Adds the field `name: value` (neither copied). 0, or -1 when memory is short. */
int gw_answer_field(struct gw_answer *a, const char *name, const char *value);

/* Adds the field `name: n`, its value written in the answer's text. */
int gw_answer_number(struct gw_answer *a, const char *name, uint64_t n);

/* Copies `value` into the answer's text and adds `name: value`. */
int gw_answer_copied(struct gw_answer *a, const char *name, const char *value);

#endif
