/* libmicrohttpd's daemons, each started here with sluice's logger, and that logger: the
 * messages libmicrohttpd writes, told apart by their formats, counted, and logged at most
 * once a second each. Design in server.h. */
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gateway/common/log.h"
#include "gateway/front/server_private.h"
#include "gateway/ops/metrics.h"
#include "limiter/limiter.h"

/* libmicrohttpd reports refused connections and failed accepts only here, so they are told
 * apart by its message formats (0.9.75, daemon.c; `_()` does not translate there). Both come in
 * floods: a refusal per client retry at max_connections, and, out of file descriptors, two
 * lines per failed accept(), which is retried at once: in thread-per-connection mode the listen
 * loop (MHD_poll_listen_socket) ignores libmicrohttpd's own `at_limit` pause, and the
 * connection waiting in the backlog keeps the socket readable. This callback runs on that
 * loop's thread right after the failure, so pausing here pauses accepting (nginx pauses
 * 500 ms; 100 ms resumes sooner once a connection closes). Each kind is counted and logged at
 * most once a second; test_pressure.c checks that the formats still match. */
void gw_mhd_count_refusal(struct gw_server *s)
{
    static struct gw_log_limit refusals;
    uint64_t more;

    gw_metrics_count_rejected(s->metrics);
    if (gw_log_limit_pass(&refusals, limiter_now_ns(), 1000000000, &more))
        gw_warn("http: connection limit reached (max_connections, max_connections_per_ip, "
                "or the admin port's 64): connection closed (and %llu more since the last "
                "such line; at most one a second)",
                (unsigned long long)more);
}

/* libmicrohttpd's other messages (0.9.75, connection.c and daemon.c; told apart by the start
 * of their format), each logged as one line "http: ..." (gw_log() escapes what could break
 * it) at a level an operator can filter, and at most once a second per kind, since a client
 * can provoke most of them at will. The one that carries the HTML body libmicrohttpd answers
 * with is logged by its status alone; the lines that come just before it to say why are
 * details, at debug. Any message not listed is a warning, rate-limited like the others. */
enum mhd_line { MHD_AS_IS, MHD_ANSWERED };

static struct mhd_message {
    const char *format;
    enum config_log_level level;
    enum mhd_line line;
    struct gw_log_limit limit;
} mhd_messages[] = {
    /* A client that goes away mid-request or mid-answer. */
    {"Socket has been disconnected when reading request", CONFIG_LOG_INFO, MHD_AS_IS, {0}},
    {"Connection socket is closed when reading request", CONFIG_LOG_INFO, MHD_AS_IS, {0}},
    {"Connection was closed by remote side", CONFIG_LOG_INFO, MHD_AS_IS, {0}},
    {"Failed to send", CONFIG_LOG_INFO, MHD_AS_IS, {0}},
    /* A request libmicrohttpd itself cannot read (only the admin port's reach it: the proxied
     * port's strict reader, wire.h, answers those first), and the reasons that precede it. */
    {"Error processing request (HTTP response code is %u", CONFIG_LOG_INFO, MHD_ANSWERED, {0}},
    {"Too large value of 'Content-Length'", CONFIG_LOG_DEBUG, MHD_AS_IS, {0}},
    {"Failed to parse `Content-Length'", CONFIG_LOG_DEBUG, MHD_AS_IS, {0}},
    {"Received HTTP/1.1 request without `Host'", CONFIG_LOG_DEBUG, MHD_AS_IS, {0}},
    {"Not enough memory in pool to", CONFIG_LOG_DEBUG, MHD_AS_IS, {0}},
    {NULL, CONFIG_LOG_WARN, MHD_AS_IS, {0}}, /* any other */
};

/* libmicrohttpd's message into `out`, without the newline (and full stop) that ends it. */
static void format_mhd_message(char *out, size_t cap, const char *fmt, va_list ap)
{
    size_t len;

    vsnprintf(out, cap, fmt, ap);
    len = strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '.'))
        out[--len] = '\0';
}

static void log_mhd_message(const char *fmt, va_list ap)
{
    struct mhd_message *m = mhd_messages;
    char message[512], more_text[96] = "";
    uint64_t more;

    while (m->format != NULL && strncmp(fmt, m->format, strlen(m->format)) != 0)
        m++;
    if (!gw_log_enabled(m->level) ||
        !gw_log_limit_pass(&m->limit, limiter_now_ns(), 1000000000, &more))
        return;
    if (m->line == MHD_ANSWERED) {
        unsigned status = va_arg(ap, unsigned); /* then the HTML body, left out */

        snprintf(message, sizeof message,
                 "answered %u to a request it could not read and closed the connection", status);
    } else {
        format_mhd_message(message, sizeof message, fmt, ap);
    }
    if (more > 0)
        snprintf(more_text, sizeof more_text, " (and %llu more since the last such line)",
                 (unsigned long long)more);
    gw_log(m->level, "http: %s%s", message, more_text);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    static const char refused[] = "Server reached connection limit";
    static const char accept_failed[] = "Error accepting connection";
    static const char out_of_resources[] = "Hit process or system resource limit";
    static const char handshake_failed[] = "Error: received handshake message out of context";
    static struct gw_log_limit accept_failures, handshake_failures;
    const struct timespec accept_pause = {0, 100 * 1000000};
    struct gw_server *s = cls;
    char message[512];
    uint64_t more;

    if (strncmp(fmt, refused, sizeof refused - 1) == 0) {
        gw_mhd_count_refusal(s);
    } else if (strncmp(fmt, accept_failed, sizeof accept_failed - 1) == 0) {
        gw_metrics_count_accept_error(s->metrics);
        if (gw_log_limit_pass(&accept_failures, limiter_now_ns(), 1000000000, &more)) {
            format_mhd_message(message, sizeof message, fmt, ap);
            gw_warn("http: %s (and %llu more since the last such line; at most one a second)",
                    message, (unsigned long long)more);
        }
    } else if (strncmp(fmt, out_of_resources, sizeof out_of_resources - 1) == 0) {
        /* Follows the line above for EMFILE, ENFILE, ENOMEM and ENOBUFS: only a connection
         * closing helps, so wait for one instead of spinning. (An event loop's daemon stops
         * watching its listening socket by itself until then, and must not sleep.) */
        if (s->fixed.mode == CONFIG_MODE_THREAD_PER_CONNECTION)
            nanosleep(&accept_pause, NULL);
    } else if (strncmp(fmt, handshake_failed, sizeof handshake_failed - 1) == 0) {
        /* Any client can cause one (plain HTTP to the TLS port, TLS 1.1, no common cipher). */
        if (gw_log_limit_pass(&handshake_failures, limiter_now_ns(), 1000000000, &more))
            gw_warn("tls: a handshake failed (plain HTTP, an old TLS version, no cipher in "
                    "common, or an unknown CA): connection closed (and %llu more since the last "
                    "such line; at most one a second)",
                    (unsigned long long)more);
    } else {
        log_mhd_message(fmt, ap);
    }
}

struct MHD_Daemon *gw_mhd_start_daemon(int fd, unsigned flags, MHD_AccessHandlerCallback handler,
                                       void *handler_cls, struct gw_server *s,
                                       const struct MHD_OptionItem *options, char err[GW_ERR_LEN])
{
    struct MHD_Daemon *d;

    if (fd < 0)
        d = MHD_start_daemon(flags | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, handler, handler_cls,
                             MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_ARRAY, options,
                             MHD_OPTION_END);
    else
        d = MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls, MHD_OPTION_EXTERNAL_LOGGER,
                             on_mhd_log, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                             MHD_OPTION_ARRAY, options, MHD_OPTION_END);
    if (d == NULL)
        snprintf(err, GW_ERR_LEN, "cannot start the HTTP daemon (out of memory or threads)");
    return d;
}

const char *gw_server_library_version(void)
{
    return MHD_get_version();
}
