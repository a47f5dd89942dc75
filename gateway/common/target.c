/* Reading the request target; design in target.h. */
#include <stdbool.h>
#include <string.h>

#include "gateway/common/chars.h"
#include "gateway/common/target.h"

/* '.' or '..', also with path parameters (`..;x`, which servlet containers read as `..`). */
static bool is_dot_segment(const char *segment, size_t len)
{
    const char *params = memchr(segment, ';', len);

    if (params != NULL)
        len = (size_t)(params - segment);
    return (len == 1 && segment[0] == '.') || (len == 2 && segment[0] == '.' && segment[1] == '.');
}

int gw_target_path(const char *target, char *out, const char **reason)
{
    size_t w = 0, segment = 0;

    if (strchr(target, '#') != NULL) {
        *reason = "the request target holds a fragment ('#')";
        return -1;
    }
    for (const char *p = target; *p != '\0' && *p != '?'; p++) {
        int c = (unsigned char)*p;

        if (c == '%') {
            c = gw_percent_byte(p);
            if (c < 0) {
                *reason = "the path has a '%' that is not followed by two hex digits";
                return -1;
            }
            if (c == '/') {
                *reason = "the path has an encoded slash (%2F), which upstreams read two ways";
                return -1;
            }
            p += 2;
        }
        if (c == '\\') {
            *reason = "the path has a backslash, which some upstreams read as a slash";
            return -1;
        }
        if (gw_is_control(c)) {
            *reason = "the path decodes to a control character";
            return -1;
        }
        if (c == '/') {
            if (is_dot_segment(out + segment, w - segment)) {
                *reason = "the path has a . or .. segment";
                return -1;
            }
            if (w > 0 && out[w - 1] == '/')
                continue; /* runs of slashes are one, as nginx merges them */
            segment = w + 1;
        }
        out[w++] = (char)c;
    }
    if (is_dot_segment(out + segment, w - segment)) {
        *reason = "the path has a . or .. segment";
        return -1;
    }
    out[w] = '\0';
    return 0;
}

void gw_target_strip_params(const char *path, char *out)
{
    size_t w = 0;

    for (const char *p = path; *p != '\0'; p++) {
        if (*p == ';')
            p += strcspn(p, "/") - 1;
        else
            out[w++] = *p;
    }
    out[w] = '\0';
}

/* The byte at `p[*i]` of a query name or value, decoded ('+' is a space, %XX its byte), `*i`
 * moved past it; -1 for a '%' without two hex digits within `len`. */
static int query_byte(const char *p, size_t len, size_t *i)
{
    int c = (unsigned char)p[*i];

    if (c == '%') {
        c = *i + 2 < len ? gw_percent_byte(p + *i) : -1;
        if (c < 0)
            return -1;
        *i += 2;
    } else if (c == '+') {
        c = ' ';
    }
    (*i)++;
    return c;
}

/* A name character as the most forgiving framework reads it: without case, and with '.', ' '
 * and '[' as '_' (PHP turns `api.key` into `api_key`). */
static int fold_name(int c)
{
    if (c == '.' || c == ' ' || c == '[')
        return '_';
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* True when the `len` bytes at `p` decode to `name`, as some framework reads names. */
static bool decodes_to(const char *p, size_t len, const char *name)
{
    size_t i = 0, n = 0;

    while (i < len) {
        int c = query_byte(p, len, &i);

        if (c < 0 || name[n] == '\0' || fold_name(c) != fold_name((unsigned char)name[n]))
            return false;
        n++;
    }
    return name[n] == '\0';
}

int gw_target_query_value(const char *target, const char *name, char *out, const char **reason)
{
    const char *query = strchr(target, '?'), *found = NULL;
    size_t found_len = 0, name_len = strlen(name), w = 0;

    if (query == NULL)
        return 0;
    /* Pieces split at '&' and at ';', so that a parameter hidden behind a ';' counts too. */
    for (const char *piece = query + 1;; piece += strcspn(piece, "&;") + 1) {
        size_t len = strcspn(piece, "&;"), name_end = strcspn(piece, "=&;");

        if (decodes_to(piece, name_end, name)) {
            if (found != NULL) {
                *reason = "the key parameter is given more than once";
                return -1;
            }
            if (name_end != name_len || strncmp(piece, name, name_len) != 0) {
                *reason = "the key parameter is spelled another way than the route names it";
                return -1;
            }
            if ((piece > query + 1 && piece[-1] == ';') || piece[len] == ';') {
                *reason = "the key parameter is next to a ';', which some upstreams split at";
                return -1;
            }
            found = piece;
            found_len = len;
        }
        if (piece[len] == '\0')
            break;
    }
    if (found == NULL)
        return 0;
    for (size_t i = name_len + 1; i < found_len;) {
        int c = query_byte(found, found_len, &i);

        if (c < 0 || gw_is_control(c)) {
            *reason = "the key parameter's value is not cleanly percent-encoded text";
            return -1;
        }
        out[w++] = (char)c;
    }
    out[w] = '\0';
    return 1;
}

const char *gw_target_after(const char *target, size_t len)
{
    const char *at = target;

    for (size_t taken = 0; taken < len && *at != '\0' && *at != '?'; taken++) {
        if (*at == '/')
            while (*at == '/')
                at++;
        else
            at += *at == '%' && at[1] != '\0' && at[2] != '\0' ? 3 : 1;
    }
    return at;
}
