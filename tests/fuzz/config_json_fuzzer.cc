// Fuzzes the strict JSON configs: device, model, cluster and server files. The first byte picks
// the kind; the rest is the file's text. Every input is parsed as its kind; an accepted one
// passes the model's own invariants, a refused one is InvalidArgument naming the file.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "hw/cluster/cluster.h"
#include "hw/device.h"
#include "models/model_config.h"
#include "server/server.h"
#include "tests/fuzz/fuzz_util.h"

using neupims::fuzz::CheckRefusal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const absl::string_view text = neupims::fuzz::AsText(data + 1, size - 1);
  constexpr absl::string_view kSource = "fuzz.json";
  switch (data[0] % 4) {
    case 0: {
      absl::StatusOr<neupims::hw::DeviceConfig> d = neupims::hw::ParseDeviceConfig(text, kSource);
      if (!d.ok()) {
        CheckRefusal(d.status(), kSource);
        break;
      }
      FUZZ_CHECK(d->npu.frequency_mhz > 0 && d->hbm.frequency_mhz > 0, "clocks");
      FUZZ_CHECK(d->PeakHbmBytesPerSecond() > 0, "bandwidth");
      break;
    }
    case 1: {
      absl::StatusOr<neupims::models::ModelConfig> m =
          neupims::models::ParseModelConfig(text, kSource);
      if (!m.ok()) {
        CheckRefusal(m.status(), kSource);
        break;
      }
      FUZZ_CHECK(m->heads > 0 && m->hidden % m->heads == 0 && m->head_dim() > 0, "heads");
      FUZZ_CHECK(m->max_seq_len > 0 && m->Parameters() > 0, "size");
      break;
    }
    case 2: {
      absl::StatusOr<neupims::hw::cluster::Cluster> c =
          neupims::hw::cluster::ParseCluster(text, std::string(kSource));
      if (!c.ok()) {
        CheckRefusal(c.status(), kSource);
        break;
      }
      FUZZ_CHECK(!c->devices.empty(), "devices");
      FUZZ_CHECK(c->link.size() == c->devices.size(), "link matrix");
      break;
    }
    default: {
      neupims::server::ServerOptions options;
      const absl::Status s = neupims::server::ParseServerConfig(text, kSource, &options);
      if (!s.ok()) {
        CheckRefusal(s, kSource);
        break;
      }
      FUZZ_CHECK(options.port >= 0 && options.port <= 65535, "port");
      FUZZ_CHECK(options.runner.speed > 0, "speed");
      break;
    }
  }
  return 0;
}
