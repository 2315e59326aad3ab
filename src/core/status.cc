#include "ocular/status.h"

#include "core/enum_names.h"

namespace ocular {

const char* StatusCodeName(StatusCode code) {
  static constexpr EnumName<StatusCode> kNames[] = {
      {StatusCode::kOk, "OK"},
      {StatusCode::kInvalidArgument, "InvalidArgument"},
      {StatusCode::kNotFound, "NotFound"},
      {StatusCode::kDataLoss, "DataLoss"},
      {StatusCode::kUnimplemented, "Unimplemented"},
      {StatusCode::kResourceExhausted, "ResourceExhausted"},
      {StatusCode::kIoError, "IoError"},
      {StatusCode::kInternal, "Internal"}};
  return NameOf(code, kNames, "Unknown");
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace ocular
