/* YAML to cJSON, so that everything troupe reads as YAML (its configuration,
 * cluster snapshots) is walked by the same code as JSON.
 *
 * Plain scalars are typed the way Kubernetes' YAML decoder types them: null,
 * true/false, integers and floats become JSON null, bool and number; anything
 * quoted, block-styled or tagged !!str stays a string. A number keeps its source
 * text in valuestring so that quantities such as 0.1 or 1e3 are read exactly.
 * Aliases are refused (they make small documents expand without bound).
 */
#ifndef TROUPE_COMMON_YAMLJSON_H
#define TROUPE_COMMON_YAMLJSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

enum { YAMLJSON_MAX_DEPTH = 256 };

/* Parse every document of <buf> into a JSON array of documents (empty when the
 * stream is empty). On error returns NULL and writes a message naming the line
 * and column into <err>. The caller owns the result (cJSON_Delete). */
cJSON *yamljson_parse(const char *buf, size_t len, char *err, size_t errlen);

/* True when <buf> looks like JSON (its first non-blank byte is '{' or '['). */
int yamljson_is_json(const char *buf, size_t len);

#endif
