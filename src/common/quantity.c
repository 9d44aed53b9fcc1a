/* The quantity grammar, from apimachinery's resource.Quantity:
 *
 *   quantity ::= sign? number suffix?
 *   number   ::= digits | digits '.' digits? | '.' digits
 *   suffix   ::= binary (Ki Mi Gi Ti Pi Ei) | decimal (n u m k M G T P E)
 *              | exponent ('e' | 'E') sign? digits
 *
 * The number is accumulated as an exact decimal (mantissa and power of ten)
 * and scaled once at the end, so "0.1Gi" and "1e-3" are computed without
 * floating point.
 */
#include "common/quantity.h"

#include <errno.h>
#include <stdbool.h>

/* Multiply a non-negative value, failing on overflow. */
static int mul_checked(int64_t a, int64_t b, int64_t *out)
{
	if (__builtin_mul_overflow(a, b, out))
		return -ERANGE;
	return 0;
}

int quantity_parse_milli(const char *s, size_t len, int64_t *milli)
{
	size_t i = 0;
	bool neg = false, digits = false, dropped = false;
	int64_t mant = 0;
	int exp10 = 3;          /* result is in milli-units */
	int64_t binary = 1;
	int ret = -EINVAL;

	if (len == 0)
		goto out;
	if (s[i] == '+' || s[i] == '-')
		neg = s[i++] == '-';
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		digits = true;
		if (mant > (INT64_MAX - 9) / 10) {
			/* Further integer digits only make it larger. */
			ret = -ERANGE;
			goto out;
		}
		mant = mant * 10 + (s[i] - '0');
	}
	if (i < len && s[i] == '.') {
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
			digits = true;
			/* Digits past what int64 can carry only round; drop them but
			 * remember that something non-zero was there. */
			if (!dropped && mant <= (INT64_MAX - 9) / 10) {
				mant = mant * 10 + (s[i] - '0');
				exp10--;
			} else if (s[i] != '0') {
				dropped = true;
			}
		}
	}
	/* Round up once, at the last digit kept. Adding one per dropped digit,
	 * as this did, passed INT64_MAX after nine of them; once cannot: a kept
	 * digit leaves mant at most INT64_MAX - 8. */
	if (dropped)
		mant++;
	if (!digits)
		goto out;
	if (i < len) {
		const char *suf = s + i;
		size_t n = len - i;

		if (n == 2 && suf[1] == 'i') {
			static const char bin[] = "KMGTPE";
			int k = -1;

			for (int j = 0; bin[j]; j++)
				if (bin[j] == suf[0])
					k = j;
			if (k < 0)
				goto out;
			binary = (int64_t)1 << (10 * (k + 1));
		} else if (n == 1 && suf[0] != 'e') {
			switch (suf[0]) {
			case 'n': exp10 -= 9; break;
			case 'u': exp10 -= 6; break;
			case 'm': exp10 -= 3; break;
			case 'k': exp10 += 3; break;
			case 'M': exp10 += 6; break;
			case 'G': exp10 += 9; break;
			case 'T': exp10 += 12; break;
			case 'P': exp10 += 15; break;
			case 'E': exp10 += 18; break;
			default: goto out;
			}
		} else if (suf[0] == 'e' || suf[0] == 'E') {
			size_t j = 1;
			bool eneg = false;
			int e = 0;

			if (j < n && (suf[j] == '+' || suf[j] == '-'))
				eneg = suf[j++] == '-';
			if (j == n)
				goto out;
			for (; j < n; j++) {
				if (suf[j] < '0' || suf[j] > '9' || e > 100)
					goto out;
				e = e * 10 + (suf[j] - '0');
			}
			exp10 += eneg ? -e : e;
		} else {
			goto out;
		}
	}
	if (mul_checked(mant, binary, &mant) < 0) {
		ret = -ERANGE;
		goto out;
	}
	for (; exp10 > 0; exp10--) {
		if (mant != 0 && mul_checked(mant, 10, &mant) < 0) {
			ret = -ERANGE;
			goto out;
		}
	}
	for (; exp10 < 0 && mant != 0; exp10++) {
		/* Round up, as Kubernetes does when it cannot represent a value. */
		mant = mant / 10 + (mant % 10 != 0);
	}
	*milli = neg ? -mant : mant;
	ret = 0;
out:
	return ret;
}

int quantity_parse_count(const char *s, size_t len, int64_t *count)
{
	int64_t milli;
	int ret = quantity_parse_milli(s, len, &milli);

	if (ret < 0)
		return ret;
	if (milli < 0 || milli % 1000 != 0)
		return -EINVAL;
	*count = milli / 1000;
	return 0;
}
