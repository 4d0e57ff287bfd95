#include "hw/cluster/cluster.h"

#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"

namespace neupims::hw::cluster {
namespace {

constexpr EnumName<DeviceKind> kKinds[] = {{"cpu", DeviceKind::kCpu},
                                           {"gpu", DeviceKind::kGpu},
                                           {"cim", DeviceKind::kCim},
                                           {"fpga", DeviceKind::kFpga},
                                           {"hpim", DeviceKind::kHpim}};

// Loads the device's spec by kind; a failure is recorded on `config` of the device entry.
absl::Status LoadSpec(Device* d) {
  switch (d->kind) {
    case DeviceKind::kCpu:
    case DeviceKind::kGpu: {
      RooflineDevice r;
      ASSIGN_OR_RETURN(r.spec, roofline::LoadRooflineSpec(ToString(d->kind), d->config));
      d->memory_bytes = r.spec.memory_bytes;
      d->spec = std::move(r);
      return absl::OkStatus();
    }
    case DeviceKind::kCim: {
      ASSIGN_OR_RETURN(cim::CimSpec s, cim::LoadCimSpec(d->config));
      d->memory_bytes = s.weight_capacity * s.weight_bits / 8;
      d->spec = std::move(s);
      return absl::OkStatus();
    }
    case DeviceKind::kFpga: {
      ASSIGN_OR_RETURN(d->spec, fpga::LoadFpgaSpec(d->config));
      return absl::OkStatus();
    }
    case DeviceKind::kHpim: {
      ASSIGN_OR_RETURN(hpim::HpimSpec s, hpim::LoadHpimSpec(d->config));
      d->memory_bytes = s.memory_bytes;
      d->spec = std::move(s);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled device kind");
}

Device ParseDevice(ConfigObject& o) {
  Device d;
  d.name = o.String("name");
  const std::string kind_name = o.Enum("kind", DeviceKindNames().Names());
  // Enum answers the first kind after recording an unknown one: load no config for a guess.
  const bool kind_given = o.OptionalString("kind", "") == kind_name;
  const absl::StatusOr<DeviceKind> kind = DeviceKindNames().Parse(kind_name);
  d.config = o.String("config");
  // An empty name loaded nothing and left the figures at zero (NaN costs later): refuse it here.
  if (o.Has("config") && d.config.empty()) {
    o.Error("config", "is empty: give a built-in name or a JSON file path");
  }
  if (!kind_given || !kind.ok() || d.config.empty()) {  // the reader has recorded the error
    o.Finish();
    return d;
  }
  d.kind = *kind;
  if (absl::Status s = LoadSpec(&d); !s.ok()) o.Error("config", s.message());
  const bool roofline = d.kind == DeviceKind::kCpu || d.kind == DeviceKind::kGpu;
  if (o.Has("profile")) {
    const std::string path = o.String("profile");
    if (!roofline) {
      o.Error("profile", "only CPU and GPU devices take a measured profile");
    } else if (auto* r = std::get_if<RooflineDevice>(&d.spec)) {
      absl::StatusOr<roofline::MeasuredProfile> p = roofline::LoadMeasuredProfile(path);
      if (p.ok()) r->measured = *std::move(p);
      if (!p.ok()) o.Error("profile", p.status().message());
    }
  }
  if (d.kind == DeviceKind::kFpga) {
    d.memory_bytes = o.Int("memory_bytes", {.min = 1, .max = int64_t{1} << 50});
  } else if (o.Has("memory_bytes")) {
    d.memory_bytes = o.Int("memory_bytes", {.min = 1, .max = int64_t{1} << 50});
  }
  o.Finish();
  return d;
}

// A medium: {"medium": "<Table I name>"} or a custom one with its figures.
link::Link ParseLink(ConfigObject& o) {
  link::Link l;
  l.medium = o.String("medium");
  if (!o.Has("bytes_per_s")) {
    absl::StatusOr<link::Link> builtin = link::BuiltinMedium(l.medium);
    if (!builtin.ok()) {
      o.Error("medium",
              absl::StrCat(builtin.status().message(), "; or give bytes_per_s and joules_per_bit"));
    }
    return builtin.value_or(l);
  }
  l.bytes_per_s = o.Double("bytes_per_s");
  if (!(l.bytes_per_s > 0)) {
    o.Error("bytes_per_s", absl::StrCat("bandwidth must be > 0, got ", l.bytes_per_s));
  }
  l.joules_per_bit = o.Double("joules_per_bit", {.min = 0, .max = 1});
  l.latency_s = o.OptionalDouble("latency_s", 0, {.min = 0, .max = 1e6});
  return l;
}

void ParseLinks(ConfigObject links, Cluster* c) {
  const size_t n = c->devices.size();
  ConfigObject def = links.Child("default");
  const link::Link fallback = ParseLink(def);
  def.Finish();
  c->link.assign(n, std::vector<link::Link>(n, fallback));
  for (size_t i = 0; i < n; ++i) c->link[i][i] = {.medium = "local", .bytes_per_s = 1e30};
  if (!links.Has("pairs")) {
    links.Finish();
    return;
  }
  std::set<std::pair<int, int>> seen;
  for (ConfigObject& p : links.Objects("pairs")) {
    const std::vector<std::string> between = p.StringList("between");
    const link::Link l = ParseLink(p);
    p.Finish();
    if (between.size() != 2) {
      p.Error("between", absl::StrCat("expected two device names, got ", between.size()));
      continue;
    }
    int ends[2];
    for (int k = 0; k < 2; ++k) {
      ends[k] = c->Find(between[k]);
      if (ends[k] < 0) {
        std::vector<std::string> names;
        for (const Device& d : c->devices) names.push_back(d.name);
        p.Error("between", absl::StrCat("names no device '", between[k],
                                        "' (devices: ", absl::StrJoin(names, ", "), ")"));
      }
    }
    if (ends[0] < 0 || ends[1] < 0) continue;
    if (ends[0] == ends[1]) {
      p.Error("between", "a link joins two different devices");
      continue;
    }
    if (!seen.insert(std::minmax(ends[0], ends[1])).second) {
      p.Error("between",
              absl::StrCat("duplicate link between '", between[0], "' and '", between[1], "'"));
    }
    c->link[ends[0]][ends[1]] = l;
    c->link[ends[1]][ends[0]] = l;
  }
  links.Finish();
}

void ParseClusterObject(ConfigObject root, Cluster* c) {
  c->name = root.String("name");
  c->description = root.String("description");
  std::set<std::string> names;
  for (ConfigObject& o : root.Objects("devices", "name")) {
    Device d = ParseDevice(o);
    if (!d.name.empty() && !names.insert(d.name).second) {
      o.Error("name", absl::StrCat("duplicate device name '", d.name, "'"));
    }
    c->devices.push_back(std::move(d));
  }
  if (c->devices.empty()) root.Error("devices", "a cluster needs at least one device");
  ParseLinks(root.Child("links"), c);
  if (root.Has("input_device")) {
    const std::string input = root.String("input_device");
    c->input_device = c->Find(input);
    if (c->input_device < 0) {
      root.Error("input_device", absl::StrCat("names no device of the cluster: '", input, "'"));
      c->input_device.reset();
    }
  }
  root.Finish();
}

}  // namespace

const EnumNames<DeviceKind>& DeviceKindNames() {
  static constexpr EnumNames<DeviceKind> kNames("device kind", kKinds);
  return kNames;
}

const char* ToString(DeviceKind kind) { return DeviceKindNames().ToString(kind); }

int Cluster::Find(absl::string_view device) const {
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].name == device) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<Cluster> ParseCluster(absl::string_view json_text, std::string source) {
  ASSIGN_OR_RETURN(auto doc, ConfigDocument::FromString(json_text, std::move(source)));
  Cluster c;
  ParseClusterObject(doc->Root(), &c);
  RETURN_IF_ERROR(doc->status());
  return c;
}

absl::StatusOr<Cluster> LoadCluster(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("clusters", name_or_path));
  Cluster c;
  ParseClusterObject(doc->Root(), &c);
  RETURN_IF_ERROR(doc->status());
  return c;
}

std::vector<std::string> BuiltinClusterNames() { return BuiltinConfigNames("clusters"); }

}  // namespace neupims::hw::cluster
