// The soak's client side, shared by its two front ends: what a client saw (Counts) and one
// client thread's interface. bench/soak.cc drives gRPC Generate calls and runs the checks;
// bench/soak_http.cc drives the OpenAI-compatible HTTP API (`soak --front-end http`).
#ifndef NEUPIMS_BENCH_SOAK_H_
#define NEUPIMS_BENCH_SOAK_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "neupims/v1/llm_service.grpc.pb.h"
#include "tools/loadgen/openai_client.h"

namespace neupims::soak {

// What the client saw, per thread, merged at the end. Every call ends in exactly one of
// completed, aborted, rejected, refused, cancelled or deadline.
struct Counts {
  int64_t sent = 0;
  int64_t completed = 0;  // final message or chunk: length or stop
  int64_t aborted = 0;    // final message: aborted (Abort RPC, or a cancel the server saw first)
  int64_t rejected = 0;   // final message: rejected by the engine
  std::map<std::string, int64_t> refused;  // status code name -> calls
  int64_t cancelled = 0;                   // client TryCancel, or an HTTP client that hung up
  int64_t deadline = 0;
  int64_t deadline_without_message = 0;  // may never have reached the server
  int64_t malformed = 0;                 // a stream that broke the shape of a final message
  int64_t abort_rpcs = 0;
  std::string first_malformed;

  void Add(const Counts& o);
  int64_t refused_total() const;
  // Counts a call that broke the response's shape, keeping the first description.
  void Malformed(const std::string& problem);
};

// One client thread: takes call numbers from `next` until `total`, each a random scenario,
// and adds each finished call to `done`.
class SoakClient {
 public:
  virtual ~SoakClient() = default;
  virtual void Run() = 0;
  virtual const Counts& counts() const = 0;
};

// Where the HTTP front end's clients send their requests.
struct HttpTarget {
  loadgen::BaseUrl url;  // the API's base URL (http(s)://host:port), with its TLS and token
  // The server's gRPC service, for Abort calls on streamed completions by their id (the API's
  // `id` is the engine's request id), made with `url.auth_token`; null: that scenario is
  // replaced by a plain stream.
  neupims::v1::LlmService::Stub* grpc = nullptr;
};

// A client of the OpenAI-compatible HTTP API with its own keep-alive connection: streamed and
// whole completions and chat completions, hang-ups mid-stream, Abort RPCs and invalid requests.
std::unique_ptr<SoakClient> MakeHttpClient(const HttpTarget& target, int index, uint64_t seed,
                                           std::atomic<int64_t>* next, int64_t total,
                                           std::atomic<int64_t>* done);

}  // namespace neupims::soak

#endif  // NEUPIMS_BENCH_SOAK_H_
