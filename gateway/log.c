#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

void gw_log(const char *level, const char *fmt, ...)
{
    char line[2048];
    struct timespec now;
    struct tm tm;
    size_t len;
    va_list ap;

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    len = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    len += (size_t)snprintf(line + len, sizeof line - len, ".%03ldZ %s ", now.tv_nsec / 1000000,
                            level);
    va_start(ap, fmt);
    vsnprintf(line + len, sizeof line - len, fmt, ap);
    va_end(ap);
    len = strlen(line);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    if (write(STDERR_FILENO, line, len) < 0)
        return; /* nowhere left to report it */
}
