// Raw message bytes <-> grpc::ByteBuffer, for tests that call a service through
// grpc::GenericStub (health, reflection, hand-encoded or malformed messages).
#ifndef NEUPIMS_TESTS_SERVER_GRPC_BYTES_H_
#define NEUPIMS_TESTS_SERVER_GRPC_BYTES_H_

#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace neupims::testing_util {

inline grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// The buffer's bytes, or "" when it cannot be read.
inline std::string FromByteBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

}  // namespace neupims::testing_util

#endif  // NEUPIMS_TESTS_SERVER_GRPC_BYTES_H_
