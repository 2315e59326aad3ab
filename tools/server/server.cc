#include "server.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "http.h"
#include "metrics.h"
#include "ocular/detection.h"
#include "ocular/tasks.h"
#include "origin.h"
#include "web_page.h"

namespace ocular::server {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr char kChatPath[] = "/v1/chat/completions";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError MakeError(int status, std::string type, std::string message, std::string code = "",
                   std::string param = "") {
  ApiError e;
  e.http_status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

http::Response ErrorResponse(const ApiError& e) {
  http::Response r;
  r.status = e.http_status;
  r.body = ErrorJson(e);
  return r;
}

// An Engine failure as the client sees it: problems with the request's images or prompt are
// 4xx; anything else is the server's fault (500). Messages carry ocular's component tag and
// facts (no internal representations).
ApiError FromStatus(const Status& s) {
  const std::string& m = s.message();
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kDataLoss:
    case StatusCode::kUnimplemented:
      return MakeError(400, "invalid_request_error", m,
                       m.find("[image") != std::string::npos      ? "invalid_image"
                       : m.find("[grammar]") != std::string::npos ? "unsupported_schema"
                                                                  : "");
    case StatusCode::kResourceExhausted:
      return MakeError(
          400, "invalid_request_error", m,
          m.find("pixel") != std::string::npos ? "image_too_large" : "context_length_exceeded");
    default:
      return MakeError(500, "server_error", m);
  }
}

const char* FinishReason(const std::string& engine_reason) {
  return engine_reason == "length" ? "length" : "stop";  // eos, stop
}

// The routes and the methods each takes.
struct Route {
  const char* path;
  const char* method;
  bool needs_key;
};
constexpr Route kRoutes[] = {{"/", "GET", false},
                             {"/health", "GET", false},
                             {"/metrics", "GET", true},
                             {"/v1/models", "GET", true},
                             {kChatPath, "POST", true}};

const Route* FindRoute(const std::string& path) {
  for (const Route& r : kRoutes) {
    if (path == r.path) return &r;
  }
  return nullptr;
}

// "application/json" with any parameters ("; charset=utf-8"), in any case.
bool IsJsonType(std::string type) {
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return type == "application/json";
}

}  // namespace

struct Server::Impl {
  explicit Impl(ServerOptions o) : opt(std::move(o)), origins(opt.allowed_origins) {
    // How the checkpoint's answers carry boxes (an unreadable one fails to load anyway).
    StatusOr<GroundingFormat> g = LoadGroundingFormat(opt.model_dir, opt.image_resize);
    if (g.ok()) grounding = *g;
  }

  ServerOptions opt;
  GroundingFormat grounding;
  OriginPolicy origins;
  Metrics metrics;
  std::unique_ptr<http::Server> http;
  std::atomic<Engine*> engine{nullptr};
  std::unique_ptr<Engine> engine_owner;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};
  std::mutex log_mu;

  // Admission: `admitted` counts requests between admission and the end of their
  // generation; at most parallel + max_queue. `running` of them hold a model slot.
  std::mutex mu;
  std::condition_variable slot_cv;
  int admitted = 0;
  int running = 0;
  int jobs = 0;  // chat threads alive (the destructor waits for them)

  void Publish() { metrics.SetQueue(admitted - running, running); }

  bool Admit() {
    std::lock_guard<std::mutex> lock(mu);
    if (admitted >= opt.parallel + opt.max_queue) return false;
    ++admitted;
    Publish();
    return true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    --admitted;
    Publish();
  }
  // Waits for a model slot until `deadline`; false if it passed, the client went away or the
  // server stops.
  bool AcquireSlot(Clock::time_point deadline, const http::Exchange& ex) {
    std::unique_lock<std::mutex> lock(mu);
    while (running >= opt.parallel) {
      if (ex.Gone() || stopping) return false;
      slot_cv.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
      if (Clock::now() >= deadline) return false;
    }
    ++running;
    Publish();
    return true;
  }
  void ReleaseSlot() {
    {
      std::lock_guard<std::mutex> lock(mu);
      --running;
      Publish();
    }
    slot_cv.notify_all();
  }

  std::optional<http::Response> HeadCheck(const http::Request& req);
  void Handle(std::shared_ptr<http::Exchange> ex);
  void StartChat(std::shared_ptr<http::Exchange> ex);
  void Chat(Engine& eng, http::Exchange& ex);
  struct ChatStream;
  std::optional<ApiError> CheckPrompt(Engine& eng, bool chat, ChatRequest* req);
  StatusOr<GenerateResult> RunChat(Engine& eng, bool chat, const ChatRequest& req,
                                   ChatStream* stream);
  void FinishChat(const ChatRequest& req, const GenerateResult& r, ChatStream* stream);
  void Log(const http::LogEntry& e);
  json Extras(const GenerateResult& r, const GenerateOptions& o);
  static json Usage(const GenerateResult& r) {
    const int64_t p = static_cast<int64_t>(r.prompt_ids.size());
    const int64_t c = static_cast<int64_t>(r.output_ids.size());
    return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c}};
  }
};

// The request refused from its head alone: unknown route or method, a Host or Origin the
// server does not serve (without an API key), the API key, the content type of a POST.
std::optional<http::Response> Server::Impl::HeadCheck(const http::Request& req) {
  const std::string origin = req.Header("Origin");
  if (req.method == "OPTIONS") {  // a CORS preflight
    http::Response r;
    r.status = 204;
    r.content_type = "text/plain";
    if (!origins.Cors(origin)) {
      return ErrorResponse(MakeError(403, "invalid_request_error",
                                     StrCat("origin '", origin, "' is not in --allowed-origins"),
                                     "forbidden_origin"));
    }
    r.headers = origins.CorsHeaders(origin, /*preflight=*/true);
    return r;
  }
  const Route* route = FindRoute(req.path);
  if (route == nullptr) {
    return ErrorResponse(MakeError(404, "invalid_request_error",
                                   StrCat("no such endpoint: ", req.path), "unknown_url"));
  }
  if (req.method != route->method) {
    http::Response r = ErrorResponse(
        MakeError(405, "invalid_request_error",
                  StrCat(req.method, " is not allowed on ", req.path, " (", route->method, ")"),
                  "method_not_allowed"));
    r.headers.emplace_back("Allow", route->method);
    return r;
  }
  if (opt.api_key.empty()) {
    // Without a key, any web page the user visits could call a local server: DNS rebinding
    // (Host) and cross-site requests (Origin) are refused.
    if (std::string why = origins.Check(req.Header("Host"), origin); !why.empty()) {
      return ErrorResponse(MakeError(403, "invalid_request_error", why, "forbidden_origin"));
    }
  } else if (route->needs_key &&
             !SecretEquals(BearerToken(req.Header("Authorization")), opt.api_key)) {
    http::Response r = ErrorResponse(MakeError(
        401, "authentication_error",
        req.Header("Authorization").empty() ? "missing API key: send Authorization: Bearer KEY"
                                            : "invalid API key",
        "invalid_api_key"));
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }
  if (req.method == "POST" && !IsJsonType(req.Header("Content-Type"))) {
    return ErrorResponse(
        MakeError(415, "invalid_request_error",
                  StrCat("the request body must be JSON (Content-Type: application/json), not '",
                         req.Header("Content-Type"), "'"),
                  "unsupported_media_type"));
  }
  return std::nullopt;
}

void Server::Impl::Handle(std::shared_ptr<http::Exchange> ex) {
  const http::Request& req = ex->request();
  http::Response r;
  if (req.path == kChatPath) return StartChat(std::move(ex));
  if (req.path == "/") {
    r.headers = {{"Content-Security-Policy",
                  "default-src 'self'; img-src 'self' data: blob:; style-src 'unsafe-inline'; "
                  "script-src 'unsafe-inline'; connect-src 'self'"},
                 {"X-Content-Type-Options", "nosniff"},
                 {"Cache-Control", "no-cache"}};
    r.content_type = "text/html; charset=utf-8";
    r.body = kWebPage;
  } else if (req.path == "/health") {
    if (engine.load() == nullptr) {
      r = ErrorResponse(
          MakeError(503, "server_error", "the model is still loading", "model_loading"));
    } else {
      r.body = R"({"status":"ok"})";
    }
  } else if (req.path == "/metrics") {
    r.body = metrics.Render();
    if (Engine* eng = engine.load()) r.body += RenderEngineStats(eng->Stats());
    r.content_type = "text/plain; version=0.0.4";
  } else {  // /v1/models
    json model = {
        {"id", opt.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "ocular"}};
    if (Engine* eng = engine.load()) {
      const ModelInfo info = eng->Info();
      model["ocular"] = {
          {"architecture", info.architecture},     {"input_modalities", {"text", "image"}},
          {"image_size", info.image_size},         {"tokens_per_image", info.image_tokens},
          {"context_length", info.context_length}, {"max_images", opt.limits.max_images}};
    }
    r.body = Dump({{"object", "list"}, {"data", json::array({model})}});
  }
  for (auto& h : origins.CorsHeaders(req.Header("Origin"), false)) r.headers.push_back(h);
  ex->Respond(std::move(r));
}

// On the I/O thread: the queue slot is taken before anything is parsed or decoded (a flood of
// large images waits for admission instead of being decoded, and held in memory, at once);
// the rest runs on a thread of its own.
void Server::Impl::StartChat(std::shared_ptr<http::Exchange> ex) {
  Engine* eng = engine.load();
  if (eng == nullptr) {
    return ex->Respond(ErrorResponse(
        MakeError(503, "server_error", "the model is still loading", "model_loading")));
  }
  if (!Admit()) {
    http::Response r =
        ErrorResponse(MakeError(429, "rate_limit_error",
                                StrCat("the server is busy: ", opt.parallel + opt.max_queue,
                                       " requests are running or waiting; retry later"),
                                "queue_full"));
    r.headers.emplace_back("Retry-After", "1");
    return ex->Respond(std::move(r));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ++jobs;
  }
  std::thread([this, eng, ex = std::move(ex)]() mutable {
    Chat(*eng, *ex);
    ex.reset();  // frees the request body (a large one is given back to the system)
    std::lock_guard<std::mutex> lock(mu);
    --jobs;
    slot_cv.notify_all();
  }).detach();
}

void Server::Impl::Log(const http::LogEntry& e) {
  if (e.path == kChatPath) metrics.CountRequest(e.status);
  if (opt.log_format == "off") return;
  std::string line;
  if (opt.log_format == "json") {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    line = Dump({{"time", stamp},
                 {"method", e.method},
                 {"path", e.path},
                 {"status", e.status},
                 {"bytes", e.bytes},
                 {"ms", std::round(e.ms * 10) / 10},
                 {"request_id", e.id},
                 {"client", e.client}});
  } else {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", e.ms);
    // The path as sent may hold anything: quoted by the JSON dumper, never raw.
    line = StrCat("ocular serve: ", e.method, " ", Dump(e.path), " ", e.status, " ", e.bytes, " B ",
                  ms, " ms id=", e.id, " client=", e.client);
  }
  std::lock_guard<std::mutex> lock(log_mu);
  std::fprintf(stderr, "%s\n", line.c_str());
}

// The "ocular" extra field: detection boxes (and masks) in the first image's pixels (<loc>
// tokens, or Qwen's grounding JSON: docs/models.md §12), and timings.
json Server::Impl::Extras(const GenerateResult& r, const GenerateOptions& o) {
  json extra = json::object();
  if (!r.image_sizes.empty()) {
    const int w = r.image_sizes[0].width, h = r.image_sizes[0].height;
    std::vector<Detection> boxes =
        ParseGroundedDetections(WithImageResize(grounding, o.image_resize), r.text, w, h);
    if (!boxes.empty()) {
      // Masks when a mask model is next to the checkpoint; without one the boxes keep their
      // seg codes (AttachMasks' warning is not an error for a client).
      (void)AttachMasks(&boxes, "", opt.model_dir, w, h);
      extra["detections"] = json::parse(DetectionsJson(boxes), nullptr, false);
    }
  }
  extra["timings"] = {{"image_ms", r.timings.image_ms},
                      {"prefill_ms", r.timings.prefill_ms},
                      {"decode_ms", r.timings.decode_ms}};
  return extra;
}

// Checks a parsed chat request before it waits for a slot: the model it names, and its prompt
// (built to count its tokens) against the server's limit and the model's context; bounds
// max_tokens by what the context leaves after the prompt.
std::optional<ApiError> Server::Impl::CheckPrompt(Engine& eng, bool chat, ChatRequest* req) {
  if (!req->model.empty() && req->model != opt.model_id) {
    return MakeError(404, "invalid_request_error",
                     StrCat("model: this server serves '", opt.model_id, "'"), "model_not_found",
                     "model");
  }
  // Models with a chat template format every message (docs/server.md); the others take the
  // last user message as the prompt. The prompt's length is known before the model runs.
  const int n_images = static_cast<int>(req->images.size());
  auto prompt = chat ? eng.BuildChatPrompt(n_images, req->messages, req->options)
                     : eng.BuildPrompt(n_images, req->prompt, req->options);
  if (!prompt.ok()) {
    ApiError e = FromStatus(prompt.status());
    e.param = "messages";
    return e;
  }
  const int64_t prompt_tokens = static_cast<int64_t>(prompt->ids.size());
  if (prompt_tokens > opt.max_prompt_tokens) {
    return MakeError(400, "invalid_request_error",
                     StrCat("the prompt is ", prompt_tokens,
                            " tokens (images included), over the limit of ", opt.max_prompt_tokens),
                     "context_length_exceeded", "messages");
  }
  // max_tokens is a ceiling (OpenAI's meaning): bounded by what the context has left after the
  // prompt, so a request within the advertised limit does not fail on a short-context model.
  const int64_t context = eng.Info().context_length;  // 0: not known
  if (context <= 0) return std::nullopt;
  if (prompt_tokens >= context) {
    return MakeError(
        400, "invalid_request_error",
        StrCat("the prompt is ", prompt_tokens,
               " tokens (images included) and fills the model's context of ", context, " tokens"),
        "context_length_exceeded", "messages");
  }
  req->options.max_tokens =
      static_cast<int>(std::min<int64_t>(req->options.max_tokens, context - prompt_tokens));
  return std::nullopt;
}

// One answer as it goes out: its ids, its clock, and the server-sent events of a streamed
// one (OpenAI's chat.completion.chunk objects).
struct Server::Impl::ChatStream {
  Impl* im;
  http::Exchange* ex;
  Clock::time_point admitted, deadline;
  std::string id;
  int64_t created = 0;
  bool streaming = false;     // the head is sent
  bool deadline_hit = false;  // the deadline passed before the answer's end
  double ttft_s = -1;         // seconds from admission to the first text

  std::string Chunk(json choices) const {
    json c = {{"id", id},
              {"object", "chat.completion.chunk"},
              {"created", created},
              {"model", im->opt.model_id},
              {"choices", std::move(choices)}};
    return "data: " + Dump(c) + "\n\n";
  }
  static json Delta(json d, json finish) {
    return json::array({{{"index", 0}, {"delta", std::move(d)}, {"finish_reason", finish}}});
  }
  void Start() {
    streaming = true;
    http::Response head;
    head.content_type = "text/event-stream";
    head.headers = im->origins.CorsHeaders(ex->request().Header("Origin"), false);
    head.headers.emplace_back("Cache-Control", "no-cache");
    ex->StartStream(std::move(head));
    ex->Write(Chunk(Delta({{"role", "assistant"}, {"content", ""}}, nullptr)));
  }
};

// Waits for a slot and generates; streams the text as it comes when the request asks.
StatusOr<GenerateResult> Server::Impl::RunChat(Engine& eng, bool chat, const ChatRequest& req,
                                               ChatStream* stream) {
  http::Exchange& ex = *stream->ex;
  if (!AcquireSlot(stream->deadline, ex)) {
    stream->deadline_hit = !ex.Gone() && !stopping;
    return Error(StatusCode::kInternal, "serve", "cancelled before it ran");
  }
  // The status is sent with the first text, so that a request failing before any output
  // (an undecodable image, a prompt too long) still gets its 4xx.
  TokenCallback on_text = [&](const std::string& piece) {
    if (stream->ttft_s < 0) {
      stream->ttft_s = std::chrono::duration<double>(Clock::now() - stream->admitted).count();
    }
    if (req.stream) {
      if (!stream->streaming) stream->Start();
      ex.Write(stream->Chunk(ChatStream::Delta({{"content", piece}}, nullptr)));
    }
    if (Clock::now() >= stream->deadline) {
      stream->deadline_hit = true;
      return false;
    }
    return !ex.Gone() && !stopping;
  };
  StatusOr<GenerateResult> r = Status(StatusCode::kInternal, "not run");
  try {
    r = chat ? eng.GenerateChat(req.images, req.messages, req.options, on_text)
             : eng.Generate(req.images, req.prompt, req.options, on_text);
  } catch (const std::bad_alloc&) {  // the engine sizes its buffers first: a bug if here
    r = Error(StatusCode::kInternal, "serve", "out of memory for this request");
  } catch (const std::exception& e) {
    r = Error(StatusCode::kInternal, "serve", "internal error: ", e.what());
  }
  ReleaseSlot();
  return r;
}

// The end of an answer that generated: the whole completion, or the stream's last events.
void Server::Impl::FinishChat(const ChatRequest& req, const GenerateResult& r, ChatStream* stream) {
  http::Exchange& ex = *stream->ex;
  metrics.AddTokens(static_cast<int64_t>(r.prompt_ids.size()),
                    static_cast<int64_t>(r.output_ids.size()));
  if (!req.stream) {
    json message = {{"role", "assistant"}, {"content", r.text}, {"ocular", Extras(r, req.options)}};
    http::Response res;
    res.body = Dump({{"id", stream->id},
                     {"object", "chat.completion"},
                     {"created", stream->created},
                     {"model", opt.model_id},
                     {"choices", json::array({{{"index", 0},
                                               {"message", std::move(message)},
                                               {"logprobs", nullptr},
                                               {"finish_reason", FinishReason(r.finish_reason)}}})},
                     {"usage", Usage(r)}});
    res.headers = origins.CorsHeaders(ex.request().Header("Origin"), false);
    return ex.Respond(std::move(res));
  }
  if (!stream->streaming) stream->Start();  // no text at all (an immediate end of sequence)
  json last = ChatStream::Delta(json::object(), FinishReason(r.finish_reason));
  last[0]["ocular"] = Extras(r, req.options);
  ex.Write(stream->Chunk(std::move(last)));
  if (req.include_usage) {
    json u = json::parse(stream->Chunk(json::array()).substr(6), nullptr, false);
    u["usage"] = Usage(r);
    ex.Write("data: " + Dump(u) + "\n\n");
  }
  ex.Write("data: [DONE]\n\n");
  ex.End();
}

// One chat completion, on its own thread; owns the admission ticket and releases it before the
// client can see the end of the answer.
void Server::Impl::Chat(Engine& eng, http::Exchange& ex) {
  const Clock::time_point admitted = Clock::now();
  const Clock::time_point deadline =
      admitted + std::chrono::microseconds(static_cast<int64_t>(opt.deadline_s * 1e6));
  ParseResult parsed = ParseChatRequest(ex.request().body, opt.limits, opt.local_files_root);
  ChatRequest& req = parsed.request;
  const bool chat = !eng.Info().chat_format.empty();
  std::optional<ApiError> refused =
      parsed.ok() ? CheckPrompt(eng, chat, &req) : std::optional<ApiError>(parsed.error);
  if (refused) {
    Release();
    return ex.Respond(ErrorResponse(*refused));
  }
  ChatStream stream{this,
                    &ex,
                    admitted,
                    deadline,
                    StrCat("chatcmpl-", next_id++),
                    static_cast<int64_t>(std::time(nullptr))};
  StatusOr<GenerateResult> r = RunChat(eng, chat, req, &stream);
  Release();
  metrics.ObserveLatency(std::chrono::duration<double>(Clock::now() - admitted).count(),
                         stream.ttft_s);
  std::optional<ApiError> error;
  if (stream.deadline_hit) {
    error = MakeError(
        504, "timeout_error",
        StrCat("the request did not finish within the server's deadline of ", opt.deadline_s, " s"),
        "deadline_exceeded");
  } else if (!r.ok()) {
    error = FromStatus(r.status());
  }
  if (error && !stream.streaming) return ex.Respond(ErrorResponse(*error));
  if (error) {  // after the first text: an error event, then the end
    ex.Write("data: " + ErrorJson(*error) + "\n\n");
    ex.Write("data: [DONE]\n\n");
    return ex.End();
  }
  FinishChat(req, *r, &stream);
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl* im = impl_.get();
  const ServerOptions& o = im->opt;
  // Large buffers (request bodies, decoded images) are mapped and unmapped rather than taken
  // from the heap, whose pages glibc keeps after they are freed: the server's RSS returns to
  // where it was after a large request. (A fixed threshold also stops glibc from raising it.)
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  http::Limits l;
  l.max_body_bytes = o.max_body_bytes;
  l.head_timeout_s = o.read_timeout_s;
  l.body_timeout_s = o.body_timeout_s;
  l.max_connections = o.max_connections;
  l.max_connections_per_client = o.max_connections_per_client;
  http::Callbacks cb;
  cb.head_check = [im](const http::Request& req, int64_t) { return im->HeadCheck(req); };
  cb.handler = [im](std::shared_ptr<http::Exchange> ex) { im->Handle(std::move(ex)); };
  cb.log = [im](const http::LogEntry& e) { im->Log(e); };
  cb.error = [](int status, const std::string& message, const std::string& code) {
    return ErrorResponse(
        MakeError(status, status >= 500 ? "server_error" : "invalid_request_error", message, code));
  };
  im->http = std::make_unique<http::Server>(l, std::move(cb));
}

Server::~Server() {
  Stop();
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    impl_->slot_cv.wait(lock, [&] { return impl_->jobs == 0; });
  }
  impl_->http.reset();  // before the engine: no request is left to use it
}

StatusOr<int> Server::Bind(const std::string& host, int port) {
  impl_->origins.SetBindHost(host);
  return impl_->http->Bind(host, port);
}

void Server::SetEngine(std::unique_ptr<Engine> engine) {
  impl_->engine_owner = std::move(engine);
  impl_->engine.store(impl_->engine_owner.get());
}

void Server::Run() { impl_->http->Run(); }

void Server::Stop() {
  impl_->stopping = true;
  impl_->http->Stop();
  impl_->slot_cv.notify_all();
}

}  // namespace ocular::server
