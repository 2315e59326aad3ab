// `ocular serve`: an OpenAI-compatible HTTP server over a thread-safe Engine (docs/server.md).
//
//   ocular::server::Server server(options);
//   int port = server.Bind("127.0.0.1", 0).value();   // listening; /health answers 503
//   server.SetEngine(std::move(engine));              // /health 200, requests accepted
//   server.Run();                                     // until Stop() from another thread
//
// Routes: POST /v1/chat/completions, GET /v1/models, GET /health, GET /metrics, GET / (the
// web page).
// Thread-safety: Stop() and SetEngine() may be called from any thread while Run() blocks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ocular/engine.h"
#include "ocular/status.h"
#include "request.h"

namespace ocular::server {

struct ServerOptions {
  std::string model_id = "ocular";  // the id /v1/models lists and requests may name
  std::string model_dir;            // where a `segment` answer's mask model is looked up
  // The engine's image resize bounds (EngineOptions::image_resize): Qwen2.5-VL's boxes are in
  // pixels of the image as resized.
  ImageResize image_resize;
  std::string api_key;  // "": no authentication
  // Requests admitted to run at once: the Engine decodes them together in one batch
  // (continuous batching; make the Engine's max_batch at least this).
  int parallel = 8;
  int max_queue = 16;  // admitted requests waiting beyond `parallel`; then 429
  size_t max_body_bytes = 64u << 20;
  int max_prompt_tokens = 4096;  // image tokens included
  double deadline_s = 300;       // admission to the last token
  int read_timeout_s = 10;       // the request head must arrive within this (after the last one)
  double body_timeout_s = 60;    // from the end of the head to the last body byte
  int max_connections = 1024;    // open at once; at the cap an idle one makes room
  int max_connections_per_client = 256;  // from one IP address
  // Browser origins that may call a server without an API key and read its answers (CORS):
  // "https://app.example.com" (origin.h).
  std::vector<std::string> allowed_origins;
  std::string log_format = "off";  // the access log on stderr: "off", "text", "json"
  std::string local_files_root;    // realpath of --allow-local-files ("" = off)
  RequestLimits limits;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stops, cancels running generations and waits for them
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (port 0: a free port). Returns the port. Errors: kIoError.
  StatusOr<int> Bind(const std::string& host, int port);
  // Makes the server ready (/health 200). REQUIRES: called once.
  void SetEngine(std::unique_ptr<Engine> engine);
  // Serves until Stop(). REQUIRES: Bind succeeded.
  void Run();
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ocular::server
