#include "tools/loadgen/metrics_scrape.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace neupims::loadgen {

absl::StatusOr<HardwareReading> ParseHardwareReading(const std::string& exposition) {
  std::map<std::string, double> sums;  // family -> sum over its series
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    const size_t value_at = line.rfind(' ');
    if (name_end == absl::string_view::npos || value_at == absl::string_view::npos) continue;
    double v = 0;
    if (!absl::SimpleAtod(line.substr(value_at + 1), &v)) continue;
    sums[std::string(line.substr(0, name_end))] += v;
  }
  if (!sums.contains("neupims:power_watts")) {
    return absl::InvalidArgumentError("no neupims:power_watts: not a neupims metrics endpoint");
  }
  HardwareReading r;
  r.npu_systolic = sums["neupims:npu_systolic_utilization"];
  r.npu_vector = sums["neupims:npu_vector_utilization"];
  r.pim = sums["neupims:pim_utilization"];
  r.hbm_bandwidth = sums["neupims:hbm_bandwidth_utilization"];
  r.power_w = sums["neupims:power_watts"];
  r.energy_j = sums["neupims:energy_joules_total"];
  r.generation_tokens = sums["neupims:generation_tokens_total"];
  return r;
}

void SetHardware(const HardwareReading& reading, ServerSample* sample) {
  sample->has_hardware = true;
  sample->npu_systolic = reading.npu_systolic;
  sample->npu_vector = reading.npu_vector;
  sample->pim = reading.pim;
  sample->hbm_bandwidth = reading.hbm_bandwidth;
  sample->power_w = reading.power_w;
  sample->energy_j = reading.energy_j;
  sample->generation_tokens = reading.generation_tokens;
}

absl::StatusOr<std::string> FetchMetrics(const std::string& host_port, double timeout_s) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics '", host_port, "': not HOST:PORT"));
  }
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host_port));
  }
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const bool connected = connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  freeaddrinfo(found);
  std::string response;
  if (connected) {
    const std::string request =
        absl::StrCat("GET /metrics HTTP/1.0\r\nHost: ", host, "\r\nConnection: close\r\n\r\n");
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[16384];
      ssize_t n = 0;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || response.find(" 200 ") > response.find('\n') ||
      body == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("no metrics from http://", host_port, "/metrics"));
  }
  return response.substr(body + 4);
}

}  // namespace neupims::loadgen
