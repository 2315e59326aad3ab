// ocular serve: the OpenAI-compatible HTTP server (docs/server.md).
#include <atomic>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "../cli/commands.h"
#include "../cli/options.h"
#include "origin.h"
#include "server.h"

namespace ocular::cli {

namespace {

struct ServeArgs {
  ModelArgs model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string allow_local_files;
  int max_body_mb = 64;
  int image_cache_mb = 256;
  // Prompt K/V for a chat's next turn: 512 MiB holds the last turn of a few conversations with an
  // image on a 4B-class model (Gemma 3 4B, bf16: about 0.14 MB per token); older turns are
  // dropped first (LRU).
  int prefix_cache_mb = 512;
  int prefill_chunk = EngineOptions{}.prefill_chunk;
  server::ServerOptions server = [] {
    server::ServerOptions o;
    o.log_format = "text";
    return o;
  }();
};

// Where to listen, who may call, and how requests are batched.
void AddListenOptions(CLI::App* cmd, ServeArgs* a) {
  cmd->add_option("--host", a->host, "address to listen on (0.0.0.0: every interface)");
  cmd->add_option("--port", a->port, "TCP port (0: any free port, printed at start)")
      ->check(IntRange(0, 65535));
  cmd->add_option("--api-key", a->server.api_key,
                  "require Authorization: Bearer KEY (default: $OCULAR_API_KEY, else none)")
      ->default_str("none");
  cmd->add_option("--parallel", a->server.parallel,
                  "requests decoded together in one batch (continuous batching)")
      ->check(IntRange(1, 64));
  cmd->add_option("--prefill-chunk", a->prefill_chunk,
                  "prompt rows prefilled per decode step while others decode (chunked prefill)")
      ->check(IntRange(1, 1 << 20));
  cmd->add_option("--image-cache-mb", a->image_cache_mb,
                  "vision features of recent images kept for reuse (MiB; 0: off)")
      ->check(IntRange(0, 1 << 20));
  cmd->add_option("--prefix-cache-mb", a->prefix_cache_mb,
                  "prompt K/V kept for a later prompt that begins alike, e.g. a chat's next "
                  "turn (MiB; 0: off)")
      ->check(IntRange(0, 1 << 20));
  cmd->add_option("--max-queue", a->server.max_queue,
                  "requests waiting beyond --parallel; more get 429")
      ->check(IntRange(0, 1024));
  cmd->add_option("--allow-local-files", a->allow_local_files,
                  "accept file:// image URLs inside this folder")
      ->default_str("off");
}

// What one request may ask for.
void AddLimitOptions(CLI::App* cmd, ServeArgs* a) {
  cmd->add_option("--max-images", a->server.limits.max_images, "images per request")
      ->check(IntRange(1, 64));
  cmd->add_option("--max-completion-tokens", a->server.limits.max_completion_tokens,
                  "largest max_tokens a request may ask for")
      ->check(IntRange(1, 1 << 20));
  cmd->add_option("--max-prompt-tokens", a->server.max_prompt_tokens,
                  "longest prompt, image tokens included")
      ->check(IntRange(1, 1 << 20));
  cmd->add_option("--max-body-mb", a->max_body_mb, "largest request body (MiB)")
      ->check(IntRange(1, 4096));
}

// Timeouts, connection caps, browser origins and the access log.
void AddConnectionOptions(CLI::App* cmd, ServeArgs* a) {
  cmd->add_option("--deadline", a->server.deadline_s, "seconds a request may take in all")
      ->check(FiniteRange(0.1, 86400));
  cmd->add_option("--read-timeout", a->server.read_timeout_s,
                  "seconds a request's head may take to arrive, in all (slow clients are dropped)")
      ->check(IntRange(1, 3600));
  cmd->add_option("--body-timeout", a->server.body_timeout_s,
                  "seconds a request's body may take to arrive, in all")
      ->check(FiniteRange(0.1, 3600));
  cmd->add_option("--max-connections", a->server.max_connections,
                  "connections open at once; at the cap the oldest idle one of the client "
                  "holding the most makes room")
      ->check(IntRange(1, 1 << 20));
  cmd->add_option("--max-connections-per-client", a->server.max_connections_per_client,
                  "connections open at once from one IP address")
      ->check(IntRange(1, 1 << 20));
  cmd->add_option("--allowed-origins", a->server.allowed_origins,
                  "browser origins (https://app.example.com) that may call a server without "
                  "--api-key and read its answers (CORS); comma-separated")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& o) {
            return server::NormalizeOrigin(o).empty()
                       ? "Value " + o + " is not an origin (scheme://host[:port])"
                       : std::string();
          },
          "ORIGIN"));
  cmd->add_option("--log-format", a->server.log_format,
                  "the access log on stderr, a line per request: text, json or off")
      ->check(CLI::IsMember({"text", "json", "off"}));
}

// Serves until SIGINT or SIGTERM: binds, then loads the model while the HTTP thread already
// runs. Returns the exit code.
int RunServe(const ServeArgs* a) {
  server::ServerOptions o = a->server;
  o.max_body_bytes = static_cast<size_t>(a->max_body_mb) << 20;
  if (o.api_key.empty()) {
    if (const char* env = std::getenv("OCULAR_API_KEY")) o.api_key = env;
  }
  if (!a->allow_local_files.empty()) {
    char resolved[PATH_MAX];
    std::error_code ec;
    if (::realpath(a->allow_local_files.c_str(), resolved) == nullptr ||
        !std::filesystem::is_directory(resolved, ec)) {
      return Fail(Error(StatusCode::kNotFound, "serve", "--allow-local-files ",
                        a->allow_local_files, ": not a folder"));
    }
    o.local_files_root = resolved;
  }
  o.model_dir = a->model.model;
  o.image_resize = a->model.resize;
  o.model_id = std::filesystem::path(a->model.model).filename().string();
  if (o.model_id.empty()) {
    o.model_id = std::filesystem::path(a->model.model).parent_path().filename().string();
  }
  // SIGINT / SIGTERM stop the server cleanly: blocked here (every thread inherits the mask)
  // and taken by one thread with sigwait, since Stop() is not async-signal-safe.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::Server srv(o);
  StatusOr<int> port = srv.Bind(a->host, a->port);
  if (!port.ok()) {
    return Fail(port.status());
  }
  if (o.api_key.empty() && a->host != "127.0.0.1" && a->host != "localhost" && a->host != "::1") {
    Note("ocular serve: warning: listening on " + a->host +
         " without --api-key: anyone who can reach this address can use the model");
  }
  Note("ocular serve: listening on http://" + a->host + ":" + std::to_string(*port) + " (loading " +
       a->model.model + ")");
  // The signal thread must not outlive `srv` (it used to be detached, and a SIGTERM's Stop()
  // could still be running when RunServe returned: UBSan saw it in the openai client test).
  // On the way out it is woken with a SIGTERM of its own and joined; `leaving` tells it that
  // this signal is not a request to stop.
  std::atomic<bool> leaving{false};
  std::thread signal_thread([&srv, &leaving, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (!leaving) srv.Stop();
  });
  struct JoinOnExit {
    std::thread& t;
    std::atomic<bool>& leaving;
    ~JoinOnExit() {
      leaving = true;
      pthread_kill(t.native_handle(), SIGTERM);  // blocked: pending until its sigwait takes it
      t.join();
    }
  } join_signal_thread{signal_thread, leaving};
  std::thread http([&srv] { srv.Run(); });
  auto engine = LoadEngine(a->model, o.parallel, static_cast<size_t>(a->image_cache_mb) << 20,
                           a->prefill_chunk, static_cast<size_t>(a->prefix_cache_mb) << 20);
  if (!engine.ok()) {
    srv.Stop();
    http.join();
    return Fail(engine.status());
  }
  srv.SetEngine(std::move(*engine));
  Note("ocular serve: ready (model '" + o.model_id + "')");
  http.join();
  Note("ocular serve: stopped");
  return 0;
}

}  // namespace

void AddServe(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("serve", "serve the OpenAI Chat Completions API over HTTP");
  auto a = std::make_shared<ServeArgs>();
  AddModelArgs(cmd, &a->model, kCompute | kImages | kResize);
  AddListenOptions(cmd, a.get());
  AddLimitOptions(cmd, a.get());
  AddConnectionOptions(cmd, a.get());
  cmd->callback([=] { *rc = RunServe(a.get()); });
}

}  // namespace ocular::cli
