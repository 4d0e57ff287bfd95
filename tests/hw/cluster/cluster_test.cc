#include "hw/cluster/cluster.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::hw::cluster {
namespace {

using ::testing::HasSubstr;

std::string Json(const std::string& devices, const std::string& links) {
  return "{\"name\": \"t\", \"description\": \"d\", \"devices\": [" + devices +
         "], \"links\": " + links + "}";
}

const char kTwo[] =
    "{\"name\": \"gpu0\", \"kind\": \"gpu\", \"config\": \"rtx3070ti\"},"
    "{\"name\": \"cim0\", \"kind\": \"cim\", \"config\": \"neurosim\"}";

TEST(ClusterTest, EveryBuiltinLoads) {
  for (const std::string& name : BuiltinClusterNames()) {
    absl::StatusOr<Cluster> c = LoadCluster(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    EXPECT_EQ(c->name, name);
    EXPECT_EQ(c->link.size(), c->devices.size());
  }
  EXPECT_EQ(BuiltinClusterNames().size(), 4u);
}

TEST(ClusterTest, EightKindsHasEveryShippedDeviceConfigurationOnce) {
  absl::StatusOr<Cluster> c = LoadCluster("eight-kinds");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->devices.size(), 8u);
  std::set<std::string> configs;
  for (const Device& d : c->devices) EXPECT_TRUE(configs.insert(d.config).second) << d.config;
  EXPECT_EQ(c->link[0][7].medium, "hb-wcc");
}

TEST(ClusterTest, DonnaHeteroHasTwoCpusAGpuAndACimOverHighBandwidthWireless) {
  absl::StatusOr<Cluster> c = LoadCluster("donna-hetero");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->devices.size(), 4u);
  EXPECT_EQ(c->devices[0].kind, DeviceKind::kCpu);
  EXPECT_EQ(c->devices[1].kind, DeviceKind::kCpu);
  EXPECT_EQ(c->devices[2].kind, DeviceKind::kGpu);
  EXPECT_EQ(c->devices[3].kind, DeviceKind::kCim);
  EXPECT_EQ(c->link[0][3].medium, "hb-wcc");
  EXPECT_DOUBLE_EQ(c->link[3][2].bytes_per_s, 1e9);
}

TEST(ClusterTest, PairsOverrideTheDefaultBothWays) {
  absl::StatusOr<Cluster> c = LoadCluster("edge-cloud");
  ASSERT_TRUE(c.ok()) << c.status();
  const int cim0 = c->Find("cim0"), cim1 = c->Find("cim1"), gpu = c->Find("gpu0");
  const int cpu = c->Find("cpu0");
  EXPECT_EQ(c->link[cim0][cim1].medium, "hb-wcc");
  EXPECT_EQ(c->link[cim1][cim0].medium, "hb-wcc");
  EXPECT_EQ(c->link[cim0][gpu].medium, "lb-wcc");
  EXPECT_EQ(c->link[cpu][gpu].medium, "pcie5");
}

TEST(ClusterTest, FpgaDeviceCarriesItsBoardMemory) {
  absl::StatusOr<Cluster> c = LoadCluster("fpga-gpu");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->devices[0].kind, DeviceKind::kFpga);
  EXPECT_EQ(c->devices[0].memory_bytes, int64_t{4} << 30);
  EXPECT_EQ(std::get<fpga::FpgaSpec>(c->devices[0].spec).name, "zu9");
}

TEST(ClusterTest, CustomMediumTakesItsFigures) {
  absl::StatusOr<Cluster> c =
      ParseCluster(Json(kTwo,
                        "{\"default\": {\"medium\": \"eth\", \"bytes_per_s\": 1.25e9, "
                        "\"joules_per_bit\": 5e-9, \"latency_s\": 1e-5}}"),
                   "x.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->link[0][1].medium, "eth");
  EXPECT_DOUBLE_EQ(c->link[0][1].TimeS(1'250'000), 1e-5 + 1e-3);
}

TEST(ClusterTest, UnknownDeviceKindIsRefusedListingTheKinds) {
  absl::StatusOr<Cluster> c =
      ParseCluster(Json("{\"name\": \"tpu0\", \"kind\": \"tpu\", \"config\": \"v4\"}",
                        "{\"default\": {\"medium\": \"pcie5\"}}"),
                   "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("devices[tpu0].kind"));
  EXPECT_THAT(c.status().message(), HasSubstr("cpu, gpu, cim, fpga, hpim"));
  // The unknown kind is the only error: its config is not loaded as some other kind's.
  EXPECT_THAT(c.status().message(), ::testing::Not(HasSubstr("config")));
}

TEST(ClusterTest, LinkToAMissingDeviceIsRefusedNamingIt) {
  absl::StatusOr<Cluster> c =
      ParseCluster(Json(kTwo,
                        "{\"default\": {\"medium\": \"pcie5\"}, \"pairs\": [{\"between\": "
                        "[\"gpu0\", \"gpu9\"], \"medium\": \"lb-wcc\"}]}"),
                   "x.json");
  ASSERT_FALSE(c.status().ok());
  EXPECT_THAT(c.status().message(), HasSubstr("links.pairs[0].between"));
  EXPECT_THAT(c.status().message(), HasSubstr("'gpu9'"));
  EXPECT_THAT(c.status().message(), HasSubstr("devices: gpu0, cim0"));
}

TEST(ClusterTest, NegativeOrZeroBandwidthIsRefusedNamingTheField) {
  for (const char* bw : {"-1e9", "0"}) {
    absl::StatusOr<Cluster> c =
        ParseCluster(Json(kTwo, std::string("{\"default\": {\"medium\": \"x\", \"bytes_per_s\": ") +
                                    bw + ", \"joules_per_bit\": 1e-9}}"),
                     "x.json");
    ASSERT_FALSE(c.ok()) << bw;
    EXPECT_THAT(c.status().message(), HasSubstr("links.default.bytes_per_s"));
    EXPECT_THAT(c.status().message(), HasSubstr("bandwidth must be > 0"));
  }
}

TEST(ClusterTest, DuplicateDeviceNameIsRefused) {
  absl::StatusOr<Cluster> c =
      ParseCluster(Json(std::string(kTwo) + ",{\"name\": \"gpu0\", \"kind\": \"cpu\", \"config\": "
                                            "\"xeon-w3323\"}",
                        "{\"default\": {\"medium\": \"pcie5\"}}"),
                   "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("duplicate device name 'gpu0'"));
}

TEST(ClusterTest, UnknownMediumAndBadDeviceConfigAreRefused) {
  absl::StatusOr<Cluster> c =
      ParseCluster(Json(kTwo, "{\"default\": {\"medium\": \"carrier-pigeon\"}}"), "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("links.default.medium"));
  EXPECT_THAT(c.status().message(), HasSubstr("pcie5, hb-wcc, lb-wcc"));

  c = ParseCluster(Json("{\"name\": \"g\", \"kind\": \"gpu\", \"config\": \"rtx9090\"}",
                        "{\"default\": {\"medium\": \"pcie5\"}}"),
                   "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("devices[g].config"));
  EXPECT_THAT(c.status().message(), HasSubstr("rtx9090"));
}

// An empty "config" loaded nothing and left the device's figures at zero, so the partitioner
// failed later with "layer 'conv1' on 'g': negative or NaN cost", naming neither file nor field.
TEST(ClusterTest, EmptyDeviceConfigIsRefusedNamingTheField) {
  for (const char* kind : {"cpu", "gpu", "cim", "hpim", "fpga"}) {
    const absl::StatusOr<Cluster> c =
        ParseCluster(Json(absl::StrCat("{\"name\": \"g\", \"kind\": \"", kind,
                                       "\", \"config\": \"\", \"memory_bytes\": 1024}"),
                          "{\"default\": {\"medium\": \"pcie5\"}}"),
                     "x.json");
    ASSERT_FALSE(c.ok()) << kind;
    EXPECT_THAT(c.status().message(), HasSubstr("x.json: field 'devices[g].config'")) << kind;
    EXPECT_THAT(c.status().message(), HasSubstr("empty")) << kind;
  }
}

TEST(ClusterTest, DuplicateOrSelfLinkIsRefused) {
  absl::StatusOr<Cluster> c =
      ParseCluster(Json(kTwo,
                        "{\"default\": {\"medium\": \"pcie5\"}, \"pairs\": ["
                        "{\"between\": [\"gpu0\", \"cim0\"], \"medium\": \"lb-wcc\"},"
                        "{\"between\": [\"cim0\", \"gpu0\"], \"medium\": \"hb-wcc\"},"
                        "{\"between\": [\"cim0\", \"cim0\"], \"medium\": \"hb-wcc\"}]}"),
                   "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("links.pairs[1].between"));
  EXPECT_THAT(c.status().message(), HasSubstr("duplicate link"));
  EXPECT_THAT(c.status().message(), HasSubstr("links.pairs[2].between"));
}

TEST(ClusterTest, FpgaWithoutBoardMemoryIsRefused) {
  absl::StatusOr<Cluster> c =
      ParseCluster(Json("{\"name\": \"f\", \"kind\": \"fpga\", \"config\": \"zu2\"}",
                        "{\"default\": {\"medium\": \"pcie5\"}}"),
                   "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("devices[f].memory_bytes"));
}

}  // namespace
}  // namespace neupims::hw::cluster

namespace neupims::hw::cluster {
namespace {

TEST(ClusterInputTest, InputDeviceIsWhereTheEdgeInputArrives) {
  absl::StatusOr<Cluster> c = LoadCluster("edge-cloud");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->input_device.has_value());
  EXPECT_EQ(c->devices[*c->input_device].name, "cim0");
  absl::StatusOr<Cluster> none = LoadCluster("donna-hetero");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->input_device.has_value());
}

TEST(ClusterInputTest, InputDeviceMustNameADevice) {
  const std::string text =
      "{\"name\": \"t\", \"description\": \"d\", \"devices\": [{\"name\": \"gpu0\", \"kind\": "
      "\"gpu\", \"config\": \"rtx3070ti\"}], \"links\": {\"default\": {\"medium\": \"pcie5\"}}, "
      "\"input_device\": \"cam0\"}";
  absl::StatusOr<Cluster> c = ParseCluster(text, "t.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), testing::HasSubstr("input_device"));
  EXPECT_THAT(c.status().message(), testing::HasSubstr("cam0"));
}

}  // namespace
}  // namespace neupims::hw::cluster
