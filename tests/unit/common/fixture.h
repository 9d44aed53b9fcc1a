/* What the common unit tests share: a deterministic generator for the fuzz
 * cases and a one-document YAML parse. fixture.c is linked into every test
 * binary of tests/unit/common/.
 */
#ifndef TROUPE_TESTS_UNIT_COMMON_FIXTURE_H
#define TROUPE_TESTS_UNIT_COMMON_FIXTURE_H

#include <stdint.h>

#include <cjson/cJSON.h>

/* A small deterministic generator (xorshift64*), so fuzz cases reproduce. */
uint64_t rng_next(uint64_t *s);

/* Parse <yaml>, expect success and one document; return the document (the
 * caller deletes *docs). */
cJSON *yaml_one(const char *yaml, cJSON **docs);

#endif
