// `ocular serve`: parsing and validating an OpenAI Chat Completions request (untrusted input),
// and the OpenAI error JSON. No HTTP and no model here, so the parser can be unit-tested and
// fuzzed on its own (fuzz/chat_request_fuzz.cc). Conventions: docs/server.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ocular/engine.h"

namespace ocular::server {

// Limits on one request (docs/server.md §Limits). The body size is enforced by the HTTP layer.
struct RequestLimits {
  int max_images = 4;                   // images in one request, all messages together
  size_t max_image_bytes = 20u << 20;   // one encoded image (OpenAI: 20 MB)
  int max_completion_tokens = 2048;     // max_tokens above this: 400
  int default_max_tokens = 256;         // when the request names none
  size_t max_prompt_bytes = 64u << 10;  // the text of the prompt (before tokenizing)
  int max_messages = 256;
  int max_stop = 4;  // OpenAI: up to 4 stop strings
  size_t max_stop_bytes = 256;
  int max_json_depth = 32;  // nesting of the request body
};

// An OpenAI error ({"error": {"message", "type", "param", "code"}}) and its HTTP status.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the field at fault ("messages[0].content[1].image_url.url"); "" = null
  std::string code;   // a string code ("invalid_image", "too_many_images"); "" = null
};

// {"error": {...}} as sent to clients.
std::string ErrorJson(const ApiError& error);

// A validated request, ready for Engine::Generate.
struct ChatRequest {
  std::string model;               // as sent ("" if absent)
  std::string prompt;              // the text of the last user message (parts joined by "\n")
  std::vector<ImageInput> images;  // every image_url of the user messages, in order
  // Every message, parts in order (image_url parts as image parts; "developer" as "system"):
  // what a model with a chat template formats (Engine::GenerateChat).
  std::vector<ChatMessage> messages;
  GenerateOptions options;  // max_tokens, temperature, top_p, seed, stop
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct ParseResult {
  bool ok() const { return error.message.empty(); }
  ApiError error;       // set when !ok()
  ChatRequest request;  // set when ok()
};

// Parses and validates a /v1/chat/completions body. `local_files_root`: the realpath of the
// folder `file://` URLs may name ("": file:// refused). Never throws; every failure is an
// ApiError (400, or 413 for an image over max_image_bytes... see docs/server.md) whose message
// names the field. Reads files only under local_files_root.
ParseResult ParseChatRequest(std::string_view body, const RequestLimits& limits,
                             const std::string& local_files_root);

// Strict RFC 4648 base64 (standard alphabet, '=' padding optional, no whitespace). False on
// any other character or a bad length.
bool DecodeBase64(std::string_view in, std::vector<uint8_t>* out);

// The credentials of an `Authorization: Bearer TOKEN` header: the scheme is case-insensitive
// (RFC 9110 §11.1: "bearer" is "Bearer"), spaces around the token are dropped. "" when the
// header is not a Bearer one.
std::string_view BearerToken(std::string_view authorization);

// Constant-time (in the length of `expected`) comparison of a presented secret.
bool SecretEquals(std::string_view presented, std::string_view expected);

// The image formats the engine decodes, recognized from their first bytes.
bool LooksLikeImage(const std::vector<uint8_t>& bytes);

}  // namespace ocular::server
