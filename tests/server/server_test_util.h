// Helpers of the server integration suites: hand-encoded health and reflection calls through
// grpc::GenericStub (no extra .proto files), and a plain HTTP/1.0 client with a Prometheus text
// parser for /metrics.
#ifndef NEUPIMS_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define NEUPIMS_TESTS_SERVER_SERVER_TEST_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/raw_http_get.h"
#include "tests/server/grpc_bytes.h"

namespace neupims::testing_util {

// ---- Hand-encoded protobuf for the health and reflection services (no extra .proto files).

inline void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// A length-delimited field (string / bytes / message).
inline std::string Field(int number, const std::string& payload) {
  std::string out;
  AppendVarint(static_cast<uint64_t>(number) << 3 | 2, &out);
  AppendVarint(payload.size(), &out);
  out += payload;
  return out;
}

// grpc.health.v1.Health/Check: HealthCheckRequest{string service = 1} ->
// HealthCheckResponse{ServingStatus status = 1} (1 SERVING, 2 NOT_SERVING). Returns the status
// enum, or -1 with `rpc_status` set when the call failed.
inline int HealthCheck(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                       grpc::Status* rpc_status) {
  grpc::GenericStub stub(channel);
  const grpc::ByteBuffer request = ToByteBuffer(service.empty() ? "" : Field(1, service));
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  *rpc_status = done.get_future().get();
  if (!rpc_status->ok()) return -1;
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(FromByteBuffer(response))) return -1;
  int status = 0;  // UNKNOWN: proto3 leaves a zero enum out
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& f = fields.field(i);
    if (f.number() == 1 && f.type() == google::protobuf::UnknownField::TYPE_VARINT) {
      status = static_cast<int>(f.varint());
    }
  }
  return status;
}

// grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo with one request (its encoded
// ServerReflectionRequest); returns the encoded answer, "" if none came.
inline std::string ReflectionRoundTrip(const std::shared_ptr<grpc::Channel>& channel,
                                       const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto step = [&](intptr_t want) {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), want);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  EXPECT_TRUE(step(1));
  call->Write(ToByteBuffer(request), reinterpret_cast<void*>(2));
  EXPECT_TRUE(step(2));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  const bool read_ok = step(3);
  EXPECT_TRUE(read_ok);
  call->WritesDone(reinterpret_cast<void*>(4));
  step(4);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return read_ok ? FromByteBuffer(response) : "";
}

// The length-delimited fields `number` of an encoded message.
inline std::vector<std::string> LengthDelimited(const std::string& message, int number) {
  std::vector<std::string> out;
  google::protobuf::UnknownFieldSet fields;
  EXPECT_TRUE(fields.ParseFromString(message));
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == number &&
        fields.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      out.push_back(fields.field(i).length_delimited());
    }
  }
  return out;
}

// Reflection's list_services (request field 7). The answer's list_services_response (field 6)
// holds repeated ServiceResponse (field 1) whose name is field 1.
inline std::vector<std::string> ReflectionListServices(
    const std::shared_ptr<grpc::Channel>& channel) {
  std::vector<std::string> names;
  for (const std::string& list : LengthDelimited(ReflectionRoundTrip(channel, Field(7, "")), 6)) {
    for (const std::string& service : LengthDelimited(list, 1)) {
      for (const std::string& name : LengthDelimited(service, 1)) names.push_back(name);
    }
  }
  return names;
}

// Reflection's file_containing_symbol (request field 4), as grpcurl asks before every call: the
// encoded FileDescriptorProtos of the answer's file_descriptor_response (field 4, repeated
// bytes 1); none when the server answers with an error_response ("Symbol not found").
inline std::vector<std::string> ReflectionFilesContaining(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& symbol) {
  std::vector<std::string> files;
  for (const std::string& r : LengthDelimited(ReflectionRoundTrip(channel, Field(4, symbol)), 4)) {
    for (const std::string& file : LengthDelimited(r, 1)) files.push_back(file);
  }
  return files;
}

// ---- /metrics over a plain socket.

// `n` TCP connections to 127.0.0.1:`port` that send nothing (the caller closes them), then a
// pause for the server's threads to take the first ones; a failed connect fails the test and is
// left out.
inline std::vector<int> SilentConnections(int port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "silent connection " << i << " to port " << port << " failed";
      if (fd >= 0) close(fd);
      continue;
    }
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return fds;
}

// HTTP/1.0 GET; returns the whole response (status line, headers, body) or "" on error.
inline std::string HttpGet(int port, const std::string& path) {
  return RawHttpGet(port, path, /*timeout_s=*/20);
}

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the Prometheus text format: `name{k="v",...} value` lines, comments skipped.
inline std::vector<Sample> ParsePrometheus(const std::string& text) {
  std::vector<Sample> samples;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    if (i == std::string::npos) continue;
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
        const std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) ++j;
          value.push_back(line[j]);
        }
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    s.value = std::strtod(line.c_str() + i, nullptr);
    samples.push_back(std::move(s));
  }
  return samples;
}

// The one sample named `name` whose labels include `labels`; NaN (and a failure) otherwise.
inline double Metric(const std::vector<Sample>& samples, const std::string& name,
                     const std::map<std::string, std::string>& labels = {}) {
  std::optional<double> found;
  int matches = 0;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) match = false;
    }
    if (!match) continue;
    ++matches;
    found = s.value;
  }
  if (matches != 1) {
    ADD_FAILURE() << matches << " samples match " << name;
    return std::nan("");
  }
  return *found;
}

}  // namespace neupims::testing_util

#endif  // NEUPIMS_TESTS_SERVER_SERVER_TEST_UTIL_H_
