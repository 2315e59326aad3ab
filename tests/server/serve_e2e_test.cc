// End to end, as a user runs it: `ocular serve` on the shipped demo model, on a free loopback
// port; a non-streaming and a streaming request with a base64 image must answer exactly what
// `ocular run` answers for the same image and prompt, with the boxes in the extra field.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace ocular::server {
namespace {

using nlohmann::json;
using testing::ChatBody;
using testing::DataUrl;
using testing::ReadFile;

constexpr char kModel[] = "models/shapes-paligemma";
constexpr char kImage[] = "models/shapes-paligemma/sample.png";

// Runs a command and returns its stdout.
std::string Capture(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> extra_args, const std::string& model = kModel) {
    log_ = ::testing::TempDir() + "/serve_e2e_" + std::to_string(::getpid()) + ".log";
    std::vector<std::string> args = {OCULAR_BIN, "serve", "-m",        model,
                                     "--port",   "0",     "--threads", "1"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    // The port is printed once bound; /health turns 200 once the model is loaded.
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::smatch m;
      const std::string log = ReadFile(log_);
      if (std::regex_search(log, m, listening))
        port_ = std::stoi(m[1]);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (int i = 0; i < 600 && port_ != 0; ++i) {
      httplib::Client c("127.0.0.1", port_);
      if (auto r = c.Get("/health"); r && r->status == 200) {
        ready_ = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    std::remove(log_.c_str());
  }
  // SIGTERM, then the exit status (the server must stop cleanly).
  int Stop() {
    int status = 0;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  bool ready() const { return ready_; }
  std::string log() const { return ReadFile(log_); }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool ready_ = false;
  std::string log_;
};

// The answer `ocular run` prints for the same input (greedy).
std::string RunAnswer(const std::string& prompt, int max_tokens) {
  std::string out =
      Capture(std::string(OCULAR_BIN) + " run -q --threads 1 -m " + kModel + " -i " + kImage +
              " -p '" + prompt + "' --max-tokens " + std::to_string(max_tokens));
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// The "data: " payloads of a server-sent-events body, in order.
void SseEvents(const std::string& body, std::vector<std::string>* events) {
  for (size_t pos = 0; pos < body.size();) {
    const size_t end = body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos) << body;
    const std::string ev = body.substr(pos, end - pos);
    ASSERT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    events->push_back(ev.substr(6));
    pos = end + 2;
  }
}

// What a chat completion's stream adds up to: its content deltas, the finish_reason and the
// "ocular" extras of the chunk that has one, the usage chunk's usage.
struct StreamedAnswer {
  std::string text;
  std::string finish;
  json usage;
  json last_extra;
};

// The chunks (every event but the final [DONE]) collected; each is a chat.completion.chunk of
// the same id.
StreamedAnswer Collect(const std::vector<std::string>& events) {
  StreamedAnswer a;
  std::string id;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    if (id.empty()) id = c["id"];
    EXPECT_EQ(c["id"], id);
    if (c["choices"].empty()) {
      a.usage = c["usage"];
      continue;
    }
    const json& ch = c["choices"][0];
    if (ch["delta"].contains("content")) a.text += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) {
      a.finish = ch["finish_reason"];
      a.last_extra = ch["ocular"];
    }
  }
  return a;
}

TEST(ServeE2E, AnswersEqualOcularRun) {
  ServeProcess serve({"--api-key", "sk-e2e"});
  ASSERT_TRUE(serve.ready()) << serve.log();
  const httplib::Headers auth = {{"Authorization", "Bearer sk-e2e"}};
  const std::string url = DataUrl(ReadFile(kImage));
  const std::string expected = RunAnswer("detect star", 40);
  ASSERT_FALSE(expected.empty());

  // Non-streaming.
  auto r = serve.Client().Post(
      "/v1/chat/completions", auth,
      ChatBody("detect star", url, R"(,"model":"shapes-paligemma","max_tokens":40)"),
      "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], expected);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  const json& boxes = j["choices"][0]["message"]["ocular"]["detections"];
  ASSERT_TRUE(boxes.is_array()) << r->body;
  ASSERT_FALSE(boxes.empty());
  EXPECT_EQ(boxes[0]["label"], "star");
  const int completion = j["usage"]["completion_tokens"].get<int>();

  // Streaming: role chunk, content chunks that add up to the same answer, a final chunk with
  // finish_reason and the boxes, the usage chunk (choices: []), then [DONE].
  auto s = serve.Client().Post(
      "/v1/chat/completions", auth,
      ChatBody("detect star", url,
               R"(,"max_tokens":40,"stream":true,"stream_options":{"include_usage":true})"),
      "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200) << s->body;
  EXPECT_EQ(s->get_header_value("Content-Type"), "text/event-stream");
  std::vector<std::string> events;
  ASSERT_NO_FATAL_FAILURE(SseEvents(s->body, &events));
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  const StreamedAnswer streamed = Collect(events);
  EXPECT_EQ(streamed.text, expected);
  EXPECT_EQ(streamed.finish, "stop");
  EXPECT_EQ(streamed.last_extra["detections"], boxes);
  EXPECT_EQ(streamed.usage["completion_tokens"].get<int>(), completion);

  // A client that disconnects mid-stream does not stop the server from serving.
  {
    httplib::Client c = serve.Client();
    c.set_read_timeout(0, 200000);
    (void)c.Post("/v1/chat/completions", auth,
                 ChatBody("caption en", url, R"(,"max_tokens":200,"stream":true)"),
                 "application/json");
  }
  auto again =
      serve.Client().Post("/v1/chat/completions", auth,
                          ChatBody("detect star", url, R"(,"max_tokens":40)"), "application/json");
  ASSERT_TRUE(again);
  EXPECT_EQ(json::parse(again->body)["choices"][0]["message"]["content"], expected);
  auto metrics = serve.Client().Get("/metrics", auth);
  ASSERT_TRUE(metrics);
  const std::string& m = metrics->body;
  EXPECT_NE(m.find("ocular_completion_tokens_total"), std::string::npos);
  // The Engine's counters: batch sizes, the image-feature cache (the same image four times:
  // encoded once; the disconnected stream's image too), KV memory back to zero.
  EXPECT_NE(m.find("ocular_decode_batch_size_bucket{le=\"1\"}"), std::string::npos) << m;
  EXPECT_NE(m.find("\nocular_images_encoded_total 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\nocular_image_cache_hits_total 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\nocular_image_cache_misses_total 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\nocular_kv_cache_bytes_in_use 0\n"), std::string::npos) << m;
  // The web page needs no key (it asks for it), and says what it may load.
  auto page = serve.Client().Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  EXPECT_NE(page->body.find("/v1/chat/completions"), std::string::npos);
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

// A Qwen2-VL chat with an image in the OpenAI form (image part first, then the text) answers
// what `ocular run --chat` answers with the same image and text: the checkpoint's template
// (tests/e2e/cli_test.sh checks that run against transformers' ids and tokens; the prompt's
// 68 tokens are those of testdata/golden/qwen2vl/chat.safetensors).
TEST(ServeE2E, QwenChatWithAnImageEqualsOcularRunChat) {
  const std::string model = "testdata/tiny/qwen2vl";
  const std::string image = "testdata/golden/inputs/photo.png";
  ServeProcess serve({}, model);
  ASSERT_TRUE(serve.ready()) << serve.log();
  std::string expected =
      Capture(std::string(OCULAR_BIN) + " run -q --threads 1 --chat -m " + model + " -i " + image +
              " -p 'describe this picture' --max-tokens 12 --json </dev/null");
  const json run = json::parse(expected, nullptr, false);
  ASSERT_FALSE(run.is_discarded()) << expected;
  const std::string body = R"({"messages":[{"role":"user","content":[)"
                           R"({"type":"image_url","image_url":{"url":")" +
                           DataUrl(ReadFile(image)) +
                           R"("}},{"type":"text","text":"describe this picture"}]}],)"
                           R"("max_tokens":12,"temperature":0})";
  auto r = serve.Client().Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error()) << "\n" << serve.log();
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], run["answer"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 68);
  EXPECT_EQ(run["prompt_ids"].size(), 68u);
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

TEST(ServeE2E, LocalFilesAndBindErrors) {
  ServeProcess serve({"--allow-local-files", "models/shapes-paligemma"});
  ASSERT_TRUE(serve.ready()) << serve.log();
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  auto r = serve.Client().Post(
      "/v1/chat/completions",
      ChatBody("detect star", std::string("file://") + cwd + "/" + kImage, R"(,"max_tokens":40)"),
      "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], RunAnswer("detect star", 40));
  auto out = serve.Client().Post(
      "/v1/chat/completions",
      ChatBody("x", std::string("file://") + cwd + "/models/shapes-paligemma/../../README.md"),
      "application/json");
  ASSERT_TRUE(out);
  EXPECT_EQ(out->status, 400);
  // Without --api-key, requests need no key.
  EXPECT_EQ(serve.Client().Get("/v1/models")->status, 200);
  EXPECT_EQ(serve.Stop(), 0);
  // A port in use is an error with exit code 3, not a crash.
  const std::string busy = Capture(std::string(OCULAR_BIN) + " serve -m " + kModel +
                                   " --host 256.0.0.1 --port 1 2>&1; echo rc=$?");
  EXPECT_NE(busy.find("rc=3"), std::string::npos) << busy;
}

}  // namespace
}  // namespace ocular::server
