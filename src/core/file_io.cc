#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ocular {
namespace {

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes a descriptor on every return path.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

StatusOr<std::string> ReadFileBounded(const std::string& path, int64_t max_bytes,
                                      std::string_view component) {
  // O_NONBLOCK: opening a FIFO read-only would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    return Error(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError, component, path,
                 ": cannot open: ", std::strerror(err));
  }
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return Error(StatusCode::kIoError, component, path, ": cannot stat: ", std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return Error(StatusCode::kIoError, component, path, ": is ", FileKind(st.st_mode),
                 ", expected a regular file");
  }
  if (st.st_size > max_bytes) {
    return Error(StatusCode::kResourceExhausted, component, path, ": ", st.st_size,
                 " bytes, over the limit of ", max_bytes, " bytes for this file");
  }
  // Regular files never return EAGAIN, so the non-blocking flag does not affect the reads.
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t filled = 0;
  for (;;) {
    if (filled == data.size()) {
      // The file may have grown since fstat: read on, one chunk at a time, up to the limit.
      if (static_cast<int64_t>(data.size()) > max_bytes) break;
      data.resize(std::min<size_t>(data.size() + 65536, static_cast<size_t>(max_bytes) + 1));
    }
    const ssize_t n = ::read(fd, data.data() + filled, data.size() - filled);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error(StatusCode::kIoError, component, path, ": read failed: ", std::strerror(errno));
    }
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  if (static_cast<int64_t>(filled) > max_bytes) {
    return Error(StatusCode::kResourceExhausted, component, path, ": over the limit of ", max_bytes,
                 " bytes for this file");
  }
  data.resize(filled);
  return data;
}

std::string TextPosition(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return StrCat("line ", line, ", column ", offset - line_start + 1);
}

std::string ShortJson(const nlohmann::json& value, size_t max_chars) {
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
  return s;
}

StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& source,
                                   std::string_view component, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return Error(StatusCode::kDataLoss, component, source, ": JSON nested deeper than ",
                     max_depth, " levels at ", TextPosition(text, i));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    std::string reason = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    if (const size_t colon = reason.find(": "); colon != std::string::npos) {
      reason = reason.substr(colon + 2);
    }
    // nlohmann quotes the whole token read so far ("last read: '...'"), which can be as long
    // as the file (a string never closed): keep its last 40 bytes (found by config_json_fuzz:
    // an 864-byte config.json gave a 1,200-byte message).
    constexpr std::string_view kLastRead = "last read: '";
    if (const size_t a = reason.find(kLastRead); a != std::string::npos) {
      const size_t begin = a + kLastRead.size();
      // nlohmann's own "; expected <token kind>" is short; a longer tail is the token's text
      // (config_json_fuzz wrote "'; expected " inside a string that is never closed).
      size_t end = reason.rfind("'; expected ");
      if (end == std::string::npos || end < begin || reason.size() - end > 64) {
        end = reason.size() - 1;
      }
      if (end > begin && end - begin > 40) reason.replace(begin, end - begin - 40, "...");
    }
    return Error(StatusCode::kDataLoss, component, source, ": invalid JSON at ",
                 TextPosition(text, offset), ": ", reason);
  } catch (const nlohmann::json::exception& e) {
    return Error(StatusCode::kDataLoss, component, source, ": invalid JSON: ", e.what());
  }
}

}  // namespace ocular
