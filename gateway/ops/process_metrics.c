/* The process's own metrics and the build info; design in process_metrics.h. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gateway/ops/process_metrics.h"

static char build_info[512];

void gw_process_set_build_info(const char *labels)
{
    snprintf(build_info, sizeof build_info, "%s", labels);
}

/* The fields of /proc/self/stat that the series need: 0, or -1. */
struct stat_fields {
    unsigned long long utime, stime, starttime; /* clock ticks */
    unsigned long long vsize;                   /* bytes */
    long long rss;                              /* pages */
};

static int read_stat(struct stat_fields *f)
{
    char text[1024], *after_name;
    FILE *file = fopen("/proc/self/stat", "r");
    size_t len = file ? fread(text, 1, sizeof text - 1, file) : 0;

    if (file != NULL)
        fclose(file);
    text[len] = '\0';
    /* The name, field 2, is in parentheses and may hold spaces: count from its end. */
    after_name = strrchr(text, ')');
    if (after_name == NULL || sscanf(after_name + 1,
                                     " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
                                     "%llu %*d %*d %*d %*d %*d %*d "
                                     "%llu %llu %lld",
                                     &f->utime, &f->stime, &f->starttime, &f->vsize, &f->rss) != 5)
        return -1;
    return 0;
}

/* The time the system booted, seconds since the epoch (/proc/stat's btime), or 0. */
static unsigned long long boot_time(void)
{
    char line[256];
    unsigned long long btime = 0;
    FILE *file = fopen("/proc/stat", "r");

    while (file != NULL && fgets(line, sizeof line, file) != NULL)
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    if (file != NULL)
        fclose(file);
    return btime;
}

/* Open file descriptors, but the one that reads them; -1 when they cannot be counted. */
static long open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    long n = 0;

    if (dir == NULL)
        return -1;
    for (struct dirent *e = readdir(dir); e != NULL; e = readdir(dir))
        n += e->d_name[0] != '.';
    closedir(dir);
    return n - 1;
}

/* One series, its value to `decimals` places (0 for counts and bytes). */
static void series(FILE *out, const char *name, const char *type, const char *help, double value,
                   int decimals)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n%s %.*f\n", name, help, name, type, name, decimals,
            value);
}

void gw_process_metrics_render(FILE *out)
{
    struct stat_fields f;
    struct rlimit limit;
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE), fds = open_fds();
    unsigned long long booted = boot_time();

    fprintf(out,
            "# HELP sluice_build_info The versions sluice and its libraries run at.\n"
            "# TYPE sluice_build_info gauge\nsluice_build_info{%s} 1\n",
            build_info);
    if (read_stat(&f) == 0 && ticks > 0) {
        series(out, "process_cpu_seconds_total", "counter",
               "Total user and system CPU time spent in seconds.",
               (double)(f.utime + f.stime) / (double)ticks, 2);
        series(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
               (double)f.vsize, 0);
        if (page > 0)
            series(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                   (double)f.rss * (double)page, 0);
        if (booted > 0)
            series(out, "process_start_time_seconds", "gauge",
                   "Start time of the process since unix epoch in seconds.",
                   (double)booted + (double)f.starttime / (double)ticks, 2);
    }
    if (fds >= 0)
        series(out, "process_open_fds", "gauge", "Number of open file descriptors.", (double)fds,
               0);
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        series(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
               (double)limit.rlim_cur, 0);
}
