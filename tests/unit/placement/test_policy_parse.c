/* Unit tests for placement/policy_parse.c: the topology policy a pod asks for
 * in its troupe.io/topology annotation, and the error a person reads when the
 * annotation is none of the accepted forms.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "fixture.h"

struct policy_case {
	const char *annotation;         /* NULL: the pod has none */
	int ret;
	enum placement_policy_kind kind;
	uint8_t min_level;
};

static const struct policy_case policy_cases[] = {
	{ NULL, 0, PLACEMENT_POLICY_PREFERRED, 0 },
	{ "", 0, PLACEMENT_POLICY_PREFERRED, 0 },
	{ "preferred", 0, PLACEMENT_POLICY_PREFERRED, 0 },
	{ "none", 0, PLACEMENT_POLICY_NONE, 0 },
	{ "required", 0, PLACEMENT_POLICY_REQUIRED, 0 },
	{ "required:PIX", 0, PLACEMENT_POLICY_REQUIRED_LEVEL, L_PIX },
	{ "required:SYS", 0, PLACEMENT_POLICY_REQUIRED_LEVEL, L_SYS },
	{ "required:NV12", 0, PLACEMENT_POLICY_REQUIRED_LEVEL, L_NV(12) },
	/* Levels in any case, as a person types them. */
	{ "required:pix", 0, PLACEMENT_POLICY_REQUIRED_LEVEL, L_PIX },
	{ "required:nv4", 0, PLACEMENT_POLICY_REQUIRED_LEVEL, L_NV(4) },
	{ "required:SOC", 0, PLACEMENT_POLICY_REQUIRED_LEVEL, L_SYS },
	/* The policy words themselves are exact. */
	{ "Required", -EINVAL, 0, 0 },
	{ "PREFERRED", -EINVAL, 0, 0 },
	{ " required", -EINVAL, 0, 0 },
	{ "required ", -EINVAL, 0, 0 },
	{ "required:", -EINVAL, 0, 0 },
	{ "required:X", -EINVAL, 0, 0 },        /* "self" is no level to ask for */
	{ "required:NV39", -EINVAL, 0, 0 },
	{ "required:NVLink", -EINVAL, 0, 0 },
	{ "required=PIX", -EINVAL, 0, 0 },
	{ "best", -EINVAL, 0, 0 },
};

static void test_placement_policy_parse_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(policy_cases) / sizeof(policy_cases[0]); i++) {
		const struct policy_case *c = &policy_cases[i];
		struct placement_policy p;
		char err[256] = "";
		int ret;

		memset(&p, 0x5A, sizeof(p));
		ret = placement_policy_parse(c->annotation, &p, err, sizeof(err));
		if (ret != c->ret)
			fail_msg("\"%s\": ret %d, want %d (%s)",
				 c->annotation ? c->annotation : "(null)", ret, c->ret, err);
		if (ret == 0 && (p.kind != c->kind || p.min_level != c->min_level))
			fail_msg("\"%s\": kind %d level %u, want %d level %u",
				 c->annotation ? c->annotation : "(null)", p.kind, p.min_level,
				 c->kind, c->min_level);
		if (ret == 0)
			assert_string_equal(err, "");
	}
}

/* The refusal names the annotation, what it said and every accepted form,
 * and is cut, never overrun, in a short buffer. */
static void test_placement_policy_parse_error_names_the_forms(void **state)
{
	struct placement_policy p;
	char err[256], small[16];

	(void)state;
	assert_int_equal(placement_policy_parse("required:fast", &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "annotation troupe.io/topology=\"required:fast\""));
	assert_non_null(strstr(err, "preferred"));
	assert_non_null(strstr(err, "required:<LEVEL>"));
	assert_non_null(strstr(err, "none"));
	memset(small, 'x', sizeof(small));
	assert_int_equal(placement_policy_parse("best", &p, small, sizeof(small)), -EINVAL);
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_policy_parse_table),
		cmocka_unit_test(test_placement_policy_parse_error_names_the_forms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
