#include "server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "metrics.h"
#include "ocular/detection.h"
#include "ocular/tasks.h"
#include "web_page.h"

namespace ocular::server {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr char kChatPath[] = "/v1/chat/completions";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(ErrorJson(e), "application/json");
}

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
                       m.find("[image") != std::string::npos ? "invalid_image" : "");
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

}  // namespace

// One generation, run on its own thread; the HTTP worker reads its pieces as they come.
struct Job {
  ChatRequest req;
  bool chat = false;  // the model has a chat format: GenerateChat on req.messages
  Clock::time_point admitted;
  Clock::time_point deadline;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> pieces;  // decoded text not yet sent
  bool done = false;
  bool deadline_hit = false;
  double ttft_s = -1;
  StatusOr<GenerateResult> result = Status(StatusCode::kInternal, "not run");
  std::atomic<bool> cancel{false};  // the client went away, or the server stops
};

struct Server::Impl {
  ServerOptions opt;
  httplib::Server http;
  Metrics metrics;
  std::atomic<Engine*> engine{nullptr};
  std::unique_ptr<Engine> engine_owner;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};

  // Admission: `admitted` counts requests between admission and the end of their
  // generation; at most parallel + max_queue. `running` of them hold a model slot.
  std::mutex mu;
  std::condition_variable slot_cv;
  int admitted = 0;
  int running = 0;
  int jobs = 0;  // generation threads alive (the destructor waits for them)

  explicit Impl(ServerOptions o) : opt(std::move(o)) {}

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
  // Waits for a model slot until the job's deadline; false if it passed or the job was
  // cancelled.
  bool AcquireSlot(Job& job) {
    std::unique_lock<std::mutex> lock(mu);
    while (running >= opt.parallel) {
      if (job.cancel || stopping) return false;
      if (slot_cv.wait_until(
              lock, std::min(job.deadline, Clock::now() + std::chrono::milliseconds(100))) ==
              std::cv_status::timeout &&
          Clock::now() >= job.deadline) {
        return false;
      }
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
    slot_cv.notify_all();  // the destructor waits on this condition too
  }

  // Runs `job` to completion (on the job's thread).
  void Generate(Engine& eng, const std::shared_ptr<Job>& job) {
    StatusOr<GenerateResult> r = Status(StatusCode::kInternal, "not run");
    bool deadline_hit = false;
    if (!AcquireSlot(*job)) {
      deadline_hit = !job->cancel && !stopping;
      r = Error(StatusCode::kInternal, "serve", "cancelled before it ran");
    } else {
      TokenCallback on_text = [&](const std::string& piece) {
        {
          std::lock_guard<std::mutex> lock(job->mu);
          if (job->ttft_s < 0) {
            job->ttft_s = std::chrono::duration<double>(Clock::now() - job->admitted).count();
          }
          job->pieces.push_back(piece);
        }
        job->cv.notify_all();
        if (Clock::now() >= job->deadline) {
          deadline_hit = true;
          return false;
        }
        return !job->cancel && !stopping;
      };
      try {
        r = job->chat
                ? eng.GenerateChat(job->req.images, job->req.messages, job->req.options, on_text)
                : eng.Generate(job->req.images, job->req.prompt, job->req.options, on_text);
      } catch (const std::bad_alloc&) {  // the engine sizes its buffers first: a bug if here
        r = Error(StatusCode::kInternal, "serve", "out of memory for this request");
      } catch (const std::exception& e) {
        r = Error(StatusCode::kInternal, "serve", "internal error: ", e.what());
      }
      ReleaseSlot();
    }
    Release();  // the admission ticket, before the client can see the end
    {
      std::lock_guard<std::mutex> lock(job->mu);
      job->result = std::move(r);
      job->deadline_hit = deadline_hit;
      job->done = true;
    }
    job->cv.notify_all();
  }

  void StartJob(Engine& eng, std::shared_ptr<Job> job) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++jobs;
    }
    std::thread([this, &eng, job] {
      Generate(eng, job);
      std::lock_guard<std::mutex> lock(mu);
      --jobs;
      slot_cv.notify_all();
    }).detach();
  }

  // The "ocular" extra field: detection boxes (and masks) in the first image's pixels, and
  // timings.
  json Extras(const GenerateResult& r) {
    json extra = json::object();
    if (!r.image_sizes.empty()) {
      const int w = r.image_sizes[0].width, h = r.image_sizes[0].height;
      std::vector<Detection> boxes = ParseDetections(r.text, w, h);
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

  json Usage(const GenerateResult& r) {
    const int64_t p = static_cast<int64_t>(r.prompt_ids.size());
    const int64_t c = static_cast<int64_t>(r.output_ids.size());
    return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c}};
  }

  // The result of a finished job as an error, or nothing.
  std::optional<ApiError> JobError(const Job& job) {
    if (job.deadline_hit) {
      return MakeError(504, "timeout_error",
                       StrCat("the request did not finish within the server's deadline of ",
                              opt.deadline_s, " s"),
                       "deadline_exceeded");
    }
    if (!job.result.ok()) return FromStatus(job.result.status());
    return std::nullopt;
  }

  void HandleChat(const httplib::Request& req, httplib::Response& res);
  void StreamResponse(httplib::Response& res, std::shared_ptr<Job> job, const std::string& id,
                      int64_t created);
};

void Server::Impl::HandleChat(const httplib::Request& http_req, httplib::Response& res) {
  Engine* eng = engine.load();
  if (eng == nullptr) {
    return SendError(res,
                     MakeError(503, "server_error", "the model is still loading", "model_loading"));
  }
  // The queue slot is taken before anything is decoded: a flood of large images must wait for
  // admission instead of being decoded (and held in memory) all at once.
  if (!Admit()) {
    res.set_header("Retry-After", "1");
    return SendError(res, MakeError(429, "rate_limit_error",
                                    StrCat("the server is busy: ", opt.parallel + opt.max_queue,
                                           " requests are running or waiting; retry later"),
                                    "queue_full"));
  }
  auto job = std::make_shared<Job>();
  job->admitted = Clock::now();
  job->deadline =
      job->admitted + std::chrono::microseconds(static_cast<int64_t>(opt.deadline_s * 1e6));
  ParseResult parsed = ParseChatRequest(http_req.body, opt.limits, opt.local_files_root);
  if (!parsed.ok()) {
    Release();
    return SendError(res, parsed.error);
  }
  job->req = std::move(parsed.request);
  if (!job->req.model.empty() && job->req.model != opt.model_id) {
    Release();
    return SendError(res, MakeError(404, "invalid_request_error",
                                    StrCat("model: this server serves '", opt.model_id, "'"),
                                    "model_not_found", "model"));
  }
  // Models with a chat template format every message (docs/server.md); the others take the
  // last user message as the prompt. The prompt's length is known before the model runs
  // (BuildPrompt does not wait for it).
  job->chat = !eng->Info().chat_format.empty();
  const int n_images = static_cast<int>(job->req.images.size());
  auto prompt = job->chat ? eng->BuildChatPrompt(n_images, job->req.messages, job->req.options)
                          : eng->BuildPrompt(n_images, job->req.prompt, job->req.options);
  if (!prompt.ok()) {
    Release();
    ApiError e = FromStatus(prompt.status());
    e.param = "messages";
    return SendError(res, e);
  }
  if (static_cast<int64_t>(prompt->ids.size()) > opt.max_prompt_tokens) {
    Release();
    return SendError(res, MakeError(400, "invalid_request_error",
                                    StrCat("the prompt is ", prompt->ids.size(),
                                           " tokens (images included), over the limit of ",
                                           opt.max_prompt_tokens),
                                    "context_length_exceeded", "messages"));
  }
  const bool stream = job->req.stream;
  StartJob(*eng, job);  // owns the admission ticket from here on

  const std::string id = StrCat("chatcmpl-", next_id++);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  if (stream) {
    // Wait for the first text (or the end) so that a request failing before any output (an
    // undecodable image, a prompt too long) still gets its 4xx status.
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->done || !job->pieces.empty(); });
    if (job->done) {
      if (auto e = JobError(*job)) return SendError(res, *e);
    }
    lock.unlock();
    return StreamResponse(res, job, id, created);
  }
  {
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->done; });
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - job->admitted).count();
  metrics.ObserveLatency(total_s, job->ttft_s);
  if (auto e = JobError(*job)) return SendError(res, *e);
  const GenerateResult& r = *job->result;
  metrics.AddTokens(static_cast<int64_t>(r.prompt_ids.size()),
                    static_cast<int64_t>(r.output_ids.size()));
  json message = {{"role", "assistant"}, {"content", r.text}, {"ocular", Extras(r)}};
  json body = {{"id", id},
               {"object", "chat.completion"},
               {"created", created},
               {"model", opt.model_id},
               {"choices", json::array({{{"index", 0},
                                         {"message", std::move(message)},
                                         {"logprobs", nullptr},
                                         {"finish_reason", FinishReason(r.finish_reason)}}})},
               {"usage", Usage(r)}};
  res.set_content(Dump(body), "application/json");
}

void Server::Impl::StreamResponse(httplib::Response& res, std::shared_ptr<Job> job,
                                  const std::string& id, int64_t created) {
  res.set_header("Cache-Control", "no-cache");
  auto chunk = [this, id, created](json choices) {
    json c = {{"id", id},
              {"object", "chat.completion.chunk"},
              {"created", created},
              {"model", opt.model_id},
              {"choices", std::move(choices)}};
    return "data: " + Dump(c) + "\n\n";
  };
  auto delta = [](json d, json finish) {
    return json::array({{{"index", 0}, {"delta", std::move(d)}, {"finish_reason", finish}}});
  };
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, job, chunk, delta](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& s) {
          if (sink.write(s.data(), s.size())) return true;
          job->cancel = true;  // the client went away: the generation stops at its next token
          return false;
        };
        if (!send(chunk(delta({{"role", "assistant"}, {"content", ""}}, nullptr)))) return false;
        while (true) {
          std::unique_lock<std::mutex> lock(job->mu);
          job->cv.wait(lock, [&] { return job->done || !job->pieces.empty(); });
          std::string text;
          for (const std::string& p : job->pieces) text += p;
          job->pieces.clear();
          const bool done = job->done;
          lock.unlock();
          if (!text.empty() && !send(chunk(delta({{"content", text}}, nullptr)))) return false;
          if (done) break;
        }
        const double total_s = std::chrono::duration<double>(Clock::now() - job->admitted).count();
        metrics.ObserveLatency(total_s, job->ttft_s);
        if (auto e = JobError(*job)) {
          send("data: " + ErrorJson(*e) + "\n\n");
        } else {
          const GenerateResult& r = *job->result;
          metrics.AddTokens(static_cast<int64_t>(r.prompt_ids.size()),
                            static_cast<int64_t>(r.output_ids.size()));
          json last = delta(json::object(), FinishReason(r.finish_reason));
          last[0]["ocular"] = Extras(r);
          if (!send(chunk(std::move(last)))) return false;
          if (job->req.include_usage) {
            std::string u = chunk(json::array());
            json uj = json::parse(u.substr(6), nullptr, false);
            uj["usage"] = Usage(r);
            if (!send("data: " + Dump(uj) + "\n\n")) return false;
          }
        }
        send("data: [DONE]\n\n");
        sink.done();
        return true;
      },
      [job](bool) { job->cancel = true; });  // a no-op once the job is done
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl* im = impl_.get();
  ServerOptions& o = im->opt;
  httplib::Server& http = im->http;
  // Every admitted request (running or queued) holds a worker, plus headroom to answer 429,
  // /health and /metrics while they wait.
  const size_t workers = static_cast<size_t>(o.parallel + o.max_queue + 4);
  http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http.set_payload_max_length(o.max_body_bytes);
  http.set_read_timeout(o.read_timeout_s, 0);
  http.set_write_timeout(o.read_timeout_s, 0);
  http.set_keep_alive_timeout(5);

  http.set_pre_routing_handler([im](const httplib::Request& req, httplib::Response& res) {
    // The page itself is public (it asks for the key); what it calls is not.
    if (im->opt.api_key.empty() || req.path == "/health" || req.path == "/") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    const bool ok = auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
                    SecretEquals(std::string_view(auth).substr(prefix.size()), im->opt.api_key);
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    SendError(res, MakeError(401, "authentication_error",
                             auth.empty() ? "missing API key: send Authorization: Bearer KEY"
                                          : "invalid API key",
                             "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib produces itself (unknown path, body too large, unreadable request) in the
  // OpenAI shape too.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e;
        e.http_status = res.status;
        switch (res.status) {
          case 404:
            e = MakeError(404, "invalid_request_error", StrCat("no such endpoint: ", req.path),
                          "unknown_url");
            break;
          case 405:
            e = MakeError(405, "invalid_request_error", StrCat("method not allowed on ", req.path));
            break;
          case 413:
            e = MakeError(413, "invalid_request_error", "the request body is over the size limit",
                          "request_too_large");
            break;
          default:
            e = MakeError(res.status, res.status >= 500 ? "server_error" : "invalid_request_error",
                          StrCat("HTTP ", res.status));
        }
        SendError(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        SendError(res, MakeError(500, "server_error", "internal error (a bug, please report it)"));
      });
  http.set_logger([im](const httplib::Request& req, const httplib::Response& res) {
    if (req.path == kChatPath) im->metrics.CountRequest(res.status);
  });

  http.Post(kChatPath, [im](const httplib::Request& req, httplib::Response& res) {
    im->HandleChat(req, res);
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data: blob:; style-src 'unsafe-inline'; "
                   "script-src 'unsafe-inline'; connect-src 'self'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(kWebPage, "text/html; charset=utf-8");
  });
  http.Get("/health", [im](const httplib::Request&, httplib::Response& res) {
    if (im->engine.load() == nullptr) {
      return SendError(
          res, MakeError(503, "server_error", "the model is still loading", "model_loading"));
    }
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/metrics", [im](const httplib::Request&, httplib::Response& res) {
    std::string text = im->metrics.Render();
    if (Engine* eng = im->engine.load()) text += RenderEngineStats(eng->Stats());
    res.set_content(text, "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [im](const httplib::Request&, httplib::Response& res) {
    json model = {
        {"id", im->opt.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "ocular"}};
    if (Engine* eng = im->engine.load()) {
      const ModelInfo info = eng->Info();
      model["ocular"] = {{"architecture", info.architecture},
                         {"input_modalities", {"text", "image"}},
                         {"image_size", info.image_size},
                         {"tokens_per_image", info.image_tokens},
                         {"max_images", im->opt.limits.max_images}};
    }
    res.set_content(Dump({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
}

Server::~Server() {
  Stop();
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->slot_cv.wait(lock, [&] { return impl_->jobs == 0; });
}

StatusOr<int> Server::Bind(const std::string& host, int port) {
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host)
                              : (impl_->http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return Error(StatusCode::kIoError, "serve", "cannot listen on ", host, ":", port,
                 " (in use, or not an address of this machine)");
  }
  return bound;
}

void Server::SetEngine(std::unique_ptr<Engine> engine) {
  impl_->engine_owner = std::move(engine);
  impl_->engine.store(impl_->engine_owner.get());
}

void Server::Run() { impl_->http.listen_after_bind(); }

void Server::Stop() {
  impl_->stopping = true;
  impl_->http.stop();
  impl_->slot_cv.notify_all();
}

}  // namespace ocular::server
