// The /v1/chat/completions parser: what it accepts, and for what it refuses, the status, the
// field named and the code.
#include "request.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "origin.h"
#include "test_util.h"

namespace ocular::server {
namespace {

using testing::ChatBody;
using testing::DataUrl;
using testing::ReadFile;

const std::string kPng = ReadFile("testdata/golden/inputs/photo.png");

ParseResult Parse(const std::string& body, const std::string& root = "") {
  return ParseChatRequest(body, RequestLimits{}, root);
}

void ExpectError(const std::string& body, const std::string& param, const std::string& code = "",
                 const std::string& root = "") {
  SCOPED_TRACE(body.substr(0, 200));
  ParseResult r = Parse(body, root);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.http_status, 400);
  EXPECT_EQ(r.error.param, param) << r.error.message;
  if (!code.empty()) {
    EXPECT_EQ(r.error.code, code) << r.error.message;
  }
  if (!param.empty()) {
    EXPECT_NE(r.error.message.find(param), std::string::npos) << r.error.message;
  }
}

TEST(ChatRequest, TextAndImage) {
  ASSERT_FALSE(kPng.empty());
  ParseResult r = Parse(ChatBody("detect star", DataUrl(kPng),
                                 R"(,"model":"m","max_tokens":7,"temperature":0.5,"top_p":0.9,)"
                                 R"("seed":42,"stop":["x","y"],"stream":true,)"
                                 R"("stream_options":{"include_usage":true})"));
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.request.model, "m");
  EXPECT_EQ(r.request.prompt, "detect star");
  ASSERT_EQ(r.request.images.size(), 1u);
  EXPECT_TRUE(r.request.images[0].from_bytes);
  EXPECT_EQ(std::string(r.request.images[0].bytes.begin(), r.request.images[0].bytes.end()), kPng);
  EXPECT_EQ(r.request.options.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.request.options.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.request.options.top_p, 0.9f);
  EXPECT_EQ(r.request.options.seed, 42u);
  EXPECT_EQ(r.request.options.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.request.stream);
  EXPECT_TRUE(r.request.include_usage);
}

TEST(ChatRequest, DefaultsAndStringContent) {
  ParseResult r = Parse(R"({"messages":[{"role":"system","content":"be brief"},)"
                        R"({"role":"user","content":"caption en"}],"stop":"\n"})");
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.request.prompt, "caption en");
  EXPECT_TRUE(r.request.images.empty());
  EXPECT_EQ(r.request.options.max_tokens, RequestLimits{}.default_max_tokens);
  EXPECT_EQ(r.request.options.temperature, 0.0f);
  EXPECT_FALSE(r.request.stream);
  EXPECT_EQ(r.request.options.stop, std::vector<std::string>{"\n"});
}

// ocular's pan_and_scan extension: unset (the checkpoint decides), true, false; null = unset.
TEST(ChatRequest, PanAndScan) {
  EXPECT_FALSE(Parse(ChatBody("x", "", "")).request.options.pan_and_scan.has_value());
  EXPECT_FALSE(Parse(ChatBody("x", "", R"(,"pan_and_scan":null)")).request.options.pan_and_scan);
  EXPECT_EQ(Parse(ChatBody("x", "", R"(,"pan_and_scan":true)")).request.options.pan_and_scan,
            std::optional<bool>(true));
  EXPECT_EQ(Parse(ChatBody("x", "", R"(,"pan_and_scan":false)")).request.options.pan_and_scan,
            std::optional<bool>(false));
  ExpectError(ChatBody("x", "", R"(,"pan_and_scan":1)"), "pan_and_scan");
}

// vLLM's and llama-server's chat_template_kwargs: the template's extra variables.
TEST(ChatRequest, ChatTemplateKwargs) {
  EXPECT_EQ(Parse(ChatBody("x", "", "")).request.options.chat_template_kwargs, "");
  EXPECT_EQ(Parse(ChatBody("x", "", R"(,"chat_template_kwargs":{"enable_thinking":false})"))
                .request.options.chat_template_kwargs,
            R"({"enable_thinking":false})");
  ExpectError(ChatBody("x", "", R"(,"chat_template_kwargs":"x")"), "chat_template_kwargs");
}

// vLLM's mm_processor_kwargs: Qwen2VLImageProcessor's min_pixels / max_pixels for this request.
TEST(ChatRequest, MmProcessorKwargs) {
  EXPECT_TRUE(Parse(ChatBody("x", "", "")).request.options.image_resize.empty());
  const ImageResize r =
      Parse(ChatBody("x", "", R"(,"mm_processor_kwargs":{"min_pixels":3136,"max_pixels":50176})"))
          .request.options.image_resize;
  EXPECT_EQ(r.min_pixels, 3136);
  EXPECT_EQ(r.max_pixels, 50176);
  EXPECT_EQ(Parse(ChatBody("x", "", R"(,"mm_processor_kwargs":{"max_pixels":784})"))
                .request.options.image_resize.min_pixels,
            0);
  EXPECT_TRUE(Parse(ChatBody("x", "", R"(,"mm_processor_kwargs":null)"))
                  .request.options.image_resize.empty());
  ExpectError(ChatBody("x", "", R"(,"mm_processor_kwargs":[])"), "mm_processor_kwargs");
  ExpectError(ChatBody("x", "", R"(,"mm_processor_kwargs":{"fps":1})"), "mm_processor_kwargs");
  ExpectError(ChatBody("x", "", R"(,"mm_processor_kwargs":{"max_pixels":-1})"), "max_pixels");
}

TEST(ChatRequest, LastUserMessageIsThePromptImagesFromAllTurns) {
  const std::string url = DataUrl(kPng);
  ParseResult r = Parse(
      R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":")" + url +
      R"("}},{"type":"text","text":"caption en"}]},{"role":"assistant","content":"a cat"},)"
      R"({"role":"user","content":[{"type":"text","text":"detect"},{"type":"text","text":"cat"}]}],)"
      R"("max_completion_tokens":3})");
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.request.prompt, "detect\ncat");
  EXPECT_EQ(r.request.images.size(), 1u);
  EXPECT_EQ(r.request.options.max_tokens, 3);
}

// Every message is kept, parts in order, for models with a chat template.
TEST(ChatRequest, KeepsEveryMessageForChatTemplates) {
  const std::string url = DataUrl(kPng);
  ParseResult r = Parse(R"({"messages":[{"role":"developer","content":"be brief"},)"
                        R"({"role":"user","content":[{"type":"text","text":"look"},)"
                        R"({"type":"image_url","image_url":{"url":")" +
                        url +
                        R"("}},{"type":"text","text":"here"}]},)"
                        R"({"role":"assistant","content":"ok"},)"
                        R"({"role":"user","content":[{"type":"image_url","image_url":{"url":")" +
                        url + R"("}}]}]})");
  ASSERT_TRUE(r.ok()) << r.error.message;  // an image-only last turn is a prompt too
  const auto& m = r.request.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, "system");
  ASSERT_EQ(m[0].content.size(), 1u);
  EXPECT_EQ(m[0].content[0].text, "be brief");
  ASSERT_EQ(m[1].content.size(), 3u);
  EXPECT_EQ(m[1].content[0].text, "look");
  EXPECT_TRUE(m[1].content[1].is_image);
  EXPECT_EQ(m[1].content[2].text, "here");
  EXPECT_EQ(m[2].role, "assistant");
  ASSERT_EQ(m[3].content.size(), 1u);
  EXPECT_TRUE(m[3].content[0].is_image);
  EXPECT_EQ(r.request.images.size(), 2u);
  EXPECT_EQ(r.request.prompt, "");
}

TEST(ChatRequest, RefusesWithTheFieldAtFault) {
  ExpectError("", "", "invalid_json");
  ExpectError("{", "", "invalid_json");
  ExpectError("[]", "");
  ExpectError(std::string(100, '[') + std::string(100, ']'), "");
  ExpectError("{}", "messages");
  ExpectError(R"({"messages":{}})", "messages");
  ExpectError(R"({"messages":[]})", "messages");
  ExpectError(R"({"messages":[1]})", "messages[0]");
  ExpectError(R"({"messages":[{"content":"x"}]})", "messages[0].role");
  ExpectError(R"({"messages":[{"role":"tool","content":"x"}]})", "messages[0].role");
  ExpectError(R"({"messages":[{"role":"user"}]})", "messages[0].content");
  ExpectError(R"({"messages":[{"role":"user","content":5}]})", "messages[0].content");
  ExpectError(R"({"messages":[{"role":"user","content":""}]})", "messages[0].content");
  ExpectError(R"({"messages":[{"role":"system","content":"x"}]})", "messages");
  ExpectError(R"({"messages":[{"role":"user","content":[{"type":"audio"}]}]})",
              "messages[0].content[0].type");
  ExpectError(R"({"messages":[{"role":"user","content":[{"type":"text","text":1}]}]})",
              "messages[0].content[0].text");
  ExpectError(ChatBody("x", "", R"(,"model":7)"), "model");
  ExpectError(ChatBody("x", "", R"(,"max_tokens":0)"), "max_tokens");
  ExpectError(ChatBody("x", "", R"(,"max_tokens":-5)"), "max_tokens");
  ExpectError(ChatBody("x", "", R"(,"max_tokens":1e12)"), "max_tokens");
  ExpectError(ChatBody("x", "", R"(,"max_tokens":2.5)"), "max_tokens");
  ExpectError(ChatBody("x", "", R"(,"max_tokens":"8")"), "max_tokens");
  ExpectError(ChatBody("x", "", R"(,"max_completion_tokens":99999999)"), "max_completion_tokens");
  ExpectError(ChatBody("x", "", R"(,"temperature":-1)"), "temperature");
  ExpectError(ChatBody("x", "", R"(,"temperature":"hot")"), "temperature");
  ExpectError(ChatBody("x", "", R"(,"top_p":1.5)"), "top_p");
  ExpectError(ChatBody("x", "", R"(,"seed":"x")"), "seed");
  ExpectError(ChatBody("x", "", R"(,"n":2)"), "n");
  ExpectError(ChatBody("x", "", R"(,"stop":5)"), "stop");
  ExpectError(ChatBody("x", "", R"(,"stop":["a",1])"), "stop[1]");
  ExpectError(ChatBody("x", "", R"(,"stop":["a","b","c","d","e"])"), "stop");
  ExpectError(ChatBody("x", "", R"(,"stream":"yes")"), "stream");
  ExpectError(ChatBody("x", "", R"(,"stream_options":{"include_usage":1})"),
              "stream_options.include_usage");
  ExpectError(ChatBody("x", "", R"(,"tools":[{"type":"function"}])"), "tools",
              "unsupported_parameter");
  ExpectError(ChatBody("x", "", R"(,"logprobs":true)"), "logprobs");
}

TEST(ChatRequest, NanAndInfinityAreNotJson) {
  ExpectError(ChatBody("x", "", R"(,"temperature":NaN)"), "", "invalid_json");
  ExpectError(ChatBody("x", "", R"(,"temperature":Infinity)"), "", "invalid_json");
}

TEST(ChatRequest, ImageUrls) {
  const std::string p = "messages[0].content[1].image_url.url";
  ExpectError(ChatBody("x", "https://example.com/cat.png"), p, "remote_url_refused");
  ExpectError(ChatBody("x", "http://169.254.169.254/latest"), p, "remote_url_refused");
  ExpectError(ChatBody("x", "ftp://x/y.png"), p, "invalid_image_url");
  ExpectError(ChatBody("x", "data:image/png;base64"), p, "invalid_image_url");
  ExpectError(ChatBody("x", "data:image/png,abc"), p, "invalid_image_url");
  ExpectError(ChatBody("x", "data:text/plain;base64,aGVsbG8="), p, "invalid_image_url");
  ExpectError(ChatBody("x", "data:image/png;base64,@@@@"), p, "invalid_image_url");
  ExpectError(ChatBody("x", "data:image/png;base64,"), p, "invalid_image_url");
  ExpectError(ChatBody("x", "data:image/png;base64,aGVsbG8gd29ybGQ="), p, "invalid_image");
  ExpectError(ChatBody("x", "file:///etc/passwd"), p, "local_files_disabled");
  ExpectError(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
              "messages[0].content[0].image_url");
  ExpectError(
      R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":5}}]}]})",
      "messages[0].content[0].image_url.url");
  ExpectError(
      R"({"messages":[{"role":"assistant","content":[{"type":"image_url","image_url":"x"}]},)"
      R"({"role":"user","content":"x"}]})",
      "messages[0].content[0]");
  RequestLimits small;
  small.max_image_bytes = 100;
  ParseResult big = ParseChatRequest(ChatBody("x", DataUrl(kPng)), small, "");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error.code, "image_too_large");
  std::string five;
  const std::string url = DataUrl(kPng);
  for (int i = 0; i < 5; ++i) {
    five += R"(,{"type":"image_url","image_url":{"url":")" + url + R"("}})";
  }
  ParseResult many =
      Parse(R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"})" + five + "]}]}");
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error.code, "too_many_images");
}

TEST(ChatRequest, LocalFilesStayInsideTheRoot) {
  const std::string root = std::filesystem::canonical("testdata/golden/inputs").string();
  const std::string inside = root + "/photo.png";
  ParseResult ok = Parse(ChatBody("x", "file://" + inside), root);
  ASSERT_TRUE(ok.ok()) << ok.error.message;
  EXPECT_EQ(ok.request.images[0].bytes.size(), kPng.size());
  const std::string p = "messages[0].content[1].image_url.url";
  ExpectError(ChatBody("x", "file://" + root + "/../../../README.md"), p, "invalid_image_url",
              root);
  ExpectError(ChatBody("x", "file:///etc/passwd"), p, "invalid_image_url", root);
  ExpectError(ChatBody("x", "file://" + root + "/missing.png"), p, "invalid_image_url", root);
  ExpectError(ChatBody("x", "file://" + root), p, "invalid_image_url", root);
  ExpectError(ChatBody("x", "file://relative.png"), p, "invalid_image_url", root);
  // A sibling folder whose name starts with the root's is outside it.
  ExpectError(ChatBody("x", "file://" + root + "x/photo.png"), p, "invalid_image_url", root);
  // A link inside the root pointing out of it is resolved and refused.
  const std::string tmp = ::testing::TempDir() + "/serve_root";
  std::filesystem::create_directories(tmp);
  std::filesystem::remove(tmp + "/link.png");
  std::filesystem::create_symlink(std::filesystem::canonical("README.md"), tmp + "/link.png");
  const std::string troot = std::filesystem::canonical(tmp).string();
  ExpectError(ChatBody("x", "file://" + troot + "/link.png"), p, "invalid_image_url", troot);
}

TEST(ChatRequest, Base64) {
  std::vector<uint8_t> out;
  ASSERT_TRUE(DecodeBase64("aGVsbG8=", &out));
  EXPECT_EQ(std::string(out.begin(), out.end()), "hello");
  ASSERT_TRUE(DecodeBase64("aGVsbG8", &out));
  EXPECT_EQ(std::string(out.begin(), out.end()), "hello");
  EXPECT_FALSE(DecodeBase64("aGVs bG8=", &out));
  EXPECT_FALSE(DecodeBase64("a", &out));
  EXPECT_FALSE(DecodeBase64("aGVsbG8-", &out));
  EXPECT_EQ(testing::Base64("hello"), "aGVsbG8=");
}

TEST(ChatRequest, SecretEquals) {
  EXPECT_TRUE(SecretEquals("sk-123", "sk-123"));
  EXPECT_FALSE(SecretEquals("sk-124", "sk-123"));
  EXPECT_FALSE(SecretEquals("sk-12", "sk-123"));
  EXPECT_FALSE(SecretEquals("sk-1234", "sk-123"));
  EXPECT_FALSE(SecretEquals("", "sk-123"));
  EXPECT_FALSE(SecretEquals("", ""));  // an empty key never authenticates
}

TEST(ChatRequest, BearerToken) {
  EXPECT_EQ(BearerToken("Bearer sk-1"), "sk-1");
  EXPECT_EQ(BearerToken("bearer sk-1"), "sk-1");
  EXPECT_EQ(BearerToken("BEARER   sk-1  "), "sk-1");
  EXPECT_EQ(BearerToken("Bearer "), "");
  EXPECT_EQ(BearerToken("Bearersk-1"), "");
  EXPECT_EQ(BearerToken("Basic c2stMQ=="), "");
  EXPECT_EQ(BearerToken(""), "");
}

TEST(ChatRequest, ErrorJsonShape) {
  const ApiError e{400, "bad \"x\"", "invalid_request_error", "top_p", ""};
  EXPECT_EQ(
      ErrorJson(e),
      R"({"error":{"code":"invalid_request","message":"bad \"x\"","param":"top_p","type":"invalid_request_error"}})");
  // Every status gets a string code, never null (clients switch on it).
  for (int status : {400, 401, 403, 404, 405, 408, 413, 415, 429, 500, 503, 504}) {
    const ApiError s{status, "m", "t", "", ""};
    EXPECT_EQ(ErrorJson(s).find("\"code\":null"), std::string::npos) << status;
  }
}

TEST(ChatRequest, ModelMustNotBeEmpty) {
  ExpectError(ChatBody("x", "", R"(,"model":"")"), "model", "invalid_value");
  EXPECT_TRUE(Parse(ChatBody("x", "", R"(,"model":null)")).ok());
}

TEST(ChatRequest, LineWrappedBase64AndSchemeCase) {
  // MIME-style base64 (76 columns, CRLF) decodes to the same bytes.
  std::string b64 = DataUrl(kPng).substr(std::string("data:image/png;base64,").size());
  std::string wrapped;
  for (size_t i = 0; i < b64.size(); i += 76) wrapped += b64.substr(i, 76) + "\\r\\n";
  ParseResult r = Parse(ChatBody("x", "DATA:Image/PNG;BASE64," + wrapped));
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(std::string(r.request.images[0].bytes.begin(), r.request.images[0].bytes.end()), kPng);
  const std::string p = "messages[0].content[1].image_url.url";
  ExpectError(ChatBody("x", "HTTP://example.com/cat.png"), p, "remote_url_refused");
  ExpectError(ChatBody("x", "Https://example.com/cat.png"), p, "remote_url_refused");
  ExpectError(ChatBody("x", "FILE:///etc/passwd"), p, "local_files_disabled");
}

TEST(ChatRequest, LocalFileUrlsArePercentDecoded) {
  const std::string tmp = ::testing::TempDir() + "/serve_pct";
  std::filesystem::create_directories(tmp);
  std::filesystem::copy_file("testdata/golden/inputs/photo.png", tmp + "/my cat%.png",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string root = std::filesystem::canonical(tmp).string();
  ParseResult r = Parse(ChatBody("x", "FILE://" + root + "/my%20cat%25.png"), root);
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.request.images[0].bytes.size(), kPng.size());
  const std::string p = "messages[0].content[1].image_url.url";
  ExpectError(ChatBody("x", "file://" + root + "/my%2"), p, "invalid_image_url", root);
  ExpectError(ChatBody("x", "file://" + root + "/my%zzcat.png"), p, "invalid_image_url", root);
  ExpectError(ChatBody("x", "file://" + root + "/x%00.png"), p, "invalid_image_url", root);
}

// Without an API key: DNS rebinding (a foreign Host) and cross-site pages (a foreign Origin)
// are refused; the server's own page, loopback pages and --allowed-origins are not.
TEST(OriginPolicy, HostAndOrigin) {
  OriginPolicy p({"https://App.Example.com/"});
  p.SetBindHost("ocular.lan");
  for (const char* host :
       {"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "10.1.2.3", "LOCALHOST", "ocular.lan:80",
        "app.example.com", "dev.localhost:3000", ""}) {
    EXPECT_EQ(p.Check(host, ""), "") << host;
  }
  EXPECT_NE(p.Check("evil.com:8080", ""), "");  // a rebinding name
  EXPECT_NE(p.Check("evil.com:8080", "http://evil.com:8080"), "");
  EXPECT_NE(p.Check("localhost.evil.com", ""), "");
  // Origins: the page's own, loopback pages, the configured one.
  EXPECT_EQ(p.Check("127.0.0.1:8080", "http://127.0.0.1:8080"), "");
  EXPECT_EQ(p.Check("ocular.lan:8080", "http://ocular.lan:8080"), "");
  EXPECT_EQ(p.Check("127.0.0.1:8080", "http://localhost:3000"), "");
  EXPECT_EQ(p.Check("127.0.0.1:8080", "https://app.example.com"), "");
  for (const char* origin : {"https://evil.com", "null", "http://127.0.0.1.evil.com", "file://",
                             "chrome-extension://abc", "https://app.example.com.evil"}) {
    EXPECT_NE(p.Check("127.0.0.1:8080", origin), "") << origin;
  }
  // CORS only for the configured origin.
  EXPECT_TRUE(p.Cors("https://app.example.com"));
  EXPECT_FALSE(p.Cors("http://localhost:3000"));
  EXPECT_TRUE(p.CorsHeaders("http://localhost:3000", true).empty());
  const auto h = p.CorsHeaders("https://app.example.com", true);
  ASSERT_FALSE(h.empty());
  EXPECT_EQ(h[0], (std::pair<std::string, std::string>{"Access-Control-Allow-Origin",
                                                       "https://app.example.com"}));
  EXPECT_EQ(NormalizeOrigin("https://a.b/path"), "");
  EXPECT_EQ(NormalizeOrigin("a.b"), "");
}

}  // namespace
}  // namespace ocular::server
