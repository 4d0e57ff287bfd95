#include "server/request_scan.h"

#include <string>

#include "gtest/gtest.h"

namespace neupims::server {
namespace {

constexpr size_t kMax = 64 << 10;
constexpr size_t kMaxBody = 1 << 20;

// Feeds `request` a byte at a time; returns how many bytes had come when the scan was first
// Ready (request.size() + 1 if never).
size_t ReadyAfter(const std::string& request, size_t max_bytes = kMax, size_t max_body = kMaxBody) {
  RequestScan scan(max_bytes, max_body);
  for (size_t n = 0; n <= request.size(); ++n) {
    if (scan.Ready(absl::string_view(request).substr(0, n))) return n;
  }
  return request.size() + 1;
}

TEST(RequestScanTest, AHeadIsReadyAtItsBlankLine) {
  const std::string head = "GET /v1/models HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head), head.size());
  RequestScan scan(kMax, kMaxBody);
  ASSERT_TRUE(scan.Ready(head + "GET /health"));  // a pipelined request's bytes may follow
  EXPECT_EQ(scan.head_bytes(), head.size());
}

TEST(RequestScanTest, ABodyIsAwaitedToItsContentLength) {
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-length:  12 \r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + "{\"prompt\":1}"), head.size() + 12);
}

TEST(RequestScanTest, AMethodWithoutContentIsReadyAtItsHeadWhateverItsContentLength) {
  const std::string head = "GET /health HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + "hello"), head.size());
}

TEST(RequestScanTest, ABodyHttplibCannotMeasureAsWeDoIsLeftToItAfterTheHead) {
  // "Expect: 100-continue": the client waits for the server's "100 Continue" before its body. A
  // Content-Length that is not plain digits: httplib's strtoull reads it its own way.
  for (const char* header :
       {"Expect: 100-continue\r\n", "Content-Length: 1x\r\n", "Content-Length: +3\r\n"}) {
    const std::string head = std::string("POST /v1/completions HTTP/1.1\r\n") + header + "\r\n";
    EXPECT_EQ(ReadyAfter(head + "abc"), head.size()) << header;
  }
}

TEST(RequestScanTest, TheFirstContentLengthCountsAsHttplibReadsIt) {
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + "abcde"), head.size() + 3);
}

TEST(RequestScanTest, OtherExpectAndTransferEncodingValuesDoNotChangeTheFraming) {
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nExpect: something\r\nTransfer-Encoding: gzip\r\n"
      "Content-Length: 4\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + "abcd"), head.size() + 4);
}

TEST(RequestScanTest, AChunkedBodyIsAwaitedToItsTrailersEnd) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n";
  const std::string body = "4;ext=1\r\nabcd\r\n0\r\nX-Trailer: 1\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + body), head.size() + body.size());
  // A chunk's data may hold line ends; only its length counts.
  const std::string lines = "5\r\n\r\n\nab\r\n0\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + lines), head.size() + lines.size());
}

TEST(RequestScanTest, AChunkFramingErrorIsLeftToHttplibsRefusalAtOnce) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + "zz\r\nmore"), head.size() + 4);     // not a size
  EXPECT_EQ(ReadyAfter(head + "2\r\nabXY\r\n"), head.size() + 9);  // no CRLF after the data
}

TEST(RequestScanTest, ABodyWithoutALengthIsReadToTheStreamsEndSoOnlyMaxBytesEndsTheScan) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + std::string(100, 'a'), /*max_bytes=*/120), 120u);
}

TEST(RequestScanTest, AHeaderLineWithoutAColonIsSkippedAsHttplibSkipsIt) {
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\nfoo\r\n\r\n";
  EXPECT_EQ(ReadyAfter(request), request.size());
}

TEST(RequestScanTest, ABodyOverThePayloadLimitIsLeftToHttplibsRefusal) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + std::string(100, 'a'), kMax, /*max_body=*/99), head.size());
}

TEST(RequestScanTest, NoMoreThanMaxBytesIsAwaited) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\nContent-Length: 500\r\n\r\n";
  EXPECT_EQ(ReadyAfter(head + std::string(500, 'a'), /*max_bytes=*/200), 200u);
  EXPECT_EQ(ReadyAfter("GET / HTTP/1.1\r\n" + std::string(300, 'h'), /*max_bytes=*/200), 200u);
}

TEST(RequestScanTest, WhatHttplibRefusesIsHandedOverAtOnce) {
  // A request line that is not "method target HTTP/1.x" with CRLF.
  EXPECT_EQ(ReadyAfter("garbage\r\nHost: x\r\n\r\n"), 9u);
  EXPECT_EQ(ReadyAfter("GET / HTTP/1.1\nHost: x\r\n\r\n"), 15u);
  EXPECT_EQ(ReadyAfter("GET / HTTP/2.0\r\nHost: x\r\n\r\n"), 16u);
  EXPECT_EQ(ReadyAfter("\r\nGET / HTTP/1.1\r\n\r\n"), 2u);
  EXPECT_EQ(ReadyAfter("FOO /health HTTP/1.1\r\nHost: x\r\n\r\n"), 22u);  // not its method
  EXPECT_EQ(ReadyAfter("GET /health?a?b HTTP/1.1\r\nHost: x\r\n\r\n"), 26u);
  constexpr char kNul[] = "GET /a\0b HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(ReadyAfter(std::string(kNul, sizeof kNul - 1)), 19u);
  // A header line over httplib's 8 KiB.
  const std::string line = "GET / HTTP/1.1\r\n";
  const std::string long_header = "X: " + std::string(8200, 'a') + "\r\n";
  EXPECT_EQ(ReadyAfter(line + long_header + "\r\n"), line.size() + long_header.size());
}

TEST(RequestScanTest, AHeaderLineEndingInABareLineFeedIsSkippedAsHttplibSkipsIt) {
  // "\n" alone does not end the head for httplib (it skips the line); "\r\n" does.
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\n\r\n";
  EXPECT_EQ(ReadyAfter(request), request.size());
}

TEST(RequestScanTest, ScanningInPiecesGivesTheSameAnswerAsAtOnce) {
  const std::string request =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd";
  for (size_t cut = 0; cut <= request.size(); ++cut) {
    RequestScan scan(kMax, kMaxBody);
    const bool first = scan.Ready(absl::string_view(request).substr(0, cut));
    EXPECT_EQ(first, cut == request.size()) << cut;
    EXPECT_TRUE(scan.Ready(request)) << cut;
  }
}

}  // namespace
}  // namespace neupims::server
