/* What the config tests share: a config that must be refused, and why. */
#ifndef SLUICE_TESTS_CONFIG_PROBLEMS_H
#define SLUICE_TESTS_CONFIG_PROBLEMS_H

/* Parsing the whole config `yaml` (as "t.yaml") fails, and its problems hold `want`. */
void expect_config_problem(const char *yaml, const char *want);

#endif
