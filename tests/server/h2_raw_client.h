// A raw HTTP/2 client for attack tests of the gRPC port: it writes frames byte for byte as told
// (a conforming library refuses to send a flood of CONTINUATION frames or a stream reset at once),
// and a background reader parses the server's frames enough to see its SETTINGS, GOAWAY,
// RST_STREAM, PING acknowledgements and how much DATA it sent. Headers are encoded as HPACK
// literals without indexing (RFC 7541 6.2.2), never Huffman coded; the server's header blocks are
// counted, not decoded.
#ifndef NEUPIMS_TESTS_SERVER_H2_RAW_CLIENT_H_
#define NEUPIMS_TESTS_SERVER_H2_RAW_CLIENT_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace neupims::testing_util {

enum class H2Type : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoAway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};

// Frame flags (RFC 9113 6).
inline constexpr uint8_t kH2EndStream = 0x1;
inline constexpr uint8_t kH2Ack = 0x1;
inline constexpr uint8_t kH2EndHeaders = 0x4;

// SETTINGS identifiers (RFC 9113 6.5.2).
inline constexpr uint16_t kH2SettingsMaxConcurrentStreams = 0x3;
inline constexpr uint16_t kH2SettingsInitialWindowSize = 0x4;
inline constexpr uint16_t kH2SettingsMaxHeaderListSize = 0x6;

inline constexpr uint32_t kH2RefusedStream = 0x7;
inline constexpr uint32_t kH2Cancel = 0x8;
inline constexpr uint32_t kH2EnhanceYourCalm = 0xb;

// ---- Encoders (pure functions).

// One frame: 24-bit length, type, flags, 31-bit stream id, payload.
std::string H2Frame(H2Type type, uint8_t flags, uint32_t stream_id, const std::string& payload);
std::string H2SettingsFrame(const std::vector<std::pair<uint16_t, uint32_t>>& settings);
std::string H2RstStreamFrame(uint32_t stream_id, uint32_t error_code);
std::string H2WindowUpdateFrame(uint32_t stream_id, uint32_t increment);
std::string H2PingFrame(uint64_t opaque, bool ack = false);
std::string H2GoAwayFrame(uint32_t last_stream_id, uint32_t error_code);
// An HPACK integer with an `prefix_bits`-bit prefix whose high bits are `first_byte_flags`.
std::string HpackInteger(uint64_t value, int prefix_bits, uint8_t first_byte_flags);
// A literal header field without indexing, new name, neither string Huffman coded.
std::string HpackLiteral(const std::string& name, const std::string& value);
// The header block of a gRPC call of `path` (":method POST", ":scheme http", ":path",
// ":authority", "content-type: application/grpc", "te: trailers") and `extra` headers after.
std::string GrpcRequestHeaderBlock(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& extra = {});
// A gRPC length-prefixed message (uncompressed).
std::string GrpcLengthPrefixed(const std::string& message);

// ---- The connection.

struct H2GoAway {
  uint32_t last_stream_id = 0;
  uint32_t error_code = 0;
  std::string debug;
};

// What the reader saw so far.
struct H2Seen {
  std::map<uint16_t, uint32_t> server_settings;  // the first non-ACK SETTINGS frame
  int settings_frames = 0;                       // non-ACK
  int settings_acks = 0;
  int ping_acks = 0;
  int64_t frames = 0;
  int64_t data_bytes = 0;
  std::map<uint32_t, uint32_t> rst_streams;  // stream id -> error code
  std::map<uint32_t, int> header_blocks;     // stream id -> HEADERS frames received
  std::map<uint32_t, bool> ended;            // stream id -> END_STREAM seen
  std::optional<H2GoAway> goaway;
  bool closed = false;  // EOF, a reset, or a malformed frame from the server
};

class H2RawClient {
 public:
  // Connects to 127.0.0.1:`port`. Sends block for at most `send_timeout` (then fail), so a client
  // flooding a server that stopped reading never hangs the test. `receive_buffer_bytes` > 0 sets
  // SO_RCVBUF (a client that does not read then stalls the server's writes early).
  static std::unique_ptr<H2RawClient> Connect(
      int port, std::chrono::milliseconds send_timeout = std::chrono::milliseconds(5000),
      int receive_buffer_bytes = 0);
  ~H2RawClient();
  H2RawClient(const H2RawClient&) = delete;
  H2RawClient& operator=(const H2RawClient&) = delete;

  // The connection preface and a SETTINGS frame with `settings`; then reads until the server's
  // SETTINGS frame (answered with an ACK) or `timeout`. Does not start the reader.
  bool Handshake(const std::vector<std::pair<uint16_t, uint32_t>>& settings = {},
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // Writes all of `bytes`; false once a write fails (the server closed, reset, or stopped reading
  // for longer than the send timeout).
  bool Send(const std::string& bytes);
  // Sends HEADERS (END_HEADERS) and one DATA frame (END_STREAM) with `message` length-prefixed.
  bool SendGrpcCall(uint32_t stream_id, const std::string& path, const std::string& message);

  // Starts the background reader (once). From then on, frames are taken as they come.
  void StartReader();
  // Waits up to `timeout` for `pred` on what was seen; returns whether it held.
  bool WaitFor(const std::function<bool(const H2Seen&)>& pred, std::chrono::milliseconds timeout);
  H2Seen seen();
  // Waits for the server to end the connection: a GOAWAY or a close.
  bool WaitForGoAwayOrClose(std::chrono::milliseconds timeout) {
    return WaitFor([](const H2Seen& s) { return s.goaway.has_value() || s.closed; }, timeout);
  }

 private:
  explicit H2RawClient(int fd) : fd_(fd) {}
  // Parses whole frames at the front of `buffer_`; false on a malformed frame.
  bool TakeFramesLocked();
  void ReadLoop();

  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;  // received bytes not yet parsed; guarded by mu_ once the reader runs
  H2Seen seen_;         // guarded by mu_
  std::thread reader_;
};

// The process's resident set size in bytes (VmRSS), -1 if it cannot be read.
int64_t ResidentBytes();

}  // namespace neupims::testing_util

#endif  // NEUPIMS_TESTS_SERVER_H2_RAW_CLIENT_H_
