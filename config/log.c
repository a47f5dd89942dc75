/* log: (sluice's own log on stderr) and tracing: (request ids, traces); see sections.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"
#include "config/loader.h"
#include "config/sections.h"

/* tracing.sample: a plain decimal number from 0 to 1 ("0.01", "1", "1e-3"); not "nan", "inf",
 * hex or a percentage, all of which strtod would take or half-take. */
static void parse_trace_sample(struct loader *ld, yaml_node_t *node, void *object)
{
    struct config *config = object;
    const char *text = config_scalar(ld, node, "sample");
    char *end = NULL;
    double sample;

    if (text == NULL)
        return;
    errno = 0;
    sample = strtod(text, &end);
    if (text[0] == '\0' || strspn(text, "0123456789.eE+-") != strlen(text) || *end != '\0' ||
        errno != 0 || !(sample >= 0 && sample <= 1)) {
        config_error(ld, node, "sample: \"%s\" is not a number from 0 to 1 (like 0.01)", text);
        return;
    }
    config->tracing.sample = sample;
}

static const struct field tracing_fields[] = {
    {"sample", CONFIG_CUSTOM, 0, 0, 0, parse_trace_sample},
    {NULL, 0, 0, 0, 0, NULL},
};

void config_parse_tracing(struct loader *ld, yaml_node_t *node, void *object)
{
    config_walk_mapping(ld, node, tracing_fields, object, "tracing");
}

static void parse_log_format(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"text", "json"};
    int choice = config_parse_choice(ld, node, "format", names, 2);

    if (choice >= 0)
        ((struct config *)object)->log.format = (enum config_log_format)choice;
}

static void parse_log_level(struct loader *ld, yaml_node_t *node, void *object)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    int choice = config_parse_choice(ld, node, "level", names, 4);

    if (choice >= 0)
        ((struct config *)object)->log.level = (enum config_log_level)choice;
}

static const struct field log_fields[] = {
    {"format", CONFIG_CUSTOM, 0, 0, 0, parse_log_format},
    {"level", CONFIG_CUSTOM, 0, 0, 0, parse_log_level},
    {NULL, 0, 0, 0, 0, NULL},
};

const struct key_table config_log_keys[] = {
    {"log", log_fields},
    {"tracing", tracing_fields},
    {NULL, NULL},
};

void config_parse_log(struct loader *ld, yaml_node_t *node, void *object)
{
    config_walk_mapping(ld, node, log_fields, object, "log");
}
