#include "tests/server/h2_raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace neupims::testing_util {
namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kFrameHeaderBytes = 9;

void Put32(uint32_t v, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint32_t Get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(s[at + i]);
  return v;
}

std::string HpackString(const std::string& s) {
  return HpackInteger(s.size(), 7, 0x00) + s;  // H = 0: not Huffman coded
}

}  // namespace

std::string H2Frame(H2Type type, uint8_t flags, uint32_t stream_id, const std::string& payload) {
  std::string out;
  const size_t n = payload.size();
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  Put32(stream_id & 0x7fffffffu, &out);
  return out + payload;
}

std::string H2SettingsFrame(const std::vector<std::pair<uint16_t, uint32_t>>& settings) {
  std::string payload;
  for (const auto& [id, value] : settings) {
    payload.push_back(static_cast<char>(id >> 8));
    payload.push_back(static_cast<char>(id));
    Put32(value, &payload);
  }
  return H2Frame(H2Type::kSettings, 0, 0, payload);
}

std::string H2RstStreamFrame(uint32_t stream_id, uint32_t error_code) {
  std::string payload;
  Put32(error_code, &payload);
  return H2Frame(H2Type::kRstStream, 0, stream_id, payload);
}

std::string H2WindowUpdateFrame(uint32_t stream_id, uint32_t increment) {
  std::string payload;
  Put32(increment & 0x7fffffffu, &payload);
  return H2Frame(H2Type::kWindowUpdate, 0, stream_id, payload);
}

std::string H2PingFrame(uint64_t opaque, bool ack) {
  std::string payload;
  Put32(static_cast<uint32_t>(opaque >> 32), &payload);
  Put32(static_cast<uint32_t>(opaque), &payload);
  return H2Frame(H2Type::kPing, ack ? kH2Ack : 0, 0, payload);
}

std::string H2GoAwayFrame(uint32_t last_stream_id, uint32_t error_code) {
  std::string payload;
  Put32(last_stream_id & 0x7fffffffu, &payload);
  Put32(error_code, &payload);
  return H2Frame(H2Type::kGoAway, 0, 0, payload);
}

std::string HpackInteger(uint64_t value, int prefix_bits, uint8_t first_byte_flags) {
  std::string out;
  const uint64_t max_prefix = (uint64_t{1} << prefix_bits) - 1;
  if (value < max_prefix) {
    out.push_back(static_cast<char>(first_byte_flags | value));
    return out;
  }
  out.push_back(static_cast<char>(first_byte_flags | max_prefix));
  value -= max_prefix;
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
  return out;
}

std::string HpackLiteral(const std::string& name, const std::string& value) {
  // 0000 0000: literal without indexing, new name (RFC 7541 6.2.2).
  return std::string(1, '\0') + HpackString(name) + HpackString(value);
}

std::string GrpcRequestHeaderBlock(const std::string& path,
                                   const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string block = HpackLiteral(":method", "POST") + HpackLiteral(":scheme", "http") +
                      HpackLiteral(":path", path) + HpackLiteral(":authority", "127.0.0.1") +
                      HpackLiteral("content-type", "application/grpc") +
                      HpackLiteral("te", "trailers");
  for (const auto& [name, value] : extra) block += HpackLiteral(name, value);
  return block;
}

std::string GrpcLengthPrefixed(const std::string& message) {
  std::string out(1, '\0');  // not compressed
  Put32(static_cast<uint32_t>(message.size()), &out);
  return out + message;
}

std::unique_ptr<H2RawClient> H2RawClient::Connect(int port, std::chrono::milliseconds send_timeout,
                                                  int receive_buffer_bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return nullptr;
  timeval tv{};
  tv.tv_sec = send_timeout.count() / 1000;
  tv.tv_usec = (send_timeout.count() % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (receive_buffer_bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof(receive_buffer_bytes));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<H2RawClient>(new H2RawClient(fd));
}

H2RawClient::~H2RawClient() {
  shutdown(fd_, SHUT_RDWR);  // wakes the reader
  if (reader_.joinable()) reader_.join();
  close(fd_);
}

bool H2RawClient::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool H2RawClient::SendGrpcCall(uint32_t stream_id, const std::string& path,
                               const std::string& message) {
  return Send(H2Frame(H2Type::kHeaders, kH2EndHeaders, stream_id, GrpcRequestHeaderBlock(path)) +
              H2Frame(H2Type::kData, kH2EndStream, stream_id, GrpcLengthPrefixed(message)));
}

bool H2RawClient::Handshake(const std::vector<std::pair<uint16_t, uint32_t>>& settings,
                            std::chrono::milliseconds timeout) {
  if (!Send(std::string(kPreface) + H2SettingsFrame(settings))) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char chunk[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!TakeFramesLocked()) return false;
      if (seen_.settings_frames > 0) break;
    }
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    std::lock_guard<std::mutex> l(mu_);
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  if (seen().settings_frames == 0) return false;
  return Send(H2Frame(H2Type::kSettings, kH2Ack, 0, ""));
}

bool H2RawClient::TakeFramesLocked() {
  size_t at = 0;
  while (buffer_.size() - at >= kFrameHeaderBytes) {
    const size_t length = static_cast<uint8_t>(buffer_[at]) << 16 |
                          static_cast<uint8_t>(buffer_[at + 1]) << 8 |
                          static_cast<uint8_t>(buffer_[at + 2]);
    if (buffer_.size() - at < kFrameHeaderBytes + length) break;
    const auto type = static_cast<H2Type>(buffer_[at + 3]);
    const uint8_t flags = static_cast<uint8_t>(buffer_[at + 4]);
    const uint32_t stream = Get32(buffer_, at + 5) & 0x7fffffffu;
    const std::string payload = buffer_.substr(at + kFrameHeaderBytes, length);
    at += kFrameHeaderBytes + length;
    ++seen_.frames;
    switch (type) {
      case H2Type::kSettings:
        if (flags & kH2Ack) {
          ++seen_.settings_acks;
          break;
        }
        if (payload.size() % 6 != 0) return false;
        if (seen_.settings_frames++ == 0) {
          for (size_t i = 0; i < payload.size(); i += 6) {
            const uint16_t id = static_cast<uint16_t>(static_cast<uint8_t>(payload[i]) << 8 |
                                                      static_cast<uint8_t>(payload[i + 1]));
            seen_.server_settings[id] = Get32(payload, i + 2);
          }
        }
        break;
      case H2Type::kPing:
        if (flags & kH2Ack) ++seen_.ping_acks;
        break;
      case H2Type::kGoAway:
        if (payload.size() < 8) return false;
        seen_.goaway =
            H2GoAway{Get32(payload, 0) & 0x7fffffffu, Get32(payload, 4), payload.substr(8)};
        break;
      case H2Type::kRstStream:
        if (payload.size() != 4) return false;
        seen_.rst_streams[stream] = Get32(payload, 0);
        break;
      case H2Type::kHeaders:
        ++seen_.header_blocks[stream];
        if (flags & kH2EndStream) seen_.ended[stream] = true;
        break;
      case H2Type::kData:
        seen_.data_bytes += static_cast<int64_t>(length);
        if (flags & kH2EndStream) seen_.ended[stream] = true;
        break;
      default:
        break;
    }
  }
  buffer_.erase(0, at);
  return true;
}

void H2RawClient::StartReader() {
  if (reader_.joinable()) return;
  reader_ = std::thread([this] { ReadLoop(); });
}

void H2RawClient::ReadLoop() {
  char chunk[16384];
  while (true) {
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    std::lock_guard<std::mutex> l(mu_);
    if (n > 0) buffer_.append(chunk, static_cast<size_t>(n));
    if (n <= 0 || !TakeFramesLocked()) {
      seen_.closed = true;
      cv_.notify_all();
      return;
    }
    cv_.notify_all();
  }
}

bool H2RawClient::WaitFor(const std::function<bool(const H2Seen&)>& pred,
                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [&] { return pred(seen_); });
}

H2Seen H2RawClient::seen() {
  std::lock_guard<std::mutex> l(mu_);
  return seen_;
}

int64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = -1;
    fields >> kib;
    return kib < 0 ? -1 : kib * 1024;
  }
  return -1;
}

}  // namespace neupims::testing_util
