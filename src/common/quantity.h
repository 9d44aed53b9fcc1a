/* Kubernetes resource quantities ("8", "500m", "4Gi", "1e3", "1.5k").
 *
 * Values are returned in milli-units as int64, which holds every quantity a
 * node or pod can sensibly carry (up to about 9.2e15 whole units). Anything
 * that does not fit, or is not the Kubernetes quantity grammar, is an error.
 */
#ifndef TROUPE_COMMON_QUANTITY_H
#define TROUPE_COMMON_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

/* Parse <s> (length <len>) into milli-units, rounding fractions of a milli-unit
 * up as Kubernetes does. Returns 0, -EINVAL for bad syntax or -ERANGE. */
int quantity_parse_milli(const char *s, size_t len, int64_t *milli);

/* Parse a whole, non-negative count (such as a GPU count). "2000m" is 2; "1.5"
 * or "-1" is -EINVAL. */
int quantity_parse_count(const char *s, size_t len, int64_t *count);

#endif
