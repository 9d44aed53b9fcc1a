/* The common unit tests' shared fixtures (see fixture.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "common/yamljson.h"

#include "fixture.h"

uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

cJSON *yaml_one(const char *yaml, cJSON **docs)
{
	char err[256];

	*docs = yamljson_parse(yaml, strlen(yaml), err, sizeof(err));
	if (!*docs)
		fail_msg("yamljson_parse failed: %s\n--- input ---\n%s", err, yaml);
	assert_int_equal(cJSON_GetArraySize(*docs), 1);
	return cJSON_GetArrayItem(*docs, 0);
}
