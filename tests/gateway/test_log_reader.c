/* gateway/ops/log_reader.c: lines handed out whole across refills of the window, the bound to
 * the byte, a long line dropped with what follows it kept, the end told from a failed read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/ops/log_reader.h"
#include "tests/unit.h"

/* A reader of `len` bytes of `content`, through a file removed once open. */
static struct gw_log_reader *reader_of(const char *content, size_t len)
{
    char path[] = "/tmp/sluice-log-reader-XXXXXX", err[GW_LOG_READER_ERR_LEN];
    int fd = mkstemp(path);
    struct gw_log_reader *r;

    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(write(fd, content, len) == (ssize_t)len);
    close(fd);
    r = gw_log_reader_open(path, err);
    unlink(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    return r;
}

/* The next of `r`: what it is, and a line's bytes in `*text` and `*len`. */
static enum gw_log_read next_line(struct gw_log_reader *r, const char **text, size_t *len)
{
    char err[GW_LOG_READER_ERR_LEN];

    *text = NULL;
    *len = 0;
    return gw_log_reader_next(r, text, len, err);
}

static enum gw_log_read next(struct gw_log_reader *r)
{
    const char *text;
    size_t len;

    return next_line(r, &text, &len);
}

/* The next of `r` is the line `want`. */
static void expect_line(struct gw_log_reader *r, const char *want)
{
    const char *text;
    size_t len;

    CU_ASSERT_EQUAL_FATAL(next_line(r, &text, &len), GW_LOG_READ_LINE);
    CU_ASSERT_TRUE(len == strlen(want) && memcmp(text, want, len) == 0);
}

/* The next of `r` is a line of `want` bytes, each `c`. */
static void expect_run(struct gw_log_reader *r, size_t want, char c)
{
    const char *text;
    size_t len, same = 0;

    CU_ASSERT_EQUAL_FATAL(next_line(r, &text, &len), GW_LOG_READ_LINE);
    while (same < len && text[same] == c)
        same++;
    CU_ASSERT_TRUE(len == want && same == len);
}

static void test_lines(void)
{
    static const char content[] = "a\nbb\n\nccc";
    struct gw_log_reader *r = reader_of(content, sizeof content - 1);

    expect_line(r, "a");
    expect_line(r, "bb");
    expect_line(r, "");
    expect_line(r, "ccc"); /* the last, without a newline */
    CU_ASSERT_EQUAL(next(r), GW_LOG_READ_END);
    CU_ASSERT_EQUAL(next(r), GW_LOG_READ_END);
    gw_log_reader_close(r);

    r = reader_of("", 0);
    CU_ASSERT_EQUAL(next(r), GW_LOG_READ_END);
    gw_log_reader_close(r);
}

/* Lines of every length from 0 to 700, a few MiB in all: each comes back whole and in order,
 * wherever a refill of the window cut it. */
static void test_lines_across_refills(void)
{
    size_t cap = 8u << 20, len = 0, n = 0, read = 0, wrong = 0;
    char *content = malloc(cap);
    struct gw_log_reader *r;

    CU_ASSERT_PTR_NOT_NULL_FATAL(content);
    for (; len + 702 < cap; n++) {
        for (size_t i = 0; i < n % 701; i++)
            content[len + i] = (char)('a' + (n + i) % 26);
        content[len + n % 701] = '\n';
        len += n % 701 + 1;
    }
    r = reader_of(content, len);
    for (; read < n; read++) {
        const char *text;
        size_t line_len, j = 0;

        if (next_line(r, &text, &line_len) != GW_LOG_READ_LINE)
            break;
        while (j < line_len && text[j] == (char)('a' + (read + j) % 26))
            j++;
        wrong += line_len != read % 701 || j != line_len;
    }
    CU_ASSERT_EQUAL(read, n);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(next(r), GW_LOG_READ_END);
    gw_log_reader_close(r);
    free(content);
}

/* A line of GW_LOG_READ_LINE_MAX bytes is read; one byte more is too long, and dropped to its
 * newline, the lines after it read; so at the end of the input, without a newline. */
static void test_the_bound(void)
{
    size_t max = GW_LOG_READ_LINE_MAX, cap = 4 * max + 64;
    char *content = malloc(cap);
    struct gw_log_reader *r;
    size_t len;

    CU_ASSERT_PTR_NOT_NULL_FATAL(content);
    memset(content, 'x', max);
    len = max;
    len += (size_t)snprintf(content + len, cap - len, "\nnext\n");
    memset(content + len, 'y', max + 1);
    len += max + 1;
    len += (size_t)snprintf(content + len, cap - len, "\nafter\n");
    memset(content + len, 'z', 2 * max); /* the last line, too long, without a newline */
    len += 2 * max;
    r = reader_of(content, len);
    expect_run(r, max, 'x');
    expect_line(r, "next");
    CU_ASSERT_EQUAL(next(r), GW_LOG_READ_TOO_LONG);
    expect_line(r, "after");
    CU_ASSERT_EQUAL(next(r), GW_LOG_READ_TOO_LONG);
    CU_ASSERT_EQUAL(next(r), GW_LOG_READ_END);
    gw_log_reader_close(r);

    /* The last line at the bound, without a newline, is a line. */
    r = reader_of(content, max);
    expect_run(r, max, 'x');
    CU_ASSERT_EQUAL(next(r), GW_LOG_READ_END);
    gw_log_reader_close(r);
    free(content);
}

/* A failed read is an error with its reason, never the end; a file that is not there cannot
 * be opened. */
static void test_errors(void)
{
    char err[GW_LOG_READER_ERR_LEN] = "";
    struct gw_log_reader *r = gw_log_reader_open("/tmp", err);
    const char *text;
    size_t len;

    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(gw_log_reader_next(r, &text, &len, err), GW_LOG_READ_ERROR);
    CU_ASSERT_STRING_EQUAL(err, "Is a directory");
    gw_log_reader_close(r);
    CU_ASSERT_PTR_NULL(gw_log_reader_open("/nonexistent/sluice.log", err));
    CU_ASSERT_STRING_EQUAL(err, "No such file or directory");
}

void register_log_reader_tests(void)
{
    CU_pSuite s = add_suite("gateway_log_reader");

    add_test(s, "lines, the last without a newline, an empty input", test_lines);
    add_test(s, "lines of every length across refills of the window", test_lines_across_refills);
    add_test(s, "the bound: a line at it read, longer ones dropped to their newline",
             test_the_bound);
    add_test(s, "a failed read is an error, never the end", test_errors);
}
