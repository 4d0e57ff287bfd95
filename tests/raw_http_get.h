// A plain HTTP/1.0 GET to 127.0.0.1 over a socket, for tests that check a server's HTTP
// endpoints without an HTTP library (the server and deploy suites).
#ifndef NEUPIMS_TESTS_RAW_HTTP_GET_H_
#define NEUPIMS_TESTS_RAW_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace neupims::testing_util {

// The whole response (status line, headers, body); "" if nothing could be read. Send and
// receive time out after `timeout_s` seconds each.
inline std::string RawHttpGet(int port, const std::string& path, int timeout_s) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval timeout{};
  timeout.tv_sec = timeout_s;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[8192];
    while (true) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return response;
}

}  // namespace neupims::testing_util

#endif  // NEUPIMS_TESTS_RAW_HTTP_GET_H_
