// ToGrpcStatus and ToHttpError: the one mapping from absl codes to the front ends' statuses.
#include "server/status_map.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::server {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ToGrpcStatus, MapsTheCodeAndKeepsAShortMessage) {
  const grpc::Status s = ToGrpcStatus(absl::NotFoundError("no live request 'a'"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "no live request 'a'");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

// gRPC sends the message in a trailer that clients drop over their metadata limit (8-16 KiB,
// after percent-encoding, which triples every non-ASCII byte), so a long message is cut and says
// how long it was.
TEST(ToGrpcStatus, CutsALongMessageAndSaysHowLongItWas) {
  const std::string id(100000, 'x');
  const grpc::Status s = ToGrpcStatus(absl::NotFoundError("no live request '" + id + "'"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), StartsWith("no live request 'xxxx"));
  EXPECT_THAT(s.error_message(), EndsWith("... (100018 bytes in all)"));
  EXPECT_LE(s.error_message().size(), kMaxGrpcMessageBytes + 40);
}

TEST(ToGrpcStatus, CutsBetweenUtf8Characters) {
  std::string text;
  while (text.size() < 3 * kMaxGrpcMessageBytes) text += "\xc3\xa9";  // U+00E9, two bytes
  text = "x" + text;  // the cut would otherwise fall on a character boundary by luck
  const std::string m = ToGrpcStatus(absl::InvalidArgumentError(text)).error_message();
  const std::string kept = m.substr(0, m.find("..."));
  ASSERT_FALSE(kept.empty());
  // The last kept byte is not the first byte of a two-byte character.
  EXPECT_NE(static_cast<unsigned char>(kept.back()), 0xc3);
  EXPECT_EQ((kept.size() - 1) % 2, 0u);
  EXPECT_THAT(m, HasSubstr("bytes in all"));
}

}  // namespace
}  // namespace neupims::server
