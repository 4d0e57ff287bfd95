// RequestScan: whether an HTTP/1.1 request that is still arriving can be handed to cpp-httplib
// without httplib then waiting for its client.
//
// Why: httplib reads a request with blocking reads on the thread that serves the connection, so
// a client that sends part of a request and stops (slowloris) held that thread until the request
// read timeout. The HTTP API instead gathers a request's bytes first, and while it waits for the
// rest it can park the connection with the pool's watcher (openai_api.cc, BudgetedServer); it
// hands the request to httplib once this scan says httplib can read it all from what came.
//
// The scan follows httplib 0.11's reader (Server::process_request): the request line, then
// header lines up to the first line that is exactly "\r\n" (a line ending in a bare "\n" is
// skipped by httplib, and so here); then, for a method that carries content (POST, PUT, PATCH,
// DELETE, PRI), exactly Content-Length bytes. It never waits longer than httplib would: it is
// Ready at once where httplib would stop reading (a request line or header line it refuses, a
// body over its payload limit), and it is Ready where the rest's length is not known up front
// (chunked, no Content-Length on a method with content, "Expect: 100-continue", whose client
// waits for the server's answer before its body) or would pass `max_bytes`: httplib then reads
// the rest itself, as before, within the request read timeout.
#ifndef NEUPIMS_SERVER_REQUEST_SCAN_H_
#define NEUPIMS_SERVER_REQUEST_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace neupims::server {

class RequestScan {
 public:
  // `max_bytes`: the most the scan waits for, head and body together (what a parked connection
  // may hold in memory); `max_body_bytes`: httplib's payload limit (a longer body is refused
  // after the head).
  RequestScan(size_t max_bytes, size_t max_body_bytes)
      : max_bytes_(max_bytes), max_body_bytes_(max_body_bytes) {}

  // `received`: the request's bytes so far, from its first; each call passes the same bytes and
  // perhaps more (the scan goes on from where it stopped). True once the request can be handed
  // over (see the file comment); from then on true.
  bool Ready(absl::string_view received);

  // Where the head ends in `received` (after its blank line), once it has.
  std::optional<size_t> head_bytes() const { return head_end_; }

 private:
  // One complete line (with its "\n"); false when httplib stops reading at it.
  bool OnLine(absl::string_view line);
  bool OnRequestLine(absl::string_view line);
  void OnHeader(absl::string_view name, absl::string_view value);

  const size_t max_bytes_;
  const size_t max_body_bytes_;
  bool ready_ = false;
  size_t line_start_ = 0;  // the first byte not yet in a complete line
  bool request_line_done_ = false;
  bool carries_content_ = false;  // the method's content is read (httplib's expect_content)
  // The body's length is not known from the head: chunked, an Expect header, a Content-Length
  // that is repeated or not a number.
  bool body_unknown_ = false;
  std::optional<uint64_t> content_length_;
  std::optional<size_t> head_end_;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_REQUEST_SCAN_H_
