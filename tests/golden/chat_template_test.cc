// Chat templates: the checkpoints' templates rendered by ocular's Jinja renderer (Gemma 3,
// Llama 3.2 Vision, Qwen2-VL / Qwen2.5-VL, Qwen3-VL) against transformers' apply_chat_template,
// text and ids, case by case (testdata/chat/goldens.json, tools/reference/make_chat_goldens.py);
// how templates are found; what is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_set.h"
#include "models/chat.h"
#include "models/registry.h"

namespace ocular {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

const Processor& ProcessorOf(const std::string& checkpoint) {
  static std::map<std::string, LoadedModel> loaded;
  auto it = loaded.find(checkpoint);
  if (it == loaded.end()) {
    auto m = LoadModel("testdata/tiny/" + checkpoint);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    it = loaded.emplace(checkpoint, std::move(*m)).first;
  }
  return *it->second.processor;
}

std::vector<ChatMessage> Messages(const nlohmann::json& j, int* n_images) {
  std::vector<ChatMessage> out;
  *n_images = 0;
  for (const auto& m : j) {
    ChatMessage msg{m["role"].get<std::string>(), {}};
    for (const auto& part : m["content"]) {
      const bool image = part["type"] == "image";
      msg.content.push_back({image, image ? "" : part["text"].get<std::string>()});
      *n_images += image;
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// Every case of the corpus: the same text, the same ids, or the same refusal.
TEST(ChatTemplate, EqualsTransformersOnTheCorpus) {
  const auto goldens = nlohmann::json::parse(ReadText("testdata/chat/goldens.json"));
  int checked = 0, refusals = 0;
  for (const auto& c : goldens["cases"]) {
    const std::string name =
        c["checkpoint"].get<std::string>() + "/" + c["case"].get<std::string>();
    SCOPED_TRACE(name);
    const Processor& proc = ProcessorOf(c["checkpoint"]);
    int n_images = 0;
    const auto messages = Messages(c["messages"], &n_images);
    PromptOptions o;
    o.add_generation_prompt = c["add_generation_prompt"];
    o.date = c["date"];
    auto text = proc.RenderChat(messages, o);
    if (c.contains("error")) {
      ASSERT_FALSE(text.ok());
      EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
      // The template's own reason, word for word.
      std::string reason = c["error"];
      if (reason.back() == '.') reason.pop_back();
      EXPECT_NE(text.status().message().find(reason), std::string::npos)
          << text.status().ToString();
      ++refusals;
      continue;
    }
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, c["text"].get<std::string>());
    auto prompt = proc.BuildChatPrompt(n_images, messages, o);
    ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
    EXPECT_EQ(prompt->ids, c["ids"].get<std::vector<int32_t>>());
    ++checked;
  }
  EXPECT_GE(checked, 113);
  EXPECT_GE(refusals, 5);
}

TEST(ChatTemplate, TheTinyCheckpointsCarryTheOfficialTemplates) {
  const std::string gemma = ReadText("testdata/chat/gemma3-it.jinja");
  const std::string llama = ReadText("testdata/chat/llama-3.2-vision-instruct.jinja");
  for (const char* d : {"gemma3", "gemma3-text"}) {
    EXPECT_EQ(ReadText(std::string("testdata/tiny/") + d + "/chat_template.jinja"), gemma) << d;
    EXPECT_EQ(ProcessorOf(d).chat_format(), "jinja") << d;
  }
  for (const char* d : {"mllama", "mllama-1x", "mllama-bf16"}) {
    EXPECT_EQ(ReadText(std::string("testdata/tiny/") + d + "/chat_template.jinja"), llama) << d;
  }
  EXPECT_EQ(ProcessorOf("mllama").chat_format(), "jinja");
  const std::string qwen2 = ReadText("testdata/chat/qwen2-vl-instruct.jinja");
  const std::string qwen3 = ReadText("testdata/chat/qwen3-vl-instruct.jinja");
  for (const char* d : {"qwen2vl", "qwen2vl-bf16", "qwen25vl", "qwen25vl-bf16"}) {
    EXPECT_EQ(ReadText(std::string("testdata/tiny/") + d + "/chat_template.jinja"), qwen2) << d;
  }
  for (const char* d : {"qwen3vl", "qwen3vl-bf16", "qwen3vl-b"}) {
    EXPECT_EQ(ReadText(std::string("testdata/tiny/") + d + "/chat_template.jinja"), qwen3) << d;
  }
  for (const char* d : {"qwen2vl", "qwen25vl", "qwen3vl"}) {
    EXPECT_EQ(ProcessorOf(d).chat_format(), "jinja") << d;
    EXPECT_EQ(ProcessorOf(d).image_marker(), "<|vision_start|><|image_pad|><|vision_end|>") << d;
  }
  EXPECT_EQ(ProcessorOf("pg1").chat_format(), "");
  EXPECT_EQ(ProcessorOf("gemma3").image_marker(), "<start_of_image>");
  EXPECT_EQ(ProcessorOf("gemma3-text").image_marker(), "");
  EXPECT_EQ(ProcessorOf("mllama").image_marker(), "<|image|>");
}

// A copy of testdata/tiny/gemma3-text whose template files are replaced.
class TemplateDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ocular_chat_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy("testdata/tiny/gemma3-text", dir_);
    fs::remove(dir_ / "chat_template.jinja");
  }
  void TearDown() override { fs::remove_all(dir_); }
  StatusOr<std::string> Render() {
    auto m = LoadModel(dir_.string());
    if (!m.ok()) return m.status();
    return m->processor->RenderChat({ChatMessage::Text("user", "hi")}, {});
  }
  fs::path dir_;
};

TEST_F(TemplateDir, NoTemplateIsRefused) {
  auto r = Render();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("has no chat_template"), std::string::npos);
}

TEST_F(TemplateDir, AnEditedTemplateIsRendered) {
  // Any template renders, not only the released ones: another generation prompt, and the
  // Llama template in a Gemma checkpoint (its bos_token and eos_token are Gemma's).
  std::string t = ReadText("testdata/chat/gemma3-it.jinja");
  const std::string gen = "<start_of_turn>model";
  t.replace(t.rfind(gen), gen.size(), "<start_of_turn>bot");
  WriteText(dir_ / "chat_template.jinja", t);
  auto r = Render();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>bot\n");
  WriteText(dir_ / "chat_template.jinja",
            ReadText("testdata/chat/llama-3.2-vision-instruct.jinja"));
  r = Render();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->starts_with("<bos><|start_header_id|>system<|end_header_id|>")) << *r;
}

TEST_F(TemplateDir, AConstructOcularLacksIsRefusedWithItsLine) {
  WriteText(dir_ / "chat_template.jinja", "{{ bos_token }}\n{% include 'turns.jinja' %}");
  auto r = Render();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("chat_template:2: unsupported construct: {% include %}"),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(TemplateDir, FoundInTokenizerConfigWithWindowsLineEnds) {
  // tokenizer_config.json's chat_template (also what a llama.cpp GGUF's tokenizer.chat_template
  // becomes), with CRLF line ends and a trailing newline: the same template.
  std::string t = ReadText("testdata/chat/gemma3-it.jinja");
  std::string crlf;
  for (char ch : t) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
  auto tc = nlohmann::json::parse(ReadText((dir_ / "tokenizer_config.json").string()));
  tc["chat_template"] = crlf + "\n";
  WriteText(dir_ / "tokenizer_config.json", tc.dump());
  auto r = Render();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
  // chat_template.json comes before tokenizer_config.json, as in transformers.
  WriteText(dir_ / "chat_template.json",
            R"({"chat_template": "{{ bos_token }}[{{ eos_token }}]"})");
  EXPECT_EQ(Render().value(), "<bos>[<eos>]");
}

// transformers passes strftime_now: today's date, "%d %b %Y".
TEST(ChatTemplate, LlamaDateDefaultsToToday) {
  const Processor& proc = ProcessorOf("mllama");
  const std::string before = TodayDate();
  auto text = proc.RenderChat({ChatMessage::Text("user", "hi")}, {});
  const std::string after = TodayDate();
  ASSERT_TRUE(text.ok());
  const bool today = text->find("Today Date: " + before + "\n") != std::string::npos ||
                     text->find("Today Date: " + after + "\n") != std::string::npos;
  EXPECT_TRUE(today) << *text;
  ASSERT_EQ(before.size(), 11u);  // "01 Dec 2026"
  PromptOptions o;
  o.date = "26 Jul 2024";
  EXPECT_NE(
      proc.RenderChat({ChatMessage::Text("user", "hi")}, o)->find("Today Date: 26 Jul 2024\n"),
      std::string::npos);
}

TEST(ChatTemplate, UserTurnSplitsAtMarkers) {
  auto kinds = [](const ChatMessage& m) {
    std::string s;
    for (const auto& p : m.content) s += p.is_image ? "[img]" : "(" + p.text + ")";
    return s;
  };
  EXPECT_EQ(kinds(UserTurn("What differs?", 2, "<|image|>")), "[img][img](What differs?)");
  EXPECT_EQ(kinds(UserTurn("<|image|><|image|>What differs?", 2, "<|image|>")),
            "[img][img](What differs?)");
  EXPECT_EQ(kinds(UserTurn("a <|image|> b <|image|>", 2, "<|image|>")), "(a )[img]( b )[img]");
  EXPECT_EQ(kinds(UserTurn("hello", 0, "")), "(hello)");
  EXPECT_EQ(kinds(UserTurn("", 1, "<start_of_image>")), "[img]");
  EXPECT_EQ(UserTurn("x", 0, "").role, "user");
}

TEST(ChatTemplate, MessagesAreChecked) {
  EXPECT_TRUE(CheckChatMessages({UserTurn("x", 1, "")}, 1).ok());
  EXPECT_EQ(CheckChatMessages({UserTurn("x", 1, "")}, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckChatMessages({ChatMessage::Text("tool", "x")}, 0).code(),
            StatusCode::kInvalidArgument);
  ChatMessage a{"assistant", {{true, ""}}};
  EXPECT_EQ(CheckChatMessages({a}, 1).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ocular
