/* Unit tests of the plan record (record.c), the text every gang member's
 * Binding carries: what is written reads back the same; a plan too long to
 * list keeps its count; a newer version is told apart from text that is not a
 * plan; and hostile text (wrong types, counts that do not match, a pod listed
 * twice, out-of-range numbers, bad device lists) is refused, never half read.
 */
#include "fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static struct gang_record three(struct gang_record_member *mb)
{
	static const char *names[] = { "train-0", "train-1", "train-2" };
	struct gang_record r = { .version = GANG_RECORD_VERSION, .id = "18a-3", .quorum = 3, .n = 3,
				 .members = mb };

	for (unsigned i = 0; i < 3; i++) {
		snprintf(mb[i].uid, sizeof(mb[i].uid), "uid-%u", i);
		snprintf(mb[i].name, sizeof(mb[i].name), "%s", names[i]);
		snprintf(mb[i].node, sizeof(mb[i].node), "gpu-%03u", i);
		mb[i].devices = 0xfULL << (4 * i);
	}
	return r;
}

static void test_record_round_trip(void **state)
{
	struct gang_record_member mb[3];
	struct gang_record r = three(mb), back;
	char err[256];
	char *text;

	(void)state;
	text = gang_record_encode(&r);
	assert_non_null(text);
	assert_non_null(strstr(text, "\"v\":1"));
	assert_non_null(strstr(text, "\"gpus\":\"4,5,6,7\""));
	assert_int_equal(gang_record_decode(text, &back, err, sizeof(err)), 0);
	assert_int_equal(back.version, 1);
	assert_string_equal(back.id, "18a-3");
	assert_int_equal(back.quorum, 3);
	assert_int_equal(back.n, 3);
	assert_non_null(back.members);
	for (unsigned i = 0; i < 3; i++) {
		assert_string_equal(back.members[i].uid, mb[i].uid);
		assert_string_equal(back.members[i].name, mb[i].name);
		assert_string_equal(back.members[i].node, mb[i].node);
		assert_true(back.members[i].devices == mb[i].devices);
	}
	gang_record_fini(&back);
	free(text);
}

/* Past GANG_RECORD_MAX the members are left out: the count stays, so a partly
 * bound gang is still recognised (and can be rolled back). */
static void test_record_too_long_keeps_the_count(void **state)
{
	enum { N = 400 };
	struct gang_record_member *mb = calloc(N, sizeof(*mb));
	struct gang_record r = { .version = 1, .id = "big", .quorum = N, .n = N, .members = mb },
			   back;
	char err[256];
	char *text;

	(void)state;
	assert_non_null(mb);
	for (unsigned i = 0; i < N; i++) {
		snprintf(mb[i].uid, sizeof(mb[i].uid), "0b6f0c3e-1111-4222-8333-%012u", i);
		snprintf(mb[i].name, sizeof(mb[i].name), "a-rather-long-job-name-worker-%u", i);
		snprintf(mb[i].node, sizeof(mb[i].node), "node-pool-h100-%05u", i);
		mb[i].devices = 0xff;
	}
	text = gang_record_encode(&r);
	assert_non_null(text);
	assert_true(strlen(text) < GANG_RECORD_MAX);
	assert_null(strstr(text, "members"));
	assert_int_equal(gang_record_decode(text, &back, err, sizeof(err)), 0);
	assert_int_equal(back.n, N);
	assert_null(back.members);
	gang_record_fini(&back);
	free(text);
	free(mb);
}

static void test_record_newer_version_is_not_read(void **state)
{
	struct gang_record back;
	char err[256];

	(void)state;
	assert_int_equal(gang_record_decode("{\"v\":2,\"id\":\"x\",\"quorum\":1,\"n\":1,"
					    "\"whatever\":[]}", &back, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	assert_non_null(strstr(err, "version 2"));
	assert_null(back.members);
	gang_record_fini(&back);
}

static void test_record_hostile_text_is_refused(void **state)
{
	static const char *bad[] = {
		"",
		"[]",
		"{\"v\":1}",
		"{\"v\":0,\"id\":\"x\",\"quorum\":1,\"n\":1}",
		"{\"v\":\"1\",\"id\":\"x\",\"quorum\":1,\"n\":1}",
		"{\"v\":1.5,\"id\":\"x\",\"quorum\":1,\"n\":1}",
		"{\"v\":1,\"id\":\"\",\"quorum\":1,\"n\":1}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":0,\"n\":1}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1e30}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":-1}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":2,\"members\":"
		"[{\"uid\":\"a\",\"pod\":\"p\",\"node\":\"n\",\"gpus\":\"0\"}]}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1,\"members\":{}}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1,\"members\":[7]}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1,\"members\":"
		"[{\"uid\":\"a\",\"pod\":\"p\",\"node\":\"n\",\"gpus\":\"zero\"}]}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1,\"members\":"
		"[{\"uid\":\"a\",\"pod\":\"p\",\"node\":\"n\",\"gpus\":\"64\"}]}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1,\"members\":"
		"[{\"uid\":\"a\",\"pod\":\"p\",\"gpus\":\"0\"}]}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":2,\"n\":2,\"members\":"
		"[{\"uid\":\"a\",\"pod\":\"p\",\"node\":\"n\",\"gpus\":\"0\"},"
		"{\"uid\":\"a\",\"pod\":\"q\",\"node\":\"m\",\"gpus\":\"1\"}]}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1,\"members\":"
		"[{\"uid\":\"a\",\"pod\":\"p\",\"node\":\"n\",\"gpus\":\"0\"}]",
		/* Not what troupe writes: a name that is not plain ASCII, a NUL
		 * that would cut a name short, a bad escape. */
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1,\"members\":"
		"[{\"uid\":\"a\xc3\xa9\",\"pod\":\"p\",\"node\":\"n\",\"gpus\":\"0\"}]}",
		"{\"v\":1,\"id\":\"x\",\"quorum\":1,\"n\":1,\"members\":"
		"[{\"uid\":\"a\",\"pod\":\"p\",\"node\":\"n\\u0000m\",\"gpus\":\"0\"}]}",
		"{\"v\":1,\"id\":\"x\\u00zz\",\"quorum\":1,\"n\":1}",
		"{\"v\":1,\"id\":\"a b\",\"quorum\":1,\"n\":1}",
	};
	struct gang_record back;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (gang_record_decode(bad[i], &back, err, sizeof(err)) != -EINVAL)
			fail_msg("accepted or misjudged: %s", bad[i]);
		assert_true(err[0] != '\0');
		assert_null(back.members);
		gang_record_fini(&back);
	}
	assert_int_equal(gang_record_decode(NULL, &back, err, sizeof(err)), -EINVAL);
}

/* Every prefix of a valid plan (a truncated annotation) is refused. */
static void test_record_every_truncation_is_refused(void **state)
{
	struct gang_record_member mb[3];
	struct gang_record r = three(mb), back;
	char err[256];
	char *text = gang_record_encode(&r);
	size_t len;

	(void)state;
	assert_non_null(text);
	len = strlen(text);
	for (size_t cut = 0; cut < len; cut++) {
		char *pre = strndup(text, cut);

		assert_non_null(pre);
		if (gang_record_decode(pre, &back, err, sizeof(err)) == 0)
			fail_msg("a plan cut at %zu bytes was read: %s", cut, pre);
		gang_record_fini(&back);
		free(pre);
	}
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_round_trip),
		cmocka_unit_test(test_record_too_long_keeps_the_count),
		cmocka_unit_test(test_record_newer_version_is_not_read),
		cmocka_unit_test(test_record_hostile_text_is_refused),
		cmocka_unit_test(test_record_every_truncation_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
