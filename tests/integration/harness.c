#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"

struct proc upstream;

void check_case_at(const char *file, int line, bool ok, const char *label, const char *fmt, ...)
{
    char what[3072];
    int n = snprintf(what, sizeof what, "[%s] ", label);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what + n, sizeof what - (size_t)n, fmt, ap);
    va_end(ap);
    CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, file, "", CU_FALSE);
}

void expect_header_at(const char *file, int line, const struct reply *r, const char *name,
                      const char *text, bool part)
{
    const char *value = header(r, name);
    bool ok = value != NULL && (part ? strstr(value, text) != NULL : strcmp(value, text) == 0);
    char what[2048];

    if (value == NULL)
        snprintf(what, sizeof what, "no %s field; expected %s\"%s\"", name,
                 part ? "one holding " : "", text);
    else
        snprintf(what, sizeof what, "%s: \"%s\"; expected %s\"%s\"", name, value,
                 part ? "it to hold " : "", text);
    CU_assertImplementation(ok ? CU_TRUE : CU_FALSE, (unsigned)line, what, file, "", CU_FALSE);
}

long header_number(const struct reply *r, const char *name)
{
    const char *value = header(r, name);
    char *end;
    long n;

    if (value == NULL || value[0] < '0' || value[0] > '9')
        return -1;
    errno = 0;
    n = strtol(value, &end, 10);
    return errno == 0 && *end == '\0' ? n : -1;
}

/* --- tests that cannot check here ------------------------------------------------------ */

#define MAX_SKIPS 64

static struct skip {
    CU_pTest test;
    char why[256];
} skips[MAX_SKIPS];
static size_t n_skips;

void skip_test(const char *why)
{
    CU_pTest test = CU_get_current_test();

    if (n_skips == MAX_SKIPS) { /* more would be a broken suite, not a slow machine */
        CU_FAIL("more tests skipped than the harness records");
        return;
    }
    skips[n_skips].test = test;
    snprintf(skips[n_skips].why, sizeof skips[n_skips].why, "%s", why);
    n_skips++;
}

const char *skip_reason(CU_pTest test)
{
    for (size_t i = 0; i < n_skips; i++)
        if (skips[i].test == test)
            return skips[i].why;
    return NULL;
}

void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};

    nanosleep(&t, NULL);
}

double seconds_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *scratch_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "/tmp/sluice-it-%ld-%s", (long)getpid(), name);
    return out;
}

int make_self_signed(const char *name, char key[64], char cert[64])
{
    char key_name[32], cert_name[32], command[256];

    snprintf(key_name, sizeof key_name, "%s-key.pem", name);
    snprintf(cert_name, sizeof cert_name, "%s-cert.pem", name);
    scratch_path(key, 64, key_name);
    scratch_path(cert, 64, cert_name);
    snprintf(command, sizeof command,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout %s "
             "-out %s >/dev/null 2>&1",
             key, cert);
    return system(command) == 0 ? 0 : -1;
}

unsigned free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    unsigned port = 0;

    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

struct redis suite_redis;

int redis_suite_init(void)
{
    return start_redis(&suite_redis);
}

int redis_suite_clean(void)
{
    stop_redis(&suite_redis);
    suite_redis = (struct redis){0}; /* the next suite's on a port of its own */
    return 0;
}

int start_redis(struct redis *r)
{
    char port[16], command[256];
    const char *password = r->password ? r->password : "";

    if (r->port == 0) /* else started again where it was */
        r->port = free_port();
    snprintf(port, sizeof port, "%u", r->port);
    r->pid = fork();
    if (r->pid == 0) {
        int null = open("/dev/null", O_WRONLY);

        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        if (r->password != NULL)
            execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save",
                   "", "--appendonly", "no", "--requirepass", password, (char *)NULL);
        else
            execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save",
                   "", "--appendonly", "no", "--enable-debug-command", "local", (char *)NULL);
        _exit(127);
    }
    snprintf(command, sizeof command,
             "redis-cli -p %u --no-auth-warning %s%s%s ping 2>/dev/null | grep -q PONG", r->port,
             r->password ? "-a '" : "", password, r->password ? "'" : "");
    for (int i = 0; i < 200; i++) {
        if (system(command) == 0)
            return 0;
        sleep_ms(10);
    }
    fprintf(stderr, "redis-server did not start\n");
    stop_redis(r);
    return -1;
}

void stop_redis(struct redis *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
}

void redis_cli(const struct redis *r, const char *args)
{
    char command[256];

    snprintf(command, sizeof command, "redis-cli -p %u %s >/dev/null 2>&1 &", r->port, args);
    if (system(command) != 0)
        fprintf(stderr, "redis-cli %s failed\n", args);
}

int redis_cli_wait(const struct redis *r, const char *args)
{
    char command[256];

    snprintf(command, sizeof command, "redis-cli -p %u %s >/dev/null 2>&1", r->port, args);
    return system(command);
}

long redis_number(const struct redis *r, const char *args, const char *field)
{
    char command[160], line[256];
    size_t len = strlen(field);
    long n = -1;
    FILE *out;

    snprintf(command, sizeof command, "redis-cli -p %u %s", r->port, args);
    out = popen(command, "r");
    while (out != NULL && fgets(line, sizeof line, out) != NULL)
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            n = strtol(line + len + 1, NULL, 10);
            break;
        }
    if (out != NULL)
        pclose(out);
    return n;
}

int tls_client_open(struct tls_client *c, unsigned port, const char *sni, int timeout_ms)
{
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ret;

    *c = (struct tls_client){.fd = socket(AF_INET, SOCK_STREAM, 0)};
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        return -1;
    gnutls_certificate_allocate_credentials(&c->creds);
    gnutls_init(&c->session, GNUTLS_CLIENT);
    gnutls_set_default_priority(c->session);
    if (sni != NULL)
        gnutls_server_name_set(c->session, GNUTLS_NAME_DNS, sni, strlen(sni));
    gnutls_credentials_set(c->session, GNUTLS_CRD_CERTIFICATE, c->creds);
    gnutls_transport_set_int(c->session, c->fd);
    gnutls_handshake_set_timeout(c->session, (unsigned)timeout_ms);
    do
        ret = gnutls_handshake(c->session);
    while (ret < 0 && !gnutls_error_is_fatal(ret));
    return ret < 0 ? -1 : 0;
}

void tls_client_close(struct tls_client *c)
{
    if (c->session != NULL)
        gnutls_deinit(c->session);
    if (c->creds != NULL)
        gnutls_certificate_free_credentials(c->creds);
    if (c->fd >= 0)
        close(c->fd);
    *c = (struct tls_client){.fd = -1};
}

int start_upstream(void)
{
    int out[2];
    FILE *f;
    char line[128];

    if (pipe(out) != 0)
        return -1;
    upstream.pid = fork();
    if (upstream.pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        execl("build/test_upstream", "test_upstream", "127.0.0.1:0", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    f = fdopen(out[0], "r");
    if (f == NULL || fgets(line, sizeof line, f) == NULL ||
        sscanf(line, "listening on 127.0.0.1:%u", &upstream.port) != 1) {
        fprintf(stderr, "test_upstream did not start\n");
        return -1;
    }
    /* Kept open: the upstream writes nothing more, and closing could SIGPIPE it. */
    return 0;
}

void stop_upstream(void)
{
    if (upstream.pid > 0) {
        kill(upstream.pid, SIGKILL);
        waitpid(upstream.pid, NULL, 0);
        upstream.pid = 0;
    }
}

char *read_log(const struct proc *p)
{
    return read_file(p->log_path);
}

int occurrences(const char *text, const char *needle)
{
    int n = 0;

    for (const char *at = text; at != NULL && (at = strstr(at, needle)) != NULL; at++)
        n++;
    return n;
}

int log_count(const struct proc *p, const char *needle)
{
    char *log = read_log(p);
    int n = occurrences(log, needle);

    free(log);
    return n;
}

/* The whole of the file at `path` and its length in `*len`, or NULL; the caller frees it. */
static char *read_file_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    char *bytes = NULL, chunk[65536];
    FILE *out;
    size_t n;

    *len = 0;
    if (f == NULL)
        return NULL;
    out = open_memstream(&bytes, len);
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, out);
    fclose(f);
    fclose(out);
    return bytes;
}

char *read_file(const char *path)
{
    size_t len;
    char *text = read_file_bytes(path, &len);

    return text != NULL ? text : strdup("");
}

char *access_log_line(const struct proc *p, const char *path)
{
    char needle[512];

    snprintf(needle, sizeof needle, "\"path\":\"%s\"", path);
    for (int waited = 0; waited < 2000; waited += 20) {
        char *log = read_file(p->access_path), *at = log ? strstr(log, needle) : NULL;

        if (at != NULL) {
            char *start = at;
            size_t len = strcspn(at, "\n");

            while (start > log && start[-1] != '\n')
                start--;
            len += (size_t)(at - start);
            memmove(log, start, len);
            log[len] = '\0';
            return log;
        }
        free(log);
        sleep_ms(20);
    }
    return NULL;
}

int wait_for_access_lines(const struct proc *p, int want)
{
    int lines = 0;

    for (int i = 0; i < 150; i++) {
        char *log = read_file(p->access_path);

        lines = 0;
        for (const char *at = log; at != NULL && (at = strchr(at, '\n')) != NULL; at++)
            lines++;
        free(log);
        if (lines >= want)
            break;
        sleep_ms(20);
    }
    return lines;
}

const char *sluice_binary(void)
{
    const char *path = getenv("SLUICE");

    return path != NULL && path[0] != '\0' ? path : "build/sluice";
}

bool sluice_sanitized(void)
{
    static const char *const entry_points[] = {"__asan_init", "__tsan_init", "__msan_init"};
    static int sanitized = -1; /* not read yet */
    char *binary;
    size_t len = 0;

    if (sanitized >= 0)
        return sanitized == 1;
    binary = read_file_bytes(sluice_binary(), &len);
    if (binary == NULL) {
        fprintf(stderr, "harness: cannot read %s\n", sluice_binary());
        exit(2);
    }
    sanitized = 0;
    for (size_t i = 0; i < sizeof entry_points / sizeof *entry_points; i++)
        if (memmem(binary, len, entry_points[i], strlen(entry_points[i])) != NULL)
            sanitized = 1;
    free(binary);
    return sanitized == 1;
}

/* --- the serving mode ($SLUICE_MODE, $SLUICE_WORKERS) ---------------------------------- */

/* $NAME when set and not empty; a character outside `allowed` ends the run. */
static const char *setting(const char *name, const char *allowed)
{
    const char *value = getenv(name);

    if (value == NULL || value[0] == '\0')
        return NULL;
    if (value[strspn(value, allowed)] != '\0') {
        fprintf(stderr, "%s=\"%s\": only the characters %s are expected\n", name, value, allowed);
        exit(2);
    }
    return value;
}

const char *serving_mode(void)
{
    return setting("SLUICE_MODE", "abcdefghijklmnopqrstuvwxyz_");
}

const char *serving_workers(void)
{
    return setting("SLUICE_WORKERS", "0123456789");
}

/* Whether the quote at text[i] opens a quoted scalar: it does first on its line or after an
 * indicator, while inside a plain scalar (`it's`) it is just a character. */
static bool opens_quote(const char *text, size_t i)
{
    while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t'))
        i--;
    return i == 0 || strchr("\n:,[{-?", text[i - 1]) != NULL;
}

/* Whether the '#' at text[i] starts a comment: first on its line or after a blank. */
static bool opens_comment(const char *text, size_t i)
{
    return i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n';
}

/* The index just past the quoted scalar opening at text[i], or 0 when it never closes. */
static size_t past_quote(const char *text, size_t i)
{
    char quote = text[i];

    for (i++; text[i] != '\0'; i++) {
        if (quote == '"' && text[i] == '\\' && text[i + 1] != '\0')
            i++;
        else if (text[i] == quote && quote == '\'' && text[i + 1] == '\'')
            i++; /* '' is a quote inside '...' */
        else if (text[i] == quote)
            return i + 1;
    }
    return 0;
}

/* Whether the key that starts at `at` (plain or quoted) is `key`. */
static bool key_is(const char *at, const char *key)
{
    size_t len = strlen(key);

    if (at[0] == '"' || at[0] == '\'')
        return strncmp(at + 1, key, len) == 0 && at[len + 1] == at[0];
    return strncmp(at, key, len) == 0 && strchr(": \t", at[len]) != NULL && at[len] != '\0';
}

/* The flow nesting ([ and {) just before text[end], past quoted scalars and comments; -1
 * when a quote opened before `end` does not close. */
static int flow_depth(const char *text, size_t end)
{
    int depth = 0;

    for (size_t i = 0; i < end && text[i] != '\0'; i++) {
        char c = text[i];

        if ((c == '"' || c == '\'') && opens_quote(text, i)) {
            size_t past = past_quote(text, i);

            if (past == 0)
                return -1;
            i = past - 1;
        } else if (c == '#' && opens_comment(text, i)) {
            while (text[i + 1] != '\0' && text[i + 1] != '\n')
                i++;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return depth;
}

/* What a config's server mapping already says, and where to add to it. */
struct server_mapping {
    size_t at; /* where the addition goes */
    bool has_mode, has_workers;
    const char *separator; /* before a flow mapping's first addition: ", ", or less */
    int indent;            /* of a block mapping's keys; -1 for a flow mapping */
    bool newline_first;    /* the text ends without a newline where the lines go */
};

/* Reads the flow mapping opening at text[open] (after "server:"). false when it does not
 * close. */
static bool read_flow(const char *text, size_t open, struct server_mapping *m)
{
    size_t last = open; /* the last significant character */
    bool key_next = false;
    int depth = 0;

    for (size_t i = open; text[i] != '\0'; i++) {
        char c = text[i];

        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            continue;
        if (c == '#' && opens_comment(text, i)) {
            while (text[i + 1] != '\0' && text[i + 1] != '\n')
                i++;
            continue;
        }
        if (key_next) { /* the first significant character after '{' or ',' at depth 1 */
            m->has_mode = m->has_mode || key_is(text + i, "mode");
            m->has_workers = m->has_workers || key_is(text + i, "workers");
            key_next = false;
        }
        if ((c == '"' || c == '\'') && opens_quote(text, i)) {
            size_t past = past_quote(text, i);

            if (past == 0)
                return false;
            i = last = past - 1;
            continue;
        }
        if (c == '{' || c == '[') {
            key_next = ++depth == 1;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) {
                m->at = i;
                m->separator = last == open ? "" : text[last] == ',' ? " " : ", ";
                m->indent = -1;
                return true;
            }
        } else if (c == ',' && depth == 1) {
            key_next = true;
        }
        last = i;
    }
    return false;
}

/* Reads the block mapping under the "server:" line that ends at text[eol] ('\n' or the end).
 * false when what is under it is not a block mapping. */
static bool read_block(const char *text, size_t eol, struct server_mapping *m)
{
    size_t after = eol; /* the end of the mapping's last line so far: the server line */

    m->indent = -1;
    for (size_t line = eol; text[line] == '\n';) {
        size_t start = line + 1, end = start + strcspn(text + start, "\n");
        size_t first = start + strspn(text + start, " ");     /* past the indentation */
        size_t visible = start + strspn(text + start, " \t"); /* past all blanks */
        int indent = (int)(first - start);

        line = end;
        if (visible == end || text[visible] == '#')
            continue; /* blank or a comment: the mapping may go on after it */
        if (text[first] == '\t')
            return false; /* a tab in indentation: not YAML */
        if (indent == 0)
            break; /* the next top-level key */
        if (m->indent < 0) {
            if (strchr("{[-&!*|>", text[first]) != NULL)
                return false; /* a flow value on the next line, a list, an anchor, ... */
            m->indent = indent;
        } else if (indent < m->indent) {
            return false;
        }
        if (indent == m->indent) {
            m->has_mode = m->has_mode || key_is(text + first, "mode");
            m->has_workers = m->has_workers || key_is(text + first, "workers");
        }
        after = end;
    }
    if (m->indent < 0)
        m->indent = 2; /* "server:" with nothing under it */
    m->newline_first = text[after] != '\n';
    m->at = text[after] == '\n' ? after + 1 : after;
    return true;
}

/* Where a config's server mapping is and what it has; false (with `why`) when the config's
 * shape is not one this harness should touch. A config without one gets it appended:
 * m->indent is then 0. */
static bool find_server(const char *yaml, struct server_mapping *m, const char **why)
{
    size_t len = strlen(yaml);
    bool top_key = false;

    memset(m, 0, sizeof *m);
    if (flow_depth(yaml, len) != 0) {
        *why = "its brackets or quotes do not close";
        return false;
    }
    for (size_t line = 0; line < len; line += strcspn(yaml + line, "\n") + 1) {
        const char *at = yaml + line;
        size_t colon;

        if (strncmp(at, "---", 3) == 0 || strncmp(at, "...", 3) == 0 || at[0] == '%') {
            *why = "it has document markers or directives";
            return false;
        }
        if (strncmp(at, "\"server\"", 8) == 0 || strncmp(at, "'server'", 8) == 0) {
            *why = "its server key is quoted";
            return false;
        }
        top_key = top_key || (at[0] >= 'a' && at[0] <= 'z');
        if (strncmp(at, "server", 6) != 0 || flow_depth(yaml, line) != 0)
            continue;
        colon = 6 + strspn(at + 6, " ");
        if (at[colon] != ':' || (at[colon + 1] != '\0' && strchr(" \t\n", at[colon + 1]) == NULL))
            continue; /* "servers:", say */
        colon++;
        colon += strspn(at + colon, " \t");
        if (at[colon] == '{') {
            if (read_flow(yaml, line + colon, m))
                return true;
            *why = "its server mapping does not close";
            return false;
        }
        if (at[colon] == '\n' || at[colon] == '\0' || at[colon] == '#') {
            if (read_block(yaml, line + colon + strcspn(at + colon, "\n"), m))
                return true;
            *why = "what is under server: is not a block mapping";
            return false;
        }
        *why = "its server value is neither a mapping nor empty";
        return false;
    }
    if (!top_key) {
        *why = "it has no top-level key";
        return false;
    }
    m->at = len;
    m->newline_first = len > 0 && yaml[len - 1] != '\n';
    m->indent = 0;
    return true;
}

char *with_serving_mode(const char *yaml)
{
    const char *mode = serving_mode(), *workers = serving_workers(), *why = NULL;
    struct server_mapping m;
    char *text = NULL;
    size_t len = 0;
    FILE *out;

    if ((mode == NULL && workers == NULL) || !find_server(yaml, &m, &why)) {
        if (why != NULL)
            fprintf(stderr, "(harness: config left in its own serving mode: %s) ", why);
        return strdup(yaml);
    }
    out = open_memstream(&text, &len);
    fwrite(yaml, 1, m.at, out);
    if (m.newline_first)
        fputc('\n', out);
    if (m.indent == 0)
        fputs("server:\n", out);
    if (m.indent < 0) { /* flow: ", mode: event, workers: 2" before the brace */
        const char *separator = m.separator;

        if (mode != NULL && !m.has_mode) {
            fprintf(out, "%smode: %s", separator, mode);
            separator = ", ";
        }
        if (workers != NULL && !m.has_workers)
            fprintf(out, "%sworkers: %s", separator, workers);
    } else {
        int indent = m.indent > 0 ? m.indent : 2;

        if (mode != NULL && !m.has_mode)
            fprintf(out, "%*smode: %s\n", indent, "", mode);
        if (workers != NULL && !m.has_workers)
            fprintf(out, "%*sworkers: %s\n", indent, "", workers);
    }
    fputs(yaml + m.at, out);
    fclose(out);
    return text;
}

/* Formats `yaml` with `ap`, gives it the serving mode when `env_mode`, writes it to `path`. */
static void write_config(const char *path, bool env_mode, const char *yaml, va_list ap)
{
    char *formatted = NULL, *text;
    FILE *f;

    if (vasprintf(&formatted, yaml, ap) < 0) {
        fprintf(stderr, "harness: out of memory formatting a config\n");
        exit(2);
    }
    text = env_mode ? with_serving_mode(formatted) : formatted;
    f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    if (text != formatted)
        free(text);
    free(formatted);
}

void rewrite_config(struct proc *p, bool in_place, const char *yaml, ...)
{
    char temporary[96];
    va_list ap;

    snprintf(temporary, sizeof temporary, "%s.new", p->config_path);
    va_start(ap, yaml);
    write_config(in_place ? p->config_path : temporary, p->env_mode, yaml, ap);
    va_end(ap);
    if (!in_place)
        rename(temporary, p->config_path);
}

bool wait_for_log(const struct proc *p, const char *text, int count, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        char *log = read_log(p);
        int seen = 0;

        for (char *at = log; at != NULL && (at = strstr(at, text)) != NULL; at++)
            seen++;
        free(log);
        if (seen >= count)
            return true;
        sleep_ms(10);
    }
    return false;
}

/* The value of `series` in the /metrics text `body`, or -1. */
static double sample(const char *body, const char *series)
{
    size_t len = strlen(series);

    for (const char *line = body; line != NULL && *line != '\0'; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, series, len) == 0 && line[len] == ' ')
            return strtod(line + len + 1, NULL);
    }
    return -1;
}

int run_sluice(const char *args, char *out, size_t cap)
{
    char command[512];

    snprintf(command, sizeof command, "%s %s", sluice_binary(), args);
    return run_command(command, out, cap);
}

int run_command(const char *command, char *out, size_t cap)
{
    char line[1024];
    FILE *p;
    size_t n;
    int status;

    snprintf(line, sizeof line, "%s 2>&1", command);
    p = popen(line, "r");
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double metric_now(const struct proc *p, const char *series)
{
    struct reply r;
    double value;

    http(p->admin_port, "GET", "/metrics", NULL, NULL, &r);
    value = sample(r.body, series);
    reply_free(&r);
    return value;
}

double metric(const struct proc *p, const char *series)
{
    struct reply r;
    double value;

    for (int waited = 0;; waited += 10) {
        http(p->admin_port, "GET", "/metrics", NULL, NULL, &r);
        /* A page that did not come (the admin port busy a moment) is asked for again too. */
        if ((r.status == 200 && sample(r.body, "sluice_requests_in_flight") <= 0) || waited >= 2000)
            break;
        reply_free(&r);
        sleep_ms(10);
    }
    value = sample(r.body, series);
    reply_free(&r);
    return value;
}

/* Many suites count requests in fixed windows of an hour, which all reset at the top of the
 * hour (UTC): requests that straddled it would be counted in two windows. A sluice asked for
 * in the last HOUR_EDGE_S seconds of an hour is started just after it instead, so that a test
 * (or a suite sharing one gateway) that takes less than that never sees the reset. */
#define HOUR_EDGE_S 30

static void wait_past_hour_edge(void)
{
    long to_edge = 3600 - (long)(time(NULL) % 3600);

    if (to_edge <= HOUR_EDGE_S)
        sleep((unsigned)to_edge + 1);
}

/* How start() runs sluice. */
enum start_kind {
    START_PLAIN,
    START_UNDER_VALGRIND,
    START_MEASURED, /* a sanitizer build without its quarantine: start_sluice_measured() */
};

/* In the child: sluice's stderr and stdout to its log and access log, then the binary (under
 * valgrind, or with `asan_options` as $ASAN_OPTIONS when it is not empty). */
/* The resolv.conf the next sluice started sees, or NULL: the machine's. */
static const char *resolving_with;

static void exec_sluice(const struct proc *p, char *asan_options)
{
    int log = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int access = open(p->access_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    dup2(log, STDERR_FILENO);
    dup2(access, STDOUT_FILENO);
    if (p->under_valgrind) {
        char log_file[128];

        snprintf(log_file, sizeof log_file, "--log-file=%s.valgrind", p->config_path);
        execlp("valgrind", "valgrind", "--quiet", "--leak-check=full",
               "--errors-for-leak-kinds=definite", "--error-exitcode=99", log_file, sluice_binary(),
               "-c", p->config_path, (char *)NULL);
    }
    if (asan_options[0] != '\0')
        putenv(asan_options);
    /* In a mount namespace of its own, where the file is /etc/resolv.conf (unshare makes the
     * namespace's mounts private: nothing is seen outside it). */
    if (resolving_with != NULL)
        execlp("unshare", "unshare", "--mount", "sh", "-c",
               "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"", resolving_with,
               sluice_binary(), "-c", p->config_path, (char *)NULL);
    execl(sluice_binary(), "sluice", "-c", p->config_path, (char *)NULL);
    _exit(127);
}

/* Once sluice's log says "listening on ADDRESS:PORT": p->port, and p->admin_port from the
 * admin listener's line when there is one. False while the line is not there whole. */
static bool read_ports(struct proc *p, const char *log)
{
    static const char admin_line[] = ") on http://"; /* after "admin endpoints (...)" */
    const char *at = strstr(log, "listening on "), *end = at ? strchr(at, '\n') : NULL;
    const char *colon = NULL, *admin, *host;

    /* The port ends the line ("listening on 127.0.0.1:PORT" or "[::1]:PORT"), which must be
     * whole: other lines may follow it. */
    for (const char *c = at; end != NULL && c < end; c++)
        if (*c == ':')
            colon = c;
    if (colon == NULL || sscanf(colon + 1, "%u", &p->port) != 1)
        return false;
    /* "... on http://127.0.0.1:PORT" or "... on http://[::1]:PORT" */
    admin = strstr(log, "admin endpoints (");
    admin = admin != NULL ? strstr(admin, admin_line) : NULL;
    colon = NULL;
    if (admin != NULL) {
        host = admin + sizeof admin_line - 1;
        colon = strchr(*host == '[' ? strchr(host, ']') : host, ':');
    }
    if (colon != NULL)
        sscanf(colon + 1, "%u", &p->admin_port);
    return true;
}

/* Starts sluice on p->config_path, its logs beside it, with `asan_options` as exec_sluice()
 * takes them, and waits for its "listening on" line. */
static int launch(struct proc *p, char *asan_options)
{
    snprintf(p->log_path, sizeof p->log_path, "%s.log", p->config_path);
    snprintf(p->access_path, sizeof p->access_path, "%s.access", p->config_path);
    p->pid = fork();
    if (p->pid == 0)
        exec_sluice(p, asan_options);
    for (int i = 0; i < (p->under_valgrind ? 3000 : 500); i++) {
        char *log = read_log(p);
        bool up = read_ports(p, log);
        int status;

        free(log);
        if (up)
            return 0;
        if (waitpid(p->pid, &status, WNOHANG) == p->pid)
            break;
        sleep_ms(10);
    }
    {
        char *log = read_log(p);

        fprintf(stderr, "sluice did not start; its log:\n%s\n", log ? log : "");
        free(log);
    }
    stop_sluice(p, 100);
    return -1;
}

static int start(struct proc *p, enum start_kind kind, const char *yaml, va_list ap)
{
    /* Made before fork(): the child only puts it in place. */
    static char asan_options[1024];
    const char *inherited = getenv("ASAN_OPTIONS");
    int fd;

    wait_past_hour_edge();
    memset(p, 0, sizeof *p);
    p->under_valgrind = kind == START_UNDER_VALGRIND;
    p->env_mode = true;
    snprintf(p->config_path, sizeof p->config_path, "/tmp/sluice-it-XXXXXX");
    fd = mkstemp(p->config_path);
    close(fd);
    write_config(p->config_path, p->env_mode, yaml, ap);
    asan_options[0] = '\0';
    if (kind == START_MEASURED && sluice_sanitized())
        snprintf(asan_options, sizeof asan_options,
                 "ASAN_OPTIONS=%s%squarantine_size_mb=0:thread_local_quarantine_size_kb=0",
                 inherited ? inherited : "", inherited && inherited[0] ? ":" : "");
    return launch(p, asan_options);
}

int start_sluice_on(struct proc *p, const char *path)
{
    static char no_options[1];

    wait_past_hour_edge();
    memset(p, 0, sizeof *p);
    if (strlen(path) >= sizeof p->config_path) { /* the logs' paths are longer by 16 */
        fprintf(stderr, "harness: %s is too long a config path\n", path);
        return -1;
    }
    snprintf(p->config_path, sizeof p->config_path, "%s", path);
    return launch(p, no_options);
}

int start_sluice(struct proc *p, const char *yaml, ...)
{
    va_list ap;
    int rc;

    va_start(ap, yaml);
    rc = start(p, START_PLAIN, yaml, ap);
    va_end(ap);
    return rc;
}

int start_sluice_resolving(struct proc *p, const char *resolv_conf, const char *yaml, ...)
{
    va_list ap;
    int rc;

    resolving_with = resolv_conf;
    va_start(ap, yaml);
    rc = start(p, START_PLAIN, yaml, ap);
    va_end(ap);
    resolving_with = NULL;
    return rc;
}

int start_sluice_under_valgrind(struct proc *p, const char *yaml, ...)
{
    va_list ap;
    int rc;

    va_start(ap, yaml);
    rc = start(p, START_UNDER_VALGRIND, yaml, ap);
    va_end(ap);
    return rc;
}

int start_sluice_measured(struct proc *p, const char *yaml, ...)
{
    va_list ap;
    int rc;

    va_start(ap, yaml);
    rc = start(p, START_MEASURED, yaml, ap);
    va_end(ap);
    return rc;
}

int stop_sluice(struct proc *p, int wait_ms)
{
    int status;

    if (p->pid <= 0)
        return -1;
    /* A sanitizer build on a machine that runs four suites at once can take several times
     * as long to stop: waited for as long, so that only a stop that hangs fails. */
    if (sluice_sanitized())
        wait_ms *= 3;
    kill(p->pid, SIGTERM);
    for (int waited = 0; waited <= wait_ms; waited += 10) {
        if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
            const char *keep = getenv("SLUICE_IT_KEEP");

            p->pid = 0;
            if (keep != NULL && keep[0] != '\0') { /* to read after a failure */
                fprintf(stderr, "(kept %s and its .log, .access) ", p->config_path);
            } else {
                unlink(p->config_path);
                unlink(p->log_path);
                unlink(p->access_path);
            }
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        sleep_ms(10);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
    return -1;
}

static size_t collect(char *data, size_t size, size_t n, void *cls)
{
    FILE *out = cls;

    return fwrite(data, size, n, out);
}

int http(unsigned port, const char *method, const char *target, const char *const *headers,
         const char *body, struct reply *out)
{
    CURL *curl = curl_easy_init();
    struct curl_slist *list = NULL;
    char url[4096];
    size_t head_len = 0;
    FILE *head, *content;
    CURLcode rc;

    memset(out, 0, sizeof *out);
    head = open_memstream(&out->head, &head_len);
    content = open_memstream(&out->body, &out->body_len);
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, target);
    for (const char *const *h = headers; h != NULL && *h != NULL; h++)
        list = curl_slist_append(list, *h);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    if (body != NULL)
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, head);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, content);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
    rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_getinfo(curl, CURLINFO_TOTAL_TIME, &out->seconds);
    fclose(head);
    fclose(content);
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    return rc == CURLE_OK ? 0 : -1;
}

long get_status(unsigned port, const char *target, const char *api_key)
{
    char field[256];
    const char *headers[] = {field, NULL};
    struct reply r;
    long status;

    snprintf(field, sizeof field, "X-API-Key: %s", api_key ? api_key : "");
    http(port, "GET", target, api_key ? headers : NULL, NULL, &r);
    status = r.status;
    reply_free(&r);
    return status;
}

static size_t discard(char *data, size_t size, size_t n, void *cls)
{
    (void)data, (void)cls;
    return size * n;
}

int race_requests(const unsigned *ports, int n_ports, int n, const char *target,
                  const char *api_key, int *other)
{
    CURLM *multi = curl_multi_init();
    CURL *easy[256];
    struct curl_slist *headers = NULL;
    char field[256], url[512];
    int running = 0, ok = 0;

    if (n > 256)
        n = 256;
    if (api_key != NULL) {
        snprintf(field, sizeof field, "X-API-Key: %s", api_key);
        headers = curl_slist_append(NULL, field);
    }
    *other = 0;
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)n);
    for (int i = 0; i < n; i++) {
        easy[i] = curl_easy_init();
        snprintf(url, sizeof url, "http://127.0.0.1:%u%s", ports[i % n_ports], target);
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(easy[i], CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(easy[i], CURLOPT_TIMEOUT, 30L);
        curl_multi_add_handle(multi, easy[i]);
    }
    do {
        curl_multi_perform(multi, &running);
        curl_multi_poll(multi, NULL, 0, 100, NULL);
    } while (running > 0);
    for (int i = 0; i < n; i++) {
        long status = 0;

        curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &status);
        ok += status == 200;
        *other += status != 200 && status != 429;
        curl_multi_remove_handle(multi, easy[i]);
        curl_easy_cleanup(easy[i]);
    }
    curl_slist_free_all(headers);
    curl_multi_cleanup(multi);
    return ok;
}

long proc_threads(pid_t pid)
{
    return proc_kib(pid, "Threads"); /* a bare number, read the same way */
}

long proc_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t len = strlen(field);
    long kib = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = strtol(line + len + 1, NULL, 10);
            break;
        }
    if (f != NULL)
        fclose(f);
    return kib;
}

static size_t count_bytes(char *data, size_t size, size_t n, void *cls)
{
    (void)data;
    *(unsigned long long *)cls += size * n;
    return size * n;
}

long http_count(unsigned port, const char *target, unsigned long long *bytes)
{
    CURL *curl = curl_easy_init();
    char url[1024];
    long status = 0;

    *bytes = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, target);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, count_bytes);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, bytes);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    return status;
}

int raw_connect(unsigned port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int raw_exchange(unsigned port, const char *request, size_t len, char *answer, size_t cap,
                 int timeout_ms)
{
    int fd = raw_connect(port), status = 0;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    size_t got = 0;
    ssize_t n;

    answer[0] = '\0';
    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (send(fd, request, len, MSG_NOSIGNAL) == (ssize_t)len)
        while (got + 1 < cap && (n = recv(fd, answer + got, cap - got - 1, 0)) > 0)
            got += (size_t)n;
    answer[got] = '\0';
    close(fd);
    if (sscanf(answer, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    return status;
}

void reply_free(struct reply *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

const char *header(const struct reply *r, const char *name)
{
    static char value[1024];
    size_t len = strlen(name);

    for (const char *line = r->head; line != NULL && *line != '\0';) {
        const char *eol = strstr(line, "\r\n");

        if (eol == NULL)
            break;
        if (strncasecmp(line, name, len) == 0 && line[len] == ':') {
            const char *v = line + len + 1;

            while (*v == ' ')
                v++;
            snprintf(value, sizeof value, "%.*s", (int)(eol - v), v);
            return value;
        }
        line = eol + 2;
    }
    return NULL;
}

void upstream_stats(unsigned long *requests, unsigned long *connections)
{
    struct reply r;

    /* Directly to the upstream, so it counts itself. */
    http(upstream.port, "GET", "/stats", NULL, NULL, &r);
    if (r.body == NULL ||
        sscanf(r.body, "requests %lu\nconnections %lu", requests, connections) != 2)
        *requests = *connections = 0;
    reply_free(&r);
}

unsigned long upstream_reached(unsigned long *mark)
{
    unsigned long requests, connections, n;

    upstream_stats(&requests, &connections);
    n = requests - *mark;
    *mark = requests;
    return n;
}

unsigned long upstream_peak(void)
{
    struct reply r;
    unsigned long peak = 0;

    http(upstream.port, "GET", "/peak", NULL, NULL, &r);
    if (r.body == NULL || sscanf(r.body, "peak %lu", &peak) != 1)
        peak = ULONG_MAX;
    reply_free(&r);
    return peak;
}

int start_ws_server(struct proc *p, const char *cert, const char *key)
{
    int out[2];
    FILE *f;
    char line[128];

    memset(p, 0, sizeof *p);
    if (pipe(out) != 0)
        return -1;
    p->pid = fork();
    if (p->pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        if (cert != NULL)
            execl("/usr/bin/python3", "python3", "tests/integration/ws_peer.py", "server", "--tls",
                  cert, key, (char *)NULL);
        else
            execl("/usr/bin/python3", "python3", "tests/integration/ws_peer.py", "server",
                  (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    f = fdopen(out[0], "r");
    if (f == NULL || fgets(line, sizeof line, f) == NULL ||
        sscanf(line, "listening on 127.0.0.1:%u", &p->port) != 1) {
        fprintf(stderr, "ws_peer.py server did not start (python3-websockets missing?)\n");
        return -1;
    }
    return 0; /* the pipe stays open: the server writes nothing more */
}

void stop_ws_server(struct proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = 0;
    }
}

int start_haproxy(struct haproxy *h, const char *config, const unsigned *ports, size_t n)
{
    int fd;
    FILE *f;

    snprintf(h->config_path, sizeof h->config_path, "/tmp/sluice-haproxy-XXXXXX");
    fd = mkstemp(h->config_path);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
        return -1;
    fputs(config, f);
    fclose(f);
    h->pid = fork();
    if (h->pid == 0) {
        int null = open("/dev/null", O_WRONLY);

        dup2(null, 1);
        dup2(null, 2);
        execl("/usr/sbin/haproxy", "haproxy", "-db", "-f", h->config_path, (char *)NULL);
        _exit(127);
    }
    for (int tries = 0; h->pid > 0 && tries < 250; tries++) {
        size_t up = 0;

        for (size_t i = 0; i < n; i++) {
            int c = raw_connect(ports[i]);

            if (c >= 0) {
                close(c);
                up++;
            }
        }
        if (up == n)
            return 0;
        sleep_ms(20);
    }
    stop_haproxy(h);
    return -1;
}

void stop_haproxy(struct haproxy *h)
{
    if (h->pid > 0) {
        kill(h->pid, SIGTERM);
        waitpid(h->pid, NULL, 0);
    }
    h->pid = 0;
    unlink(h->config_path);
}
