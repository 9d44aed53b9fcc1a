/* What the common unit tests share: a deterministic generator for the fuzz
 * cases, a one-document YAML parse and temporary files. fixture.c is linked
 * into every test binary of tests/unit/common/ (and of tests/unit/cache/).
 */
#ifndef TROUPE_TESTS_UNIT_COMMON_FIXTURE_H
#define TROUPE_TESTS_UNIT_COMMON_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* A small deterministic generator (xorshift64*), so fuzz cases reproduce. */
uint64_t rng_next(uint64_t *s);

/* Parse <yaml>, expect success and one document; return the document (the
 * caller deletes *docs). */
cJSON *yaml_one(const char *yaml, cJSON **docs);

/* Write <len> bytes to a new temporary file and return its path (caller
 * unlinks and frees it). The tests of the modules above link this too. */
char *test_temp_file(const char *data, size_t len);

#endif
