/* A log read line by line in one fixed window; design in log_reader.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/ops/log_reader.h"

struct gw_log_reader {
    int fd;
    bool owned;        /* opened here (not standard input): closed with the reader */
    bool ended;        /* read(2) gave 0: what the window holds is all that is left */
    size_t start, end; /* the bytes of the window not handed out yet */
    char window[GW_LOG_READ_LINE_MAX + 1]; /* a line and its newline */
};

struct gw_log_reader *gw_log_reader_open(const char *file, char err[GW_LOG_READER_ERR_LEN])
{
    struct gw_log_reader *r = calloc(1, sizeof *r);

    if (r == NULL) {
        snprintf(err, GW_LOG_READER_ERR_LEN, "out of memory");
        return NULL;
    }
    if (strcmp(file, "-") == 0) {
        r->fd = STDIN_FILENO;
        return r;
    }
    r->fd = open(file, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        snprintf(err, GW_LOG_READER_ERR_LEN, "%s", strerror(errno));
        free(r);
        return NULL;
    }
    r->owned = true;
    return r;
}

/* Up to `cap` bytes into `at`: how many, 0 at the end of the input, or -1 with `err` filled. */
static ssize_t read_some(struct gw_log_reader *r, char *at, size_t cap,
                         char err[GW_LOG_READER_ERR_LEN])
{
    ssize_t n;

    do
        n = read(r->fd, at, cap);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        snprintf(err, GW_LOG_READER_ERR_LEN, "%s", strerror(errno));
    else if (n == 0)
        r->ended = true;
    return n;
}

/* Drops the rest of a line that filled the window: reads into the window up to its newline,
 * leaving what follows the newline there, or to the end of the input. */
static enum gw_log_read drop_long_line(struct gw_log_reader *r, char err[GW_LOG_READER_ERR_LEN])
{
    r->start = r->end = 0;
    while (!r->ended) {
        ssize_t n = read_some(r, r->window, sizeof r->window, err);
        const char *newline;

        if (n < 0)
            return GW_LOG_READ_ERROR;
        newline = memchr(r->window, '\n', (size_t)n);
        if (newline != NULL) {
            r->start = (size_t)(newline + 1 - r->window);
            r->end = (size_t)n;
            break;
        }
    }
    return GW_LOG_READ_TOO_LONG;
}

enum gw_log_read gw_log_reader_next(struct gw_log_reader *r, const char **text, size_t *len,
                                    char err[GW_LOG_READER_ERR_LEN])
{
    for (;;) {
        char *line = r->window + r->start;
        size_t held = r->end - r->start;
        const char *newline = memchr(line, '\n', held);
        ssize_t n;

        if (newline != NULL || (r->ended && held > 0)) {
            *text = line;
            *len = newline != NULL ? (size_t)(newline - line) : held;
            r->start += newline != NULL ? *len + 1 : held;
            return GW_LOG_READ_LINE;
        }
        if (r->ended)
            return GW_LOG_READ_END;
        if (held == sizeof r->window)
            return drop_long_line(r, err);
        /* The start of a line: moved down, so that the window has room for all of it. */
        memmove(r->window, line, held);
        r->start = 0;
        r->end = held;
        n = read_some(r, r->window + held, sizeof r->window - held, err);
        if (n < 0)
            return GW_LOG_READ_ERROR;
        r->end += (size_t)n;
    }
}

void gw_log_reader_close(struct gw_log_reader *r)
{
    if (r == NULL)
        return;
    if (r->owned)
        close(r->fd);
    free(r);
}
