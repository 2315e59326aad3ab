#include "http.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>

namespace ocular::server::http {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// A client's X-Request-Id if it is plain (1-64 of [A-Za-z0-9._-]), else "".
std::string PlainId(std::string_view v) {
  if (v.empty() || v.size() > 64) return "";
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return "";
  }
  return std::string(v);
}

// Bodies over this are freed with malloc_trim afterwards, so the server's RSS goes back down.
constexpr size_t kTrimAfterBytes = 1u << 20;

}  // namespace

std::string Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return v;
  }
  return "";
}

class Session;

struct Server::Impl {
  Impl(Limits l, Callbacks c) : limits(l), cb(std::move(c)) {}

  Limits limits;
  Callbacks cb;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{1};
  std::string id_prefix;

  // Every open session (weak: a session owns a reference to this, not the other way round).
  mutable std::mutex mu;
  std::list<std::weak_ptr<Session>> sessions;
  std::map<std::string, int> per_client;
  int open = 0;

  void Accept();
  void OnAccept(tcp::socket socket);
  // Under mu: closes the oldest session waiting for a request head of `client` (or of the
  // client holding the most connections if `client` is empty). False if there is none.
  bool EvictFor(const std::string& client);
  void Unregister(std::list<std::weak_ptr<Session>>::iterator it, const std::string& client);
};

// One connection: reads a request, hands it to the application, writes the answer, repeats
// (keep-alive). Every step runs on the connection's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl* server, tcp::socket socket, std::string client)
      : server_(server),
        stream_(std::move(socket)),
        deadline_(stream_.get_executor()),
        write_deadline_(stream_.get_executor()),
        buffer_(server_->limits.max_header_bytes + (64u << 10)),
        client_(std::move(client)) {}

  void Start(std::list<std::weak_ptr<Session>>::iterator it) {
    registry_ = it;
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHead(); });
  }
  // Any thread.
  void CloseSoon() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
  }
  bool waiting_for_head() const { return waiting_head_.load(); }
  int64_t waiting_since() const { return waiting_since_.load(); }
  const std::string& client() const { return client_; }

  // Exchange calls, posted to the strand.
  void Respond(Response r);
  void StartStream(Response head);
  void QueueChunk(std::string piece);
  void QueueEnd();
  bool Gone() const { return gone_.load(); }
  bool Reserve(size_t n) {  // a stream piece enters the unsent output
    if (unsent_.fetch_add(n) + n > server_->limits.max_unsent_bytes) {
      gone_ = true;
      CloseSoon();
      return false;
    }
    return true;
  }

 private:
  struct Out {
    enum Kind { kFull, kHead, kChunk, kLast } kind;
    std::shared_ptr<bhttp::response<bhttp::string_body>> full;
    std::shared_ptr<bhttp::response<bhttp::empty_body>> head;
    std::shared_ptr<bhttp::response_serializer<bhttp::empty_body>> serializer;
    std::string data;
  };

  const Limits& limits() const { return server_->limits; }
  void ArmDeadline(double seconds);
  void ArmWriteDeadline();
  void ReadHead();
  void OnHead(beast::error_code ec);
  void ReadBody();
  void OnBody(beast::error_code ec);
  void Dispatch();
  void Watch();
  void OnWatch(beast::error_code ec, size_t n);
  void Fail(int status, const std::string& message, const std::string& code);
  void Push(Out out);
  void WriteNext();
  void OnWritten(beast::error_code ec, size_t n);
  void Finish();
  void Log(int status);
  void Linger();
  void OnLinger(beast::error_code ec, size_t n);
  void DoRespond(Response r);
  void DoStartStream(Response head);
  void Close();

  // Outlives every session that can still run: Server::Impl owns the io_context whose handlers
  // own the sessions, and the application holds no Exchange past its own shutdown.
  Server::Impl* server_;
  beast::tcp_stream stream_;
  net::steady_timer deadline_;        // reading a request head or body
  net::steady_timer write_deadline_;  // writing an answer
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string client_;
  std::list<std::weak_ptr<Session>>::iterator registry_;

  std::atomic<bool> waiting_head_{false};
  std::atomic<int64_t> waiting_since_{0};
  std::atomic<bool> gone_{false};
  std::atomic<size_t> unsent_{0};
  bool timed_out_ = false;
  bool closed_ = false;
  bool keep_alive_ = false;
  bool in_exchange_ = false;  // a request is with the application or being answered
  bool answered_ = false;     // its answer was started
  bool watching_ = false;     // a read waits for the client to go away during the exchange
  bool resume_after_watch_ = false;
  bool watch_saw_eof_ = false;
  bool lingering_ = false;
  static constexpr size_t kDropBytes = 16384;
  std::unique_ptr<char[]> drop_;  // what Linger reads into
  size_t dropped_ = 0;
  std::deque<Out> out_;
  bool writing_ = false;
  Request pending_;  // the request whose body is being read
  // The request being answered, for the log.
  std::string method_, path_, id_;
  size_t body_bytes_ = 0;
  int status_ = 0;
  uint64_t bytes_ = 0;
  Clock::time_point started_;
};

class ExchangeImpl : public Exchange {
 public:
  ExchangeImpl(std::shared_ptr<Session> s, Request r) : s_(std::move(s)), req_(std::move(r)) {}
  ~ExchangeImpl() override {
    if (req_.body.capacity() > kTrimAfterBytes) {
      std::string().swap(req_.body);
      malloc_trim(0);  // give the pages of a large body back to the system
    }
  }
  const Request& request() const override { return req_; }
  void Respond(Response r) override { s_->Respond(std::move(r)); }
  void StartStream(Response head) override { s_->StartStream(std::move(head)); }
  bool Write(std::string piece) override {
    if (s_->Gone() || !s_->Reserve(piece.size())) return false;
    s_->QueueChunk(std::move(piece));
    return true;
  }
  void End() override { s_->QueueEnd(); }
  bool Gone() const override { return s_->Gone(); }

 private:
  std::shared_ptr<Session> s_;
  Request req_;
};

void Session::ArmDeadline(double seconds) {
  timed_out_ = false;
  deadline_.expires_after(Seconds(seconds));
  deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_) return;  // cancelled: the read finished in time
    self->timed_out_ = true;
    beast::error_code ignored;
    self->stream_.socket().cancel(ignored);  // the read completes with operation_aborted
  });
}

// A write that does not complete in time (the client stopped reading) ends the connection.
// (The stream's own timers are not used: they would also end the read that watches for the
// client going away.)
void Session::ArmWriteDeadline() {
  write_deadline_.expires_after(Seconds(limits().write_timeout_s));
  write_deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && !self->closed_) self->Close();
  });
}

void Session::ReadHead() {
  if (closed_) return;
  if (server_->stopping) return Close();
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(limits().max_header_bytes));
  parser_->body_limit(limits().max_body_bytes);
  waiting_head_ = true;
  waiting_since_ = Clock::now().time_since_epoch().count();
  ArmDeadline(limits().head_timeout_s);
  bhttp::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHead(ec); });
}

void Session::OnHead(beast::error_code ec) {
  waiting_head_ = false;
  deadline_.cancel();
  if (closed_) return;
  started_ = Clock::now();
  method_.clear(), path_.clear(), id_.clear(), body_bytes_ = 0, status_ = 0, bytes_ = 0;
  answered_ = false;
  keep_alive_ = false;
  if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::connection_reset) {
    return Close();
  }
  if (ec && timed_out_) {
    if (buffer_.size() == 0) return Close();  // an idle keep-alive connection: nothing to say
    return Fail(408, "the request head did not arrive within the server's deadline",
                "request_timeout");
  }
  if (ec == bhttp::error::body_limit) {
    return Fail(413,
                StrCat("the request body is over the size limit of ", limits().max_body_bytes,
                       " bytes (Content-Length)"),
                "request_too_large");
  }
  if (ec == bhttp::error::header_limit) {
    return Fail(431, StrCat("the request head is over ", limits().max_header_bytes, " bytes"),
                "request_header_too_large");
  }
  if (ec) return Fail(400, StrCat("malformed HTTP request (", ec.message(), ")"), "bad_http");
  const auto& h = parser_->get();
  Request req;
  req.method = std::string(h.method_string());
  const std::string_view target(h.target().data(), h.target().size());
  const size_t q = target.find('?');
  req.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));
  for (const auto& f : h) {
    req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  req.client = client_;
  req.id = PlainId(req.Header("X-Request-Id"));
  if (req.id.empty()) req.id = StrCat(server_->id_prefix, "-", server_->next_id++);
  method_ = req.method, path_ = req.path, id_ = req.id;
  in_exchange_ = true;
  const bool chunked = parser_->chunked();
  const int64_t length =
      parser_->content_length() ? static_cast<int64_t>(*parser_->content_length()) : -1;
  const bool has_body = chunked || length > 0;
  keep_alive_ = parser_->keep_alive();
  if (server_->cb.head_check) {
    if (std::optional<Response> refused = server_->cb.head_check(req, chunked ? -1 : length)) {
      if (has_body) keep_alive_ = false;  // its body is not read
      return Respond(std::move(*refused));
    }
  }
  pending_ = std::move(req);
  if (!has_body) return Dispatch();
  if (IEquals(pending_.Header("Expect"), "100-continue")) {
    auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, 11);
    ArmWriteDeadline();
    return bhttp::async_write(stream_, *cont,
                              [self = shared_from_this(), cont](beast::error_code e, size_t) {
                                self->write_deadline_.cancel();
                                if (e) return self->Close();
                                self->ReadBody();
                              });
  }
  ReadBody();
}

void Session::ReadBody() {
  if (closed_) return;
  ArmDeadline(limits().body_timeout_s);
  bhttp::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
}

void Session::OnBody(beast::error_code ec) {
  deadline_.cancel();
  if (closed_) return;
  if (ec && timed_out_) {
    return Fail(408,
                StrCat("the request body did not arrive within the server's deadline of ",
                       limits().body_timeout_s, " s"),
                "request_timeout");
  }
  if (ec == bhttp::error::body_limit) {
    return Fail(
        413,
        StrCat("the request body is over the size limit of ", limits().max_body_bytes, " bytes"),
        "request_too_large");
  }
  if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::connection_reset) {
    return Close();
  }
  if (ec) return Fail(400, StrCat("malformed request body (", ec.message(), ")"), "bad_http");
  pending_.body = std::move(parser_->get().body());
  Dispatch();
}

void Session::Dispatch() {
  body_bytes_ = pending_.body.size();
  keep_alive_ = keep_alive_ && parser_->keep_alive();
  parser_.reset();
  auto exchange = std::make_shared<ExchangeImpl>(shared_from_this(), std::move(pending_));
  pending_ = Request();
  Watch();
  server_->cb.handler(std::move(exchange));
}

// While the application works, a read waits for the client: an end of stream or a reset means
// it went away (Gone(): its generation stops). Pipelined bytes stay in the buffer for later.
void Session::Watch() {
  const size_t room = buffer_.max_size() - buffer_.size();
  if (room == 0 || closed_) return;
  watching_ = true;
  stream_.async_read_some(
      buffer_.prepare(std::min<size_t>(room, 4096)),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnWatch(ec, n); });
}

void Session::OnWatch(beast::error_code ec, size_t n) {
  watching_ = false;
  buffer_.commit(n);
  if (closed_) return;
  if (lingering_) return Linger();
  if (ec && ec != net::error::operation_aborted) watch_saw_eof_ = true;
  if (resume_after_watch_) {  // the answer is complete: on to the next request
    resume_after_watch_ = false;
    return watch_saw_eof_ ? Close() : ReadHead();
  }
  if (!watch_saw_eof_) return;
  // The whole answer is already with the socket: a client that read it and hung up before this
  // write's completion ran got its answer, so OnWritten logs it as answered (not 499) and closes.
  if (writing_ && !out_.empty() &&
      (out_.front().kind == Out::kFull || out_.front().kind == Out::kLast)) {
    return;
  }
  gone_ = true;  // the client went away while its request was being worked on
  Close();
}

void Session::Fail(int status, const std::string& message, const std::string& code) {
  keep_alive_ = false;
  in_exchange_ = true;
  if (method_.empty()) {  // the head was not understood: logged as "-"
    method_ = path_ = "-";
    id_ = StrCat(server_->id_prefix, "-", server_->next_id++);
  }
  Respond(server_->cb.error(status, message, code));
}

void Session::Respond(Response r) {
  net::post(stream_.get_executor(), [self = shared_from_this(), r = std::move(r)]() mutable {
    self->DoRespond(std::move(r));
  });
}

void Session::DoRespond(Response r) {
  if (closed_ || answered_) return;
  answered_ = true;
  auto m = std::make_shared<bhttp::response<bhttp::string_body>>(
      static_cast<bhttp::status>(r.status), 11);
  m->set(bhttp::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) m->set(k, v);
  m->set("X-Request-Id", id_);
  m->body() = std::move(r.body);
  m->keep_alive(keep_alive_ && !server_->stopping);
  m->prepare_payload();
  status_ = r.status;
  bytes_ = m->body().size();
  Push({Out::kFull, std::move(m), nullptr, nullptr, {}});
}

void Session::StartStream(Response r) {
  net::post(stream_.get_executor(), [self = shared_from_this(), r = std::move(r)]() mutable {
    self->DoStartStream(std::move(r));
  });
}

void Session::DoStartStream(Response r) {
  if (closed_ || answered_) return;
  answered_ = true;
  auto m = std::make_shared<bhttp::response<bhttp::empty_body>>(
      static_cast<bhttp::status>(r.status), 11);
  m->set(bhttp::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) m->set(k, v);
  m->set("X-Request-Id", id_);
  m->keep_alive(keep_alive_ && !server_->stopping);
  m->chunked(true);
  status_ = r.status;
  auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*m);
  Push({Out::kHead, nullptr, std::move(m), std::move(serializer), {}});
}

void Session::QueueChunk(std::string piece) {
  net::post(stream_.get_executor(), [self = shared_from_this(), p = std::move(piece)]() mutable {
    if (self->closed_) return;
    self->Push({Out::kChunk, nullptr, nullptr, nullptr, std::move(p)});
  });
}

void Session::QueueEnd() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    self->Push({Out::kLast, nullptr, nullptr, nullptr, {}});
  });
}

void Session::Push(Out out) {
  out_.push_back(std::move(out));
  WriteNext();
}

void Session::WriteNext() {
  if (writing_ || out_.empty() || closed_) return;
  writing_ = true;
  Out& o = out_.front();
  ArmWriteDeadline();
  auto done = [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->OnWritten(ec, n);
  };
  switch (o.kind) {
    case Out::kFull:
      return bhttp::async_write(stream_, *o.full, std::move(done));
    case Out::kHead:
      return bhttp::async_write_header(stream_, *o.serializer, std::move(done));
    case Out::kChunk:
      return net::async_write(stream_, bhttp::make_chunk(net::buffer(o.data)), std::move(done));
    case Out::kLast:
      return net::async_write(stream_, bhttp::make_chunk_last(), std::move(done));
  }
}

void Session::OnWritten(beast::error_code ec, size_t) {
  writing_ = false;
  write_deadline_.cancel();
  if (closed_) return;
  if (ec) {
    gone_ = true;
    return Close();
  }
  const Out::Kind kind = out_.front().kind;
  if (kind == Out::kChunk) {
    bytes_ += out_.front().data.size();
    unsent_ -= out_.front().data.size();
  }
  out_.pop_front();
  if (kind == Out::kFull || kind == Out::kLast) return Finish();
  WriteNext();
}

// The answer is written: log it, then the next request on this connection, or close.
void Session::Finish() {
  Log(status_);
  in_exchange_ = false;
  if (!keep_alive_ || server_->stopping) return Linger();
  if (watching_) {
    resume_after_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);  // OnWatch resumes
    return;
  }
  if (watch_saw_eof_) return Close();
  ReadHead();
}

void Session::Log(int status) {
  if (!server_->cb.log || method_.empty()) return;
  LogEntry e;
  e.method = method_, e.path = path_, e.id = id_, e.client = client_;
  e.status = status;
  e.bytes = bytes_;
  e.ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
  e.body_bytes = body_bytes_;
  server_->cb.log(e);
}

// After the last answer on a connection: stop sending, then read and drop what the client still
// sends (an unread body) for a moment, so that closing does not reset the connection before the
// client has read the answer.
void Session::Linger() {
  lingering_ = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  if (watching_) {  // OnWatch comes back here
    stream_.socket().cancel(ignored);
    return;
  }
  ArmDeadline(2);
  drop_ = std::make_unique<char[]>(kDropBytes);
  stream_.socket().async_read_some(
      net::buffer(drop_.get(), kDropBytes),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnLinger(ec, n); });
}

void Session::OnLinger(beast::error_code ec, size_t n) {
  dropped_ += n;
  if (ec || closed_ || timed_out_ || dropped_ > (8u << 20)) return Close();
  stream_.socket().async_read_some(
      net::buffer(drop_.get(), kDropBytes),
      [self = shared_from_this()](beast::error_code e, size_t m) { self->OnLinger(e, m); });
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  gone_ = true;
  if (in_exchange_ && !method_.empty()) Log(499);  // the client did not get (all of) its answer
  in_exchange_ = false;
  deadline_.cancel();
  write_deadline_.cancel();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  // out_ stays: a write in flight still reads its front (it completes with an error).
  std::lock_guard<std::mutex> lock(server_->mu);
  server_->Unregister(registry_, client_);
}

void Server::Impl::Unregister(std::list<std::weak_ptr<Session>>::iterator it,
                              const std::string& client) {
  sessions.erase(it);
  if (--per_client[client] <= 0) per_client.erase(client);
  --open;
}

bool Server::Impl::EvictFor(const std::string& client) {
  std::string who = client;
  if (who.empty()) {  // the client holding the most connections that has one waiting
    int most = 0;
    for (const auto& w : sessions) {
      auto s = w.lock();
      if (s && s->waiting_for_head() && per_client[s->client()] > most) {
        most = per_client[s->client()];
        who = s->client();
      }
    }
    if (who.empty()) return false;
  }
  std::shared_ptr<Session> oldest;
  for (const auto& w : sessions) {
    auto s = w.lock();
    if (s && s->client() == who && s->waiting_for_head() &&
        (!oldest || s->waiting_since() < oldest->waiting_since())) {
      oldest = s;
    }
  }
  if (!oldest) return false;
  oldest->CloseSoon();
  return true;
}

void Server::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [self = this](beast::error_code ec, tcp::socket s) {
    if (!self->acceptor.is_open()) return;
    if (ec) {  // out of file descriptors, mostly: try again in a moment
      self->accept_retry.expires_after(std::chrono::milliseconds(50));
      self->accept_retry.async_wait([self](beast::error_code e) {
        if (!e) self->Accept();
      });
      return;
    }
    self->OnAccept(std::move(s));
    self->Accept();
  });
}

void Server::Impl::OnAccept(tcp::socket socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;
  std::string client = peer.address().to_string();
  socket.set_option(tcp::no_delay(true), ec);
  std::lock_guard<std::mutex> lock(mu);
  // At a cap, a connection that has not sent a request yet makes room, the oldest of the
  // client holding the most; if every connection is busy with a request, the new one is
  // refused (closed at once).
  if (per_client[client] >= limits.max_connections_per_client && !EvictFor(client)) return;
  if (open >= limits.max_connections && !EvictFor("")) return;
  auto session = std::make_shared<Session>(this, std::move(socket), client);
  sessions.push_front(session);
  ++per_client[client];
  ++open;
  session->Start(sessions.begin());
}

Server::Server(Limits limits, Callbacks callbacks)
    : impl_(std::make_unique<Impl>(limits, std::move(callbacks))) {
  // Connections need file descriptors: raise the soft limit to the hard one, and keep the cap
  // below what is there (room for the model files and the engine).
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    if (nofile.rlim_cur < nofile.rlim_max) {
      nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 1 << 16);
      ::setrlimit(RLIMIT_NOFILE, &nofile);
      ::getrlimit(RLIMIT_NOFILE, &nofile);
    }
    const auto fit = static_cast<int64_t>(nofile.rlim_cur) - 64;
    impl_->limits.max_connections =
        static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(limits.max_connections, fit)));
  }
  char prefix[16];
  std::snprintf(
      prefix, sizeof prefix, "%06x",
      static_cast<unsigned>((::getpid() ^ Clock::now().time_since_epoch().count()) & 0xffffff));
  impl_->id_prefix = prefix;
}

Server::~Server() { Stop(); }

StatusOr<int> Server::Bind(const std::string& host, int port) {
  auto fail = [&](const std::string& why) {
    return Error(StatusCode::kIoError, "serve", "cannot listen on ", host, ":", port, " (", why,
                 ")");
  };
  beast::error_code ec;
  tcp::resolver resolver(impl_->ioc);
  const auto found = resolver.resolve(host, std::to_string(port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) return fail("not an address of this machine");
  tcp::endpoint ep = found.begin()->endpoint();
  for (const auto& entry : found) {  // "localhost": 127.0.0.1 rather than ::1, as clients try
    if (entry.endpoint().address().is_v4()) {
      ep = entry.endpoint();
      break;
    }
  }
  tcp::acceptor& a = impl_->acceptor;
  if (a.open(ep.protocol(), ec); ec) return fail(ec.message());
  a.set_option(net::socket_base::reuse_address(true), ec);
  if (a.bind(ep, ec); ec) return fail(ec.message());
  if (a.listen(net::socket_base::max_listen_connections, ec); ec) return fail(ec.message());
  return static_cast<int>(a.local_endpoint().port());
}

void Server::Run() {
  Impl& im = *impl_;
  net::post(im.ioc, [&im] { im.Accept(); });
  std::vector<std::thread> threads;
  for (int i = 1; i < im.limits.io_threads; ++i) threads.emplace_back([&im] { im.ioc.run(); });
  im.ioc.run();
  for (std::thread& t : threads) t.join();
}

void Server::Stop() {
  impl_->stopping = true;
  net::post(impl_->ioc, [self = impl_.get()] {
    beast::error_code ignored;
    self->acceptor.close(ignored);
    self->accept_retry.cancel();
    std::vector<std::shared_ptr<Session>> open;
    {
      std::lock_guard<std::mutex> lock(self->mu);
      for (const auto& w : self->sessions) {
        if (auto s = w.lock()) open.push_back(std::move(s));
      }
    }
    for (const auto& s : open) s->CloseSoon();
    // Closing runs on the sessions' strands; then nothing is left to wait for.
    net::post(self->ioc, [self] { self->ioc.stop(); });
  });
}

int Server::open_connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->open;
}

}  // namespace ocular::server::http
