#include "models/chat.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/file_io.h"
#include "text/jinja/template.h"

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

nlohmann::ordered_json ChatMessagesJson(const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::ordered_json content;
    if (m.content.size() == 1 && !m.content[0].is_image) {
      content = m.content[0].text;
    } else {
      content = nlohmann::ordered_json::array();
      for (const ChatPart& part : m.content) {
        if (part.is_image) {
          content.push_back({{"type", "image"}});
        } else {
          content.push_back({{"type", "text"}, {"text", part.text}});
        }
      }
    }
    out.push_back({{"role", m.role}, {"content", std::move(content)}});
  }
  return out;
}

namespace {

// tokenizer_config.json's and special_tokens_map.json's special tokens, as
// PreTrainedTokenizerBase.special_tokens_map lists them (set ones only; an AddedToken object
// counts as its content).
Status ReadSpecialTokens(const FileSet& files, nlohmann::ordered_json* special) {
  static const char* const kNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
  for (const char* file : {"tokenizer_config.json", "special_tokens_map.json"}) {
    if (!files.Has(file)) continue;
    OCULAR_ASSIGN_OR_RETURN(std::string text, files.Read(file, kMaxTokenizerFileBytes, "chat"));
    OCULAR_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, files.Where(file), "chat"));
    if (!j.is_object()) continue;
    auto token = [](const nlohmann::json& v) -> std::string {
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) {
        return v["content"].get<std::string>();
      }
      return "";
    };
    for (const char* name : kNames) {
      if (special->contains(name) || !j.contains(name)) continue;
      const std::string t = token(j[name]);
      if (!t.empty()) (*special)[name] = t;
    }
    if (!special->contains("additional_special_tokens") &&
        j.contains("additional_special_tokens") && j["additional_special_tokens"].is_array()) {
      nlohmann::ordered_json extra = nlohmann::ordered_json::array();
      for (const auto& v : j["additional_special_tokens"]) {
        if (!token(v).empty()) extra.push_back(token(v));
      }
      if (!extra.empty()) (*special)["additional_special_tokens"] = std::move(extra);
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::Load(const FileSet& files) {
  ChatTemplate t;
  OCULAR_ASSIGN_OR_RETURN(t.source_, ReadChatTemplate(files));
  t.where_ = files.origin();
  OCULAR_RETURN_IF_ERROR(ReadSpecialTokens(files, &t.special_));
  if (t.special_.contains("bos_token")) t.bos_token_ = t.special_["bos_token"].get<std::string>();
  if (t.has_template()) {
    t.parsed_ = std::make_shared<const StatusOr<jinja::Template>>(
        jinja::Template::Parse(t.source_, t.where_ + " chat_template"));
  }
  return t;
}

StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                           const PromptOptions& options, std::time_t now) const {
  std::shared_ptr<const StatusOr<jinja::Template>> parsed = parsed_;
  if (!options.chat_template.empty()) {
    parsed = std::make_shared<const StatusOr<jinja::Template>>(
        jinja::Template::Parse(options.chat_template, "--chat-template"));
  } else if (!has_template()) {
    return Error(StatusCode::kUnimplemented, "chat", where_,
                 " has no chat_template (chat_template.jinja, chat_template.json or "
                 "tokenizer_config.json); write the turns in the prompt yourself or pass one "
                 "with --chat-template FILE");
  }
  if (!parsed->ok()) return parsed->status();
  if (messages.empty()) {
    return Error(StatusCode::kInvalidArgument, "chat", "the conversation has no message");
  }
  nlohmann::ordered_json context = special_;
  if (!options.chat_template_kwargs.empty()) {
    const auto kwargs = nlohmann::ordered_json::parse(options.chat_template_kwargs, nullptr, false);
    if (kwargs.is_discarded() || !kwargs.is_object()) {
      return Error(StatusCode::kInvalidArgument, "chat",
                   "chat_template_kwargs must be a JSON object, got ",
                   options.chat_template_kwargs.substr(0, 40));
    }
    for (const auto& [k, v] : kwargs.items()) context[k] = v;
  }
  if (!options.date.empty()) context["date_string"] = options.date;
  context["messages"] = ChatMessagesJson(messages);
  context["tools"] = nullptr;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = options.add_generation_prompt;
  return (*parsed)->Render(context, now);
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
