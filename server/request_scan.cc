#include "server/request_scan.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace neupims::server {
namespace {

// httplib's CPPHTTPLIB_HEADER_MAX_LENGTH: a longer header line ends its reading.
constexpr size_t kMaxHeaderLine = 8192;

bool IsSpaceOrTab(char c) { return c == ' ' || c == '\t'; }

}  // namespace

bool RequestScan::Ready(absl::string_view received) {
  if (ready_) return true;
  while (!head_end_.has_value()) {
    const size_t end = received.find('\n', line_start_);
    if (end == absl::string_view::npos) {
      // The head is not complete: wait, unless that would hold more than max_bytes_.
      return ready_ = received.size() >= max_bytes_;
    }
    const absl::string_view line = received.substr(line_start_, end + 1 - line_start_);
    line_start_ = end + 1;
    if (!OnLine(line)) return ready_ = true;
  }
  if (body_unknown_ || !carries_content_) return ready_ = true;
  const uint64_t body = content_length_.value_or(0);
  if (body > max_body_bytes_ || !content_length_.has_value()) return ready_ = true;
  return ready_ = received.size() - *head_end_ >= body || received.size() >= max_bytes_;
}

bool RequestScan::OnLine(absl::string_view line) {
  if (!request_line_done_) {
    request_line_done_ = true;
    return OnRequestLine(line);
  }
  if (!absl::EndsWith(line, "\r\n")) return true;  // httplib skips it
  if (line.size() == 2) {
    head_end_ = line_start_;
    return true;
  }
  if (line.size() > kMaxHeaderLine) return false;
  line.remove_suffix(2);
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return false;  // not a header: left to httplib
  absl::string_view value = line.substr(colon + 1);
  while (!value.empty() && IsSpaceOrTab(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsSpaceOrTab(value.back())) value.remove_suffix(1);
  OnHeader(line.substr(0, colon), value);
  return true;
}

bool RequestScan::OnRequestLine(absl::string_view line) {
  if (!absl::EndsWith(line, "\r\n")) return false;
  line.remove_suffix(2);
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (parts.size() != 3 || (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0")) return false;
  for (absl::string_view m : {"POST", "PUT", "PATCH", "DELETE", "PRI"}) {
    if (parts[0] == m) carries_content_ = true;
  }
  return true;
}

void RequestScan::OnHeader(absl::string_view name, absl::string_view value) {
  if (absl::EqualsIgnoreCase(name, "Transfer-Encoding") || absl::EqualsIgnoreCase(name, "Expect")) {
    body_unknown_ = true;
  } else if (absl::EqualsIgnoreCase(name, "Content-Length")) {
    uint64_t n = 0;
    const bool digits =
        !value.empty() && std::all_of(value.begin(), value.end(), absl::ascii_isdigit);
    if (content_length_.has_value() || !digits || !absl::SimpleAtoi(value, &n)) {
      body_unknown_ = true;
    } else {
      content_length_ = n;
    }
  }
}

}  // namespace neupims::server
