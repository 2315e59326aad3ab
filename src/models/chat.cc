#include "models/chat.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/file_io.h"

namespace ocular {

ChatMessage UserTurn(std::string_view text, int n_images, std::string_view marker) {
  ChatMessage m{"user", {}};
  auto add_text = [&m](std::string_view t) {
    if (!t.empty()) m.content.push_back({false, std::string(t)});
  };
  if (marker.empty() || text.find(marker) == std::string_view::npos) {
    for (int i = 0; i < n_images; ++i) m.content.push_back({true, ""});
    add_text(text);
    return m;
  }
  size_t from = 0;
  for (size_t at; (at = text.find(marker, from)) != std::string_view::npos;
       from = at + marker.size()) {
    add_text(text.substr(from, at - from));
    m.content.push_back({true, ""});
  }
  add_text(text.substr(from));
  return m;
}

StatusOr<std::string> ReadChatTemplate(const FileSet& files) {
  if (files.Has("chat_template.jinja")) {
    return files.Read("chat_template.jinja", kMaxConfigFileBytes, "chat");
  }
  for (const char* name : {"chat_template.json", "tokenizer_config.json"}) {
    if (!files.Has(name)) continue;
    OCULAR_ASSIGN_OR_RETURN(std::string text, files.Read(name, kMaxTokenizerFileBytes, "chat"));
    OCULAR_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, files.Where(name), "chat"));
    auto it = j.is_object() ? j.find("chat_template") : j.end();
    if (it == j.end() || it->is_null()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_array()) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
      for (const auto& entry : *it) {
        if (entry.is_object() && entry.value("name", "") == "default" &&
            entry.contains("template") && entry["template"].is_string()) {
          return entry["template"].get<std::string>();
        }
      }
    }
    return Error(StatusCode::kDataLoss, "chat", files.Where(name),
                 ": chat_template must be a string or a list with a \"default\" entry");
  }
  return std::string();
}

uint64_t ChatTemplateFingerprint(std::string_view text) {
  std::string normal;
  normal.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    normal += text[i];
  }
  const size_t begin = normal.find_first_not_of(" \t\r\n");
  const size_t end = normal.find_last_not_of(" \t\r\n");
  uint64_t h = 0xcbf29ce484222325ull;
  if (begin == std::string::npos) return h;
  for (size_t i = begin; i <= end; ++i) {
    h ^= static_cast<unsigned char>(normal[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

StatusOr<ChatTemplateInfo> IdentifyChatTemplate(const FileSet& files,
                                                const std::vector<uint64_t>& known) {
  ChatTemplateInfo info;
  OCULAR_ASSIGN_OR_RETURN(std::string text, ReadChatTemplate(files));
  info.where = files.origin();
  if (text.empty()) return info;
  info.bytes = text.size();
  info.fingerprint = ChatTemplateFingerprint(text);
  bool found = false;
  for (uint64_t k : known) found = found || k == info.fingerprint;
  info.kind = found ? ChatTemplateInfo::Kind::kKnown : ChatTemplateInfo::Kind::kUnknown;
  return info;
}

std::string ChatFormatName(const ChatTemplateInfo& info, std::string_view name) {
  switch (info.kind) {
    case ChatTemplateInfo::Kind::kKnown:
      return std::string(name);
    case ChatTemplateInfo::Kind::kUnknown:
      return "unrecognized";
    case ChatTemplateInfo::Kind::kNone:
      break;
  }
  return "";
}

Status CheckChatTemplate(const ChatTemplateInfo& info, std::string_view family_templates) {
  switch (info.kind) {
    case ChatTemplateInfo::Kind::kKnown:
      return Status::Ok();
    case ChatTemplateInfo::Kind::kNone:
      return Error(StatusCode::kUnimplemented, "chat", info.where,
                   " has no chat_template (chat_template.jinja, chat_template.json or "
                   "tokenizer_config.json); write the turns in the prompt yourself");
    case ChatTemplateInfo::Kind::kUnknown:
      break;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(info.fingerprint));
  return Error(StatusCode::kUnimplemented, "chat", info.where, ": its chat_template (", info.bytes,
               " bytes, fingerprint ", hex,
               ") is not one ocular knows; ocular formats chats natively and applies only ",
               family_templates, " (docs/models.md); write the turns in the prompt yourself");
}

namespace {
// The code point at text[i] (UTF-8) and its length; invalid bytes count as themselves.
std::pair<uint32_t, size_t> CodePointAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return {c, 1};
  if ((c >> 5) == 6 && i + 1 < s.size()) return {((c & 0x1fu) << 6) | (b(i + 1) & 0x3fu), 2};
  if ((c >> 4) == 14 && i + 2 < s.size()) {
    return {((c & 0x0fu) << 12) | ((b(i + 1) & 0x3fu) << 6) | (b(i + 2) & 0x3fu), 3};
  }
  return {0xfffd, 1};
}

bool PySpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}
}  // namespace

std::string_view PyStrip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    auto [c, n] = CodePointAt(text, begin);
    if (!PySpace(c)) break;
    begin += n;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = end - 1;  // back to the first byte of the last code point
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) --start;
    auto [c, n] = CodePointAt(text, start);
    if (start + n != end || !PySpace(c)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

StatusOr<std::string> SystemText(const ChatMessage& message) {
  std::string text;
  for (size_t i = 0; i < message.content.size(); ++i) {
    if (message.content[i].is_image) {
      return Error(StatusCode::kInvalidArgument, "chat", "a ", message.role,
                   " message cannot hold an image");
    }
    text += (i ? "\n" : "") + message.content[i].text;
  }
  return text;
}

Status CheckChatMessages(const std::vector<ChatMessage>& messages, int n_images) {
  int parts = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return Error(StatusCode::kInvalidArgument, "chat", "message ", i, ": role \"", m.role,
                   "\" (system, user or assistant)");
    }
    for (const ChatPart& part : m.content) {
      if (part.is_image && m.role != "user") {
        return Error(StatusCode::kInvalidArgument, "chat", "message ", i,
                     ": images go in user messages, not in a ", m.role, " message");
      }
      parts += part.is_image;
    }
  }
  if (parts != n_images) {
    return Error(StatusCode::kInvalidArgument, "chat", "the messages have ", parts,
                 " image parts but ", n_images, " images were given");
  }
  return Status::Ok();
}

std::string TodayDate() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%d %b %Y", &local);
  return buf;
}

}  // namespace ocular
