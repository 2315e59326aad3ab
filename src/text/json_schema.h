// JSON Schema -> grammar (text/grammar.h): the JSON texts a schema accepts, for constrained
// decoding. Supported (about OpenAI's strict-mode subset, docs/structured-output.md):
//   type (one or a list): object, array, string, integer, number, boolean, null
//   object   properties (written in the schema's order), required, additionalProperties
//            (false / true / absent: the declared properties only; a schema with no
//            properties: a map of that schema)
//   array    items, minItems, maxItems
//   string   minLength, maxLength, pattern (text/grammar.h's regex subset, re.search
//            semantics), format: date, time, date-time, uuid, ipv4, email
//   integer  minimum, maximum, exclusiveMinimum, exclusiveMaximum (any integers)
//   number   the same bounds, when they are integers
//   enum, const, anyOf, $ref (local: "#", "#/$defs/...", any "#/..." pointer; recursion
//   through an object or array is fine), $defs / definitions
//   annotations (title, description, default, examples, $schema, $id, $comment, deprecated,
//   readOnly, writeOnly) are ignored.
// Anything else is refused naming the keyword and where it is
// ("[json-schema] unsupported keyword 'oneOf' at /properties/items"), never ignored.
//
// Layout of the JSON text, as llama.cpp's json-schema-to-grammar does (common/
// json-schema-to-grammar.cpp): between tokens, nothing, one space, or a newline and up to 20
// spaces / tabs; numbers have at most 16 digits before the point and 16 after it; so that a
// model cannot run on forever inside a number or a blank.
#pragma once

#include <string_view>

#include "text/grammar.h"

namespace ocular::grammar {

// Errors (kInvalidArgument): not JSON, an unsupported keyword or value, an unresolvable or
// left-recursive $ref, required names that are not properties.
StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_json);

// Any JSON object (OpenAI's response_format {"type": "json_object"}).
Grammar JsonObjectGrammar();

}  // namespace ocular::grammar
