#include "common/file_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

TEST(FileIo, WriteThenReadGivesTheSameBytes) {
  const std::string path = TempPath("file_io_round_trip.bin");
  const std::string contents("line 1\r\nline 2\0binary\xff", 22);
  ASSERT_TRUE(WriteFile(path, contents).ok());
  absl::StatusOr<std::string> read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, contents);
  std::filesystem::remove(path);
}

TEST(FileIo, WriteReplacesTheWholeFile) {
  const std::string path = TempPath("file_io_replace.txt");
  ASSERT_TRUE(WriteFile(path, "a long first version").ok());
  ASSERT_TRUE(WriteFile(path, "short").ok());
  EXPECT_EQ(ReadFile(path).value_or(""), "short");
  std::filesystem::remove(path);
}

TEST(FileIo, ReadOfAMissingFileIsNotFoundNamingThePath) {
  const std::string path = TempPath("file_io_does_not_exist.txt");
  absl::StatusOr<std::string> read = ReadFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr(path));
}

TEST(FileIo, ReadOfADirectoryIsInvalidArgumentNamingThePath) {
  const std::string dir = ::testing::TempDir();
  absl::StatusOr<std::string> read = ReadFile(dir);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr(dir));
}

TEST(FileIo, WriteToAFullDeviceFailsNamingThePath) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  // Small enough to sit in the stdio buffer: the failure shows only at the close.
  const absl::Status small = WriteFile("/dev/full", "x");
  EXPECT_FALSE(small.ok());
  EXPECT_THAT(small.message(), HasSubstr("/dev/full"));
  // Larger than the buffer: the write itself fails.
  const absl::Status large = WriteFile("/dev/full", std::string(1 << 20, 'x'));
  EXPECT_FALSE(large.ok());
  EXPECT_THAT(large.message(), HasSubstr("/dev/full"));
}

TEST(FileIo, WriteIntoAMissingDirectoryFailsNamingThePath) {
  const std::string path = TempPath("file_io_no_such_dir/out.txt");
  const absl::Status s = WriteFile(path, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path));
}

// ReadInputFile: the one loader for every input file (issue 17, bugs 8, 11, 12, 14).
TEST(ReadInputFile, RefusesAnEmptyPathADirectoryAndAMissingFile) {
  const absl::StatusOr<std::string> empty_path = ReadInputFile("", kMaxConfigFileBytes);
  EXPECT_EQ(empty_path.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty_path.status().message(), HasSubstr("no file name given"));
  const std::string dir = ::testing::TempDir();
  const absl::StatusOr<std::string> directory = ReadInputFile(dir, kMaxConfigFileBytes);
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(directory.status().message(), HasSubstr(dir + ": is a directory"));
  EXPECT_EQ(ReadInputFile(TempPath("read_input_missing"), 100).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ReadInputFile, RefusesAnEmptyFileAndOneHoldingOnlyABom) {
  const std::string path = TempPath("read_input_empty.json");
  ASSERT_TRUE(WriteFile(path, "").ok());
  EXPECT_THAT(ReadInputFile(path, 100).status().message(), HasSubstr(path + ": empty file"));
  ASSERT_TRUE(WriteFile(path, "\xEF\xBB\xBF").ok());
  EXPECT_THAT(ReadInputFile(path, 100).status().message(), HasSubstr(path + ": empty file"));
  std::filesystem::remove(path);
}

TEST(ReadInputFile, RemovesALeadingBomOnly) {
  const std::string path = TempPath("read_input_bom.csv");
  ASSERT_TRUE(WriteFile(path,
                        "\xEF\xBB\xBF"
                        "a,b\n\xEF\xBB\xBF")
                  .ok());
  EXPECT_EQ(ReadInputFile(path, 100).value_or("?"), "a,b\n\xEF\xBB\xBF");
  std::filesystem::remove(path);
}

TEST(ReadInputFile, RefusesAFileOverTheCapBeforeReadingIt) {
  const std::string path = TempPath("read_input_big.json");
  ASSERT_TRUE(WriteFile(path, std::string(101, ' ')).ok());
  const absl::StatusOr<std::string> read = ReadInputFile(path, 100);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr(path + ": file is 101 bytes, over the limit"));
  EXPECT_TRUE(ReadInputFile(path, 101).ok());
  EXPECT_EQ(kMaxConfigFileBytes, 16 << 20);
  std::filesystem::remove(path);
}

// TableReader reads through ReadInputBytes: the same bytes, checks and errors as ReadInputFile,
// and the NUL after the bytes that the reader's digit loops stop at.
TEST(ReadInputBytes, GivesReadInputFilesBytesFollowedByANul) {
  const std::string path = TempPath("read_input_bytes.tsv");
  for (const std::string& contents : {std::string("a\tb\n1\t2\n"),
                                      std::string("\xEF\xBB\xBF"
                                                  "a,b\n3,4"),
                                      std::string("x\0y\n", 4), std::string(70'000, '7')}) {
    ASSERT_TRUE(WriteFile(path, contents).ok());
    const absl::StatusOr<InputBytes> bytes = ReadInputBytes(path, 100'000);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(bytes->view(), ReadInputFile(path, 100'000).value_or("?"));
    EXPECT_EQ(bytes->data()[bytes->size()], '\0');
  }
  ASSERT_TRUE(WriteFile(path, "\xEF\xBB\xBF").ok());
  EXPECT_EQ(ReadInputBytes(path, 100).status(), ReadInputFile(path, 100).status());
  ASSERT_TRUE(WriteFile(path, std::string(101, ' ')).ok());
  EXPECT_EQ(ReadInputBytes(path, 100).status(), ReadInputFile(path, 100).status());
  std::filesystem::remove(path);
  EXPECT_EQ(ReadInputBytes(path, 100).status(), ReadInputFile(path, 100).status());
}

// Reads in chunks (pipes) grow the buffer: every byte written stays, and the NUL follows them.
TEST(InputBytes, KeepsEveryCommittedByteAndTheNulAfterThem) {
  InputBytes bytes;
  EXPECT_TRUE(bytes.empty());
  EXPECT_EQ(bytes.data()[0], '\0');
  std::string expected;
  for (size_t step = 0; step < 40; ++step) {
    const size_t room = (step * 7919) % 5000;
    const size_t used = room - room / 3;
    char* at = bytes.Reserve(room);
    for (size_t i = 0; i < used; ++i) at[i] = static_cast<char>('a' + (step + i) % 26);
    expected.append(at, used);
    bytes.Commit(used);
    ASSERT_EQ(bytes.view(), expected) << step;
    ASSERT_EQ(bytes.data()[bytes.size()], '\0') << step;
  }
  bytes.RemovePrefix(3);
  EXPECT_EQ(bytes.view(), expected.substr(3));
  EXPECT_EQ(bytes.data()[bytes.size()], '\0');
  EXPECT_EQ(InputBytes("copy").view(), "copy");
}

// /dev/zero and /dev/urandom never end: reading one as a config or a dataset used to grow the
// string until memory ran out (std::bad_alloc, SIGABRT). A device is no file.
TEST(ReadInputFile, RefusesACharacterDeviceAtOnceNamingIt) {
  if (!std::filesystem::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  for (const char* device : {"/dev/zero", "/dev/null"}) {
    const absl::StatusOr<std::string> read = ReadInputFile(device, kMaxDataFileBytes);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << device;
    EXPECT_THAT(read.status().message(),
                HasSubstr(std::string(device) + ": is a device, not a regular file"));
  }
}

// A stream (a FIFO, a pipe) has no size to check up front: the cap holds while it is read, so
// a writer that never stops costs at most the cap, not all memory.
TEST(ReadInputFile, StopsReadingAStreamOverTheCap) {
  const std::string dir = TempPath("read_input_fifo_cap_dir");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(std::filesystem::create_directory(dir));
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::signal(SIGPIPE, SIG_IGN);  // the reader stops early: the writer then sees EPIPE
  constexpr int kChunks = 256;    // 16 MiB offered, far over the 1 KiB cap
  int chunks_written = 0;
  std::thread writer([&] {
    std::FILE* f = std::fopen(fifo.c_str(), "wb");
    if (f == nullptr) return;
    const std::string chunk(1 << 16, 'x');
    while (chunks_written < kChunks &&
           std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) {
      ++chunks_written;
    }
    std::fclose(f);
  });
  const absl::StatusOr<std::string> read = ReadInputFile(fifo, 1024);
  writer.join();
  std::filesystem::remove_all(dir);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(), HasSubstr(fifo + ": file is over the limit of 1024 bytes"));
  EXPECT_LT(chunks_written, kChunks) << "the reader drained the whole stream";
}

// Files whose size is unknown (file_size reports 0 or fails) are read in chunks until the end.
// /proc files report size 0, so a read that trusted the size would return nothing.
TEST(FileIo, ReadsAProcFileWhoseReportedSizeIsZero) {
  const absl::StatusOr<std::string> status = ReadFile("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_FALSE(status->empty());
  EXPECT_EQ(status->back(), '\n');
  EXPECT_THAT(*status, HasSubstr("Name:"));
}

// A FIFO has no size at all: everything a writer sends, over several 64 KiB chunks, comes back.
TEST(FileIo, ReadsAFifoFedByAWriterThreadToItsEnd) {
  const std::string dir = TempPath("file_io_fifo_dir");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(std::filesystem::create_directory(dir));
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::string sent;
  for (int i = 0; sent.size() < 200'000; ++i) sent += "line " + std::to_string(i) + "\n";
  // A reader that stops early must fail the test, not kill it: the writer then sees EPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  bool wrote = false;
  std::thread writer([&] {
    std::FILE* f = std::fopen(fifo.c_str(), "wb");  // blocks until the reader opens
    if (f == nullptr) return;
    wrote = std::fwrite(sent.data(), 1, sent.size(), f) == sent.size();
    wrote = std::fclose(f) == 0 && wrote;
  });
  const absl::StatusOr<std::string> got = ReadFile(fifo);
  if (!got.ok()) {  // ReadFile may not have opened the FIFO: meet the writer and drain it
    if (std::FILE* r = std::fopen(fifo.c_str(), "rb"); r != nullptr) {
      char buffer[4096];
      while (std::fread(buffer, 1, sizeof(buffer), r) > 0) {
      }
      std::fclose(r);
    }
  }
  writer.join();
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(wrote);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), sent.size());
  EXPECT_TRUE(*got == sent);
}

}  // namespace
}  // namespace neupims
