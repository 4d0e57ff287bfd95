// RequestScan: whether an HTTP/1.1 request that is still arriving can be handed to cpp-httplib
// without httplib then waiting for its client.
//
// Why: httplib reads a request with blocking reads on the thread that serves the connection, so
// a client that sends part of a request and stops (slowloris) held that thread until the request
// read timeout. The HTTP API instead gathers a request's bytes first, and while it waits for the
// rest it can park the connection with the pool's watcher (openai_api.cc, BudgetedServer); it
// hands the request to httplib once this scan says httplib can read it all from what came.
//
// The scan follows httplib 0.11's reader (Server::process_request, detail::read_content): the
// request line, then header lines up to the first line that is exactly "\r\n" (a line ending in
// a bare "\n", or without a colon, is skipped by httplib, and so here); then, for a method that
// carries content (POST, PUT, PATCH, DELETE, PRI), the body as httplib reads it: chunked (the
// first Transfer-Encoding is "chunked": chunks to the last one and its trailer), else
// Content-Length bytes (the first Content-Length), else everything up to the end of the stream
// (the gathering then ends at the end of the stream). It never waits longer than httplib would:
// it is Ready at once where httplib stops reading to refuse the request (a request line it
// refuses, a header line over 8 KiB, a body over its payload limit, a chunk framing error), and
// it is Ready where httplib answers before the body ("Expect: 100-continue": its client waits
// for "100 Continue"), where it cannot tell the length as httplib does (a Content-Length that
// is not plain digits), or when waiting would pass `max_bytes`: httplib then reads the rest
// itself, as before, within the request read timeout.
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
  // What the body's framing expects next (after the head).
  enum class Body {
    kNone,       // nothing more: the request is complete at the head's end
    kLength,     // body_left_ bytes
    kToEnd,      // everything up to the end of the stream
    kChunkSize,  // a chunk-size line
    kChunkData,  // body_left_ bytes of a chunk
    kChunkEnd,   // the line that ends a chunk's data, exactly "\r\n"
    kTrailer,    // trailer lines, up to one that is exactly "\r\n"
  };

  // The next complete line of `received` from at_ (with its "\n"), advancing past it; nullopt
  // when the line has not all come.
  std::optional<absl::string_view> NextLine(absl::string_view received);
  // One line of the head; false when httplib stops reading at it.
  bool OnHeadLine(absl::string_view line);
  bool OnRequestLine(absl::string_view line);
  void OnHeader(absl::string_view name, absl::string_view value);
  // The body's framing once the head has ended; false when httplib refuses it after the head.
  bool StartBody();
  // Goes through the body's framing from at_; true when it is complete or httplib stops
  // reading it (ready_ then), false when more bytes are needed.
  bool ScanBody(absl::string_view received);

  const size_t max_bytes_;
  const size_t max_body_bytes_;
  bool ready_ = false;
  size_t at_ = 0;  // the first byte not yet scanned
  bool request_line_done_ = false;
  bool carries_content_ = false;  // the method's content is read (httplib's expect_content)
  bool expect_continue_ = false;  // "Expect: 100-continue"
  std::optional<bool> chunked_;   // the first Transfer-Encoding is "chunked"
  // The first Content-Length, if it is plain digits (nullopt with content_length_bad_ if not).
  std::optional<uint64_t> content_length_;
  bool content_length_bad_ = false;
  std::optional<size_t> head_end_;
  Body body_ = Body::kNone;
  uint64_t body_left_ = 0;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_REQUEST_SCAN_H_
