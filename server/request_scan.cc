#include "server/request_scan.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace neupims::server {
namespace {

// httplib's CPPHTTPLIB_HEADER_MAX_LENGTH: a longer header (or trailer) line ends its reading.
constexpr size_t kMaxHeaderLine = 8192;

bool IsSpaceOrTab(char c) { return c == ' ' || c == '\t'; }

// The methods httplib's parse_request_line accepts.
bool IsHttplibMethod(absl::string_view m) {
  for (absl::string_view known :
       {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"}) {
    if (m == known) return true;
  }
  return false;
}

}  // namespace

bool RequestScan::Ready(absl::string_view received) {
  if (ready_) return true;
  while (!head_end_.has_value()) {
    const std::optional<absl::string_view> line = NextLine(received);
    if (!line.has_value()) {
      // The head is not complete: wait, unless that would hold more than max_bytes_.
      return ready_ = received.size() >= max_bytes_;
    }
    if (!OnHeadLine(*line)) return ready_ = true;
    if (head_end_.has_value() && !StartBody()) return ready_ = true;
  }
  if (ScanBody(received)) return ready_ = true;
  return ready_ = received.size() >= max_bytes_;
}

std::optional<absl::string_view> RequestScan::NextLine(absl::string_view received) {
  const size_t end = received.find('\n', at_);
  if (end == absl::string_view::npos) return std::nullopt;
  const absl::string_view line = received.substr(at_, end + 1 - at_);
  at_ = end + 1;
  return line;
}

bool RequestScan::OnHeadLine(absl::string_view line) {
  if (!request_line_done_) {
    request_line_done_ = true;
    return OnRequestLine(line);
  }
  if (!absl::EndsWith(line, "\r\n")) return true;  // httplib skips it
  if (line.size() == 2) {
    head_end_ = at_;
    return true;
  }
  if (line.size() > kMaxHeaderLine) return false;
  line.remove_suffix(2);
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return true;  // not a header: httplib skips it
  absl::string_view value = line.substr(colon + 1);
  while (!value.empty() && IsSpaceOrTab(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsSpaceOrTab(value.back())) value.remove_suffix(1);
  OnHeader(line.substr(0, colon), value);
  return true;
}

bool RequestScan::OnRequestLine(absl::string_view line) {
  if (!absl::EndsWith(line, "\r\n")) return false;
  line.remove_suffix(2);
  if (absl::StrContains(line, '\0')) return false;
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (parts.size() != 3 || !IsHttplibMethod(parts[0]) ||
      (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0")) {
    return false;
  }
  // httplib refuses a target with more than one '?' (its path and query split).
  if (std::count(parts[1].begin(), parts[1].end(), '?') > 1) return false;
  for (absl::string_view m : {"POST", "PUT", "PATCH", "DELETE", "PRI"}) {
    if (parts[0] == m) carries_content_ = true;
  }
  return true;
}

// httplib reads a header by its first occurrence (names compared without case).
void RequestScan::OnHeader(absl::string_view name, absl::string_view value) {
  if (absl::EqualsIgnoreCase(name, "Expect")) {
    expect_continue_ = expect_continue_ || value == "100-continue";
  } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
    if (!chunked_.has_value()) chunked_ = absl::EqualsIgnoreCase(value, "chunked");
  } else if (absl::EqualsIgnoreCase(name, "Content-Length")) {
    if (content_length_.has_value() || content_length_bad_) return;
    uint64_t n = 0;
    const bool digits =
        !value.empty() && std::all_of(value.begin(), value.end(), absl::ascii_isdigit);
    if (digits && absl::SimpleAtoi(value, &n)) {
      content_length_ = n;
    } else {
      content_length_bad_ = true;  // httplib's strtoull would read it its own way
    }
  }
}

bool RequestScan::StartBody() {
  if (!carries_content_) return true;  // body_ stays kNone
  // httplib answers "100 Continue" (or refuses) before the body, which its client awaits.
  if (expect_continue_) return false;
  if (chunked_.value_or(false)) {
    body_ = Body::kChunkSize;
  } else if (content_length_.has_value()) {
    if (*content_length_ > max_body_bytes_) return false;  // refused (413) after the head
    body_ = Body::kLength;
    body_left_ = *content_length_;
  } else if (content_length_bad_) {
    return false;
  } else {
    body_ = Body::kToEnd;
  }
  return true;
}

bool RequestScan::ScanBody(absl::string_view received) {
  for (;;) {
    switch (body_) {
      case Body::kNone:
        return true;
      case Body::kToEnd:
        return false;  // the gathering ends at the stream's end (or max_bytes_)
      case Body::kLength:
      case Body::kChunkData: {
        const uint64_t n = std::min<uint64_t>(body_left_, received.size() - at_);
        at_ += n;
        body_left_ -= n;
        if (body_left_ > 0) return false;
        body_ = body_ == Body::kLength ? Body::kNone : Body::kChunkEnd;
        break;
      }
      case Body::kChunkSize: {
        const std::optional<absl::string_view> line = NextLine(received);
        if (!line.has_value()) return false;
        // httplib reads the size with strtoul (base 16), whatever follows it.
        const std::string text(*line);
        char* end = nullptr;
        const unsigned long size = std::strtoul(text.c_str(), &end, 16);
        if (end == text.c_str() || size == ULONG_MAX) return true;  // refused
        body_ = size == 0 ? Body::kTrailer : Body::kChunkData;
        body_left_ = size;
        break;
      }
      case Body::kChunkEnd: {
        const std::optional<absl::string_view> line = NextLine(received);
        if (!line.has_value()) return false;
        if (*line != "\r\n") return true;  // refused
        body_ = Body::kChunkSize;
        break;
      }
      case Body::kTrailer: {
        const std::optional<absl::string_view> line = NextLine(received);
        if (!line.has_value()) return false;
        if (*line == "\r\n" || line->size() > kMaxHeaderLine) body_ = Body::kNone;
        break;
      }
    }
  }
}

}  // namespace neupims::server
