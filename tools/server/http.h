// The HTTP/1.1 layer of `ocular serve`: asynchronous connections on Boost.Beast / Asio (a few
// I/O threads for every connection, no thread per connection), so slow or hostile clients
// cannot starve the others (docs/server.md §Connections):
//   - a total deadline for each request head (from the moment the server waits for it) and
//     for each body, whatever the pace of the bytes (one byte per second does not extend it);
//   - a connection cap with per-client fairness: at the cap, the oldest connection waiting
//     for a request head of the client holding the most connections makes room;
//   - 413 decided from the headers (Content-Length over the limit; a chunked body stops at it),
//     431 for an oversize head, 408 at a deadline;
//   - bounded buffers (a request's body is freed with it; a stream's unsent output is bounded).
// The application sees whole requests (Handler) and may refuse one from its head alone
// (HeadCheck: authentication, routes, content type), before its body is read.
// Beast types stay in http.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ocular/status.h"

namespace ocular::server::http {

struct Limits {
  size_t max_header_bytes = 16u << 10;   // request line and headers; over it: 431
  size_t max_body_bytes = 64u << 20;     // over it: 413 (from Content-Length, or while chunked)
  double head_timeout_s = 10;            // from waiting for a request until its head is read
  double body_timeout_s = 60;            // from the head until the last body byte
  double write_timeout_s = 30;           // one response write (a stream's chunk) to complete
  int max_connections = 1024;            // open at once (also bounded by RLIMIT_NOFILE)
  int max_connections_per_client = 256;  // from one IP address
  size_t max_unsent_bytes = 4u << 20;    // a stream's output the client has not read yet
  int io_threads = 2;
};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::string query;   // after '?', "" if none
  Headers headers;
  std::string body;
  std::string client;  // the peer's IP address
  std::string id;      // X-Request-Id if the client sent a plain one, else generated
  // The header's value ("" if absent); names compare case-insensitively.
  std::string Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  Headers headers;
  std::string body;
};

// One request in progress. Thread-safe: the application may answer from any thread, once:
// Respond(), or StartStream() + Write()... + End().
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual const Request& request() const = 0;
  virtual void Respond(Response response) = 0;
  // Sends the status and headers of a chunked response (body: Write's pieces).
  virtual void StartStream(Response head) = 0;
  // Queues a piece of a streamed body. False once the client is gone (disconnected, or over
  // max_unsent_bytes behind): the caller should stop.
  virtual bool Write(std::string piece) = 0;
  virtual void End() = 0;
  // True once the connection closed (the client went away, a write timed out, Stop()).
  virtual bool Gone() const = 0;
};

// What the access log records of each request the server answered (or gave up on).
struct LogEntry {
  std::string method, path, id, client;
  int status = 0;         // 499: the client went away before the answer was complete
  uint64_t bytes = 0;     // body bytes sent (a stream: every piece)
  double ms = 0;          // from the end of the request head to the last byte written
  size_t body_bytes = 0;  // of the request
};

struct Callbacks {
  // Called with the head (body still unread; `content_length` -1 if chunked or absent). A
  // response refuses the request without reading its body (the connection then closes).
  std::function<std::optional<Response>(const Request&, int64_t content_length)> head_check;
  // Called with the whole request, on an I/O thread: answer quickly, or hand the Exchange to
  // another thread.
  std::function<void(std::shared_ptr<Exchange>)> handler;
  // Called once per answered request, on an I/O thread.
  std::function<void(const LogEntry&)> log;
  // An error body for the errors the layer produces itself (400, 408, 413, 431).
  std::function<Response(int status, const std::string& message, const std::string& code)> error;
};

class Server {
 public:
  Server(Limits limits, Callbacks callbacks);
  ~Server();  // stops; sessions still open are closed
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (port 0: a free one); returns the port. Errors: kIoError.
  StatusOr<int> Bind(const std::string& host, int port);
  // Runs the I/O threads until Stop(). REQUIRES: Bind succeeded.
  void Run();
  // Stops accepting, closes every connection, makes Run() return. Any thread.
  void Stop();
  int open_connections() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ocular::server::http
