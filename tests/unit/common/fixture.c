/* The common unit tests' shared fixtures (see fixture.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

char *test_temp_file(const char *data, size_t len)
{
	char *path = strdup("/tmp/troupe-test-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	while (len > 0) {
		ssize_t w = write(fd, data, len);

		assert_true(w > 0);
		data += w;
		len -= (size_t)w;
	}
	close(fd);
	return path;
}
