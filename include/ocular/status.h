// Status and StatusOr: how ocular reports recoverable errors (bad files, bad
// requests, unsupported models). No exceptions cross the library boundary.
//
// Messages carry a component tag and concrete facts, e.g.
//   [safetensors] model.safetensors: tensor 'x' has offsets past end of file (1024 > 512)
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace ocular {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // malformed input: request, prompt, option
  kNotFound,           // missing file, tensor, key
  kDataLoss,           // corrupt or truncated file content
  kUnimplemented,      // valid but unsupported (architecture, dtype, codec)
  kResourceExhausted,  // over a configured limit (pixels, context length, memory)
  kIoError,            // the OS refused (open, read, mmap)
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<CodeName>: <message>", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Concatenates any streamable values: StrCat("[io] ", path, ": ", n, " bytes").
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Builds a Status whose message starts with "[tag] ".
template <typename... Args>
Status Error(StatusCode code, std::string_view tag, const Args&... args) {
  return Status(code, StrCat("[", tag, "] ", args...));
}

// Holds either a value or a non-OK Status.
// REQUIRES: value() is only called when ok().
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "StatusOr built from OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    CheckOk();
    return *value_;
  }
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void CheckOk() const {
    if (!status_.ok()) {
      std::fprintf(stderr, "StatusOr::value() on error: %s\n", status_.ToString().c_str());
      std::abort();
    }
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace ocular

#define OCULAR_CONCAT_INNER_(a, b) a##b
#define OCULAR_CONCAT_(a, b) OCULAR_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define OCULAR_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::ocular::Status ocular_status_ = (expr);        \
    if (!ocular_status_.ok()) return ocular_status_; \
  } while (0)

// `lhs = value of expr` (a StatusOr), or returns its error.
#define OCULAR_ASSIGN_OR_RETURN(lhs, expr) \
  OCULAR_ASSIGN_OR_RETURN_IMPL_(OCULAR_CONCAT_(ocular_statusor_, __LINE__), lhs, expr)
#define OCULAR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
