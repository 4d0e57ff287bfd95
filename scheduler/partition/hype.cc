#include "scheduler/partition/hype.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"

namespace neupims::scheduler::partition {
namespace {

constexpr double kTimeEpsS = 1e-12;

constexpr EnumName<InputSize> kInputSizes[] = {
    {"small", InputSize::kSmall}, {"medium", InputSize::kMedium}, {"large", InputSize::kLarge}};
constexpr EnumName<HypeDevice> kDevices[] = {{"gpu", HypeDevice::kGpu},
                                             {"fpga", HypeDevice::kFpga}};
constexpr EnumName<PlacementReason> kReasons[] = {
    {"no-fpga-kernel", PlacementReason::kNoFpgaKernel},
    {"filtered", PlacementReason::kFiltered},
    {"transfer-not-hidden", PlacementReason::kTransferNotHidden},
    {"prolongs-critical-path", PlacementReason::kProlongsCriticalPath},
    {"filter-and-faster", PlacementReason::kFilterAndFaster},
    {"off-critical-path", PlacementReason::kOffCriticalPath}};

}  // namespace

const EnumNames<InputSize>& InputSizeNames() {
  static constexpr EnumNames<InputSize> kNames("input size", kInputSizes);
  return kNames;
}
const EnumNames<HypeDevice>& HypeDeviceNames() {
  static constexpr EnumNames<HypeDevice> kNames("device", kDevices);
  return kNames;
}
const EnumNames<PlacementReason>& PlacementReasonNames() {
  static constexpr EnumNames<PlacementReason> kNames("placement reason", kReasons);
  return kNames;
}

InputSize ClassifyInputSize(const std::vector<int64_t>& dims) {
  const int64_t largest = dims.empty() ? 0 : *std::max_element(dims.begin(), dims.end());
  if (largest < 1024) return InputSize::kSmall;
  if (largest < 4096) return InputSize::kMedium;
  return InputSize::kLarge;
}

// ---------------------------------------------------------------------------------------------
// Sec. 3.2: the offload filter.

absl::StatusOr<OffloadThresholds> DeriveOffloadThresholds(
    const std::vector<HypeKindProfile>& profiles, const std::vector<std::string>& from) {
  OffloadThresholds t;
  for (const std::string& kind : from) {
    bool any = false;
    for (const HypeKindProfile& p : profiles) {
      if (p.kind != kind || !p.fpga || p.fpga->time_s > p.gpu.time_s) continue;
      t.mem_bw_bytes_per_s = std::max(t.mem_bw_bytes_per_s, p.gpu.mem_bw_bytes_per_s);
      t.ipc = std::max(t.ipc, p.gpu.ipc);
      any = true;
    }
    if (!any) {
      return absl::InvalidArgumentError(absl::StrCat(
          "threshold kind ", kind, ": no input size whose FPGA kernel is no slower than the GPU"));
    }
  }
  return t;
}

bool PassesOffloadFilter(const GpuOpProfile& gpu, const OffloadThresholds& t) {
  return gpu.mem_bw_bytes_per_s <= t.mem_bw_bytes_per_s && gpu.ipc <= t.ipc;
}

// ---------------------------------------------------------------------------------------------
// Sec. 3.3: eq. 1 and the kernel variants.

double LatencyIndicator(const MatMulDims& d, const FpgaKernelConfig& c) {
  // Eq. 1: the input dimension sizes over work_group_size x F_max(cu_num, simd_w, ul). With
  // N_height = M_width among the factors and F_max in Hz this gives the paper's 81.81 / 142.57.
  const double work = static_cast<double>(d.m_height) * static_cast<double>(d.m_width) *
                      static_cast<double>(d.m_width) * static_cast<double>(d.n_width);
  return work / (static_cast<double>(c.work_group_size) * c.fmax_hz);
}

absl::StatusOr<KernelVariantChoice> ChooseKernelConfig(const KernelVariantSpace& space) {
  if (space.configs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel ", space.kind, "/", InputSizeNames().ToString(space.size), ": no configurations"));
  }
  KernelVariantChoice best{.config = -1, .latency_indicator = 0};
  for (size_t i = 0; i < space.configs.size(); ++i) {
    const double li = LatencyIndicator(space.dims, space.configs[i]);
    if (best.config < 0 || li < best.latency_indicator) {
      best = {.config = static_cast<int>(i), .latency_indicator = li};
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// The workload.

namespace {

const HypeKindProfile* FindProfile(const std::vector<HypeKindProfile>& profiles,
                                   const std::string& kind, InputSize size) {
  for (const HypeKindProfile& p : profiles) {
    if (p.kind == kind && p.size == size) return &p;
  }
  return nullptr;
}

}  // namespace

const HypeKindProfile& HypeWorkload::ProfileOf(const HypeOp& op) const {
  return *FindProfile(profiles, op.kind, op.size);
}

absl::Status HypeWorkload::Validate() const {
  const HypeSystem& s = system;
  if (s.fpga_units < 1 || s.gpu_link_bytes_per_s <= 0 || s.fpga_link_bytes_per_s <= 0 ||
      s.gpu_idle_w < 0 || s.fpga_idle_w < 0 || s.host_w < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": system: need fpga_units >= 1, positive links, powers >= 0"));
  }
  for (const HypeKindProfile& p : profiles) {
    // A zero-time op would never complete in the runtime scheduler (it waits for an end after
    // the current instant), so times must be positive.
    const bool bad = !(p.gpu.time_s > 0) || p.gpu.peak_power_w < 0 ||
                     (p.fpga && (!(p.fpga->time_s > 0) || p.fpga->peak_power_w < 0));
    if (bad) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": profile ", p.kind, "/",
                                                     InputSizeNames().ToString(p.size),
                                                     ": times must be > 0 and powers >= 0"));
    }
  }
  std::set<std::string> names;
  for (size_t i = 0; i < ops.size(); ++i) {
    const HypeOp& op = ops[i];
    if (!names.insert(op.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": duplicate op ", op.name));
    }
    if (FindProfile(profiles, op.kind, op.size) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": op ", op.name, ": no profile for ",
                                                     op.kind, "/",
                                                     InputSizeNames().ToString(op.size)));
    }
    for (int d : op.deps) {
      if (d < 0 || d >= static_cast<int>(i)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": op ", op.name, ": dependencies must be earlier ops"));
      }
    }
    if (op.transfer_bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": op ", op.name, ": negative bytes"));
    }
  }
  return absl::OkStatus();
}

namespace {

constexpr double kMs = 1e-3;
constexpr double kGb = 1e9;

// Physically generous bounds, far beyond any part the paper profiles (Table 1: 0.008 ms to
// 15 ms, 13 W to 302 W, 38 GB/s, IPC 5.5). Unbounded, 1e308 W printed a 309-digit peak power,
// and a time of 0 or 1e308 ms stalled the runtime scheduler (an internal "made no progress"
// naming no file or field). A time is 1 ns to 1e6 s: at 1e6 s a double still resolves the
// scheduler's 1e-12 s tolerance relative to the step (1e9 ms * 2^-52 ~ 2e-10 s per op).
constexpr DoubleRange kTimeMs{.min = 1e-6, .max = 1e9};
constexpr DoubleRange kPowerW{.min = 0, .max = 1e6};           // 1 MW
constexpr DoubleRange kBandwidthGbPerS{.min = 0, .max = 1e6};  // 1 PB/s
constexpr DoubleRange kIpc{.min = 0, .max = 1e6};
constexpr DoubleRange kFmaxMhz{.min = 1e-3, .max = 1e6};  // 1 kHz to 1 THz
constexpr IntRange kProbeBytes{.min = 1, .max = int64_t{1} << 40};
constexpr IntRange kTransferBytes{.min = 0, .max = int64_t{1} << 50};

InputSize ParseSize(ConfigObject& o) {
  const std::string s = o.Enum("size", InputSizeNames().Names());
  return InputSizeNames().Parse(s).value_or(InputSize::kSmall);
}

HypeKindProfile ParseProfile(ConfigObject& o) {
  HypeKindProfile p;
  p.kind = o.String("kind");
  p.size = ParseSize(o);
  ConfigObject g = o.Child("gpu");
  p.gpu.time_s = g.Double("time_ms", kTimeMs) * kMs;
  p.gpu.peak_power_w = g.Double("peak_w", kPowerW);
  p.gpu.avg_power_w = g.Double("avg_w", kPowerW);
  p.gpu.mem_bw_bytes_per_s = g.Double("mem_bw_gb_per_s", kBandwidthGbPerS) * kGb;
  p.gpu.ipc = g.Double("ipc", kIpc);
  g.Finish();
  if (o.Has("fpga")) {
    ConfigObject f = o.Child("fpga");
    p.fpga = FpgaOpProfile{.time_s = f.Double("time_ms", kTimeMs) * kMs,
                           .peak_power_w = f.Double("peak_w", kPowerW),
                           .avg_power_w = f.Double("avg_w", kPowerW)};
    f.Finish();
  }
  o.Finish();
  return p;
}

KernelVariantSpace ParseKernel(ConfigObject& o) {
  KernelVariantSpace k;
  k.kind = o.String("kind");
  k.size = ParseSize(o);
  std::vector<int64_t> dims = o.IntList("dims", {.min = 1, .max = int64_t{1} << 32});
  if (dims.size() == 3) {
    k.dims = {.m_height = dims[0], .m_width = dims[1], .n_width = dims[2]};
  } else {
    o.Error("dims", "expected [M_height, M_width, N_width]");
  }
  for (ConfigObject& c : o.Objects("configs")) {
    const IntRange positive{.min = 1, .max = 1 << 20};
    k.configs.push_back({.cu_num = static_cast<int>(c.Int("cu_num", positive)),
                         .simd_width = static_cast<int>(c.Int("simd_width", positive)),
                         .work_group_size = static_cast<int>(c.Int("work_group_size", positive)),
                         .unroll = static_cast<int>(c.Int("unroll", positive)),
                         .fmax_hz = c.Double("fmax_mhz", kFmaxMhz) * 1e6});
    c.Finish();
  }
  o.Finish();
  return k;
}

void ParseSystem(ConfigObject& s, HypeSystem* sys) {
  sys->fpga_units = static_cast<int>(s.Int("fpga_units", {.min = 1, .max = 1024}));
  sys->gpu_idle_w = s.Double("gpu_idle_w", kPowerW);
  sys->fpga_idle_w = s.Double("fpga_idle_w", kPowerW);
  sys->host_w = s.Double("host_w", kPowerW);
  // Sec. 3.4: one probe transfer timed host<->GPU and host<->FPGA over PCIe 3.0.
  ConfigObject probe = s.Child("transfer_probe");
  const double bytes = static_cast<double>(probe.Int("bytes", kProbeBytes));
  sys->gpu_link_bytes_per_s = bytes / (probe.Double("gpu_ms", kTimeMs) * kMs);
  sys->fpga_link_bytes_per_s = bytes / (probe.Double("fpga_ms", kTimeMs) * kMs);
  probe.Finish();
  s.Finish();
}

std::vector<HypeOp> ParseOps(ConfigObject& root) {
  std::vector<HypeOp> ops;
  std::map<std::string, int> index;
  for (ConfigObject& o : root.Objects("ops", "name")) {
    HypeOp op;
    op.name = o.String("name");
    op.kind = o.String("kind");
    // Sec. 3.3: the kernel variant follows the input's size class, given or from its dims.
    if (o.Has("dims")) {
      op.size = ClassifyInputSize(o.IntList("dims", {.min = 1, .max = int64_t{1} << 40}));
      if (o.Has("size")) o.Error("size", "give either size or dims, not both");
    } else {
      op.size = ParseSize(o);
    }
    if (o.Has("deps")) {
      for (const std::string& d : o.StringList("deps")) {
        auto it = index.find(d);
        if (it == index.end()) {
          o.Error("deps", absl::StrCat("'", d, "' is not an earlier op"));
        } else {
          op.deps.push_back(it->second);
        }
      }
    }
    op.transfer_bytes = o.OptionalInt("transfer_bytes", 0, kTransferBytes);
    o.Finish();
    index[op.name] = static_cast<int>(ops.size());
    ops.push_back(std::move(op));
  }
  return ops;
}

}  // namespace

absl::StatusOr<HypeWorkload> LoadHypeWorkload(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("hype", name_or_path));
  ConfigObject root = doc->Root();
  HypeWorkload w;
  w.name = root.String("name");
  w.source = root.OptionalString("source", "");
  ConfigObject sys = root.Child("system");
  ParseSystem(sys, &w.system);
  w.threshold_kinds = root.StringList("threshold_kinds");
  for (ConfigObject& o : root.Objects("profiles")) w.profiles.push_back(ParseProfile(o));
  if (root.Has("kernels")) {
    for (ConfigObject& o : root.Objects("kernels")) w.kernels.push_back(ParseKernel(o));
  }
  w.ops = ParseOps(root);
  root.Finish();
  RETURN_IF_ERROR(doc->status());
  RETURN_IF_ERROR(w.Validate());
  return w;
}

std::vector<std::string> BuiltinHypeWorkloadNames() { return BuiltinConfigNames("hype"); }

// ---------------------------------------------------------------------------------------------
// Sec. 3.3: critical path analysis.

namespace {

bool NeedsTransfer(const HypeWorkload& w, const std::vector<HypeDevice>& placement, int i) {
  for (int d : w.ops[i].deps) {
    if (placement[d] != placement[i]) return true;
  }
  return false;
}

double DeviceTimeS(const HypeWorkload& w, int i, HypeDevice device) {
  const HypeKindProfile& p = w.ProfileOf(w.ops[i]);
  return device == HypeDevice::kGpu ? p.gpu.time_s : p.fpga->time_s;
}

double DurationS(const HypeWorkload& w, const std::vector<HypeDevice>& placement, int i) {
  const double transfer =
      NeedsTransfer(w, placement, i) ? w.system.TransferS(w.ops[i].transfer_bytes) : 0;
  return transfer + DeviceTimeS(w, i, placement[i]);
}

// Earliest finish of each op (unbounded devices: the dataflow graph's own critical path).
std::vector<double> EarliestFinish(const HypeWorkload& w,
                                   const std::vector<HypeDevice>& placement) {
  std::vector<double> finish(w.ops.size(), 0);
  for (size_t i = 0; i < w.ops.size(); ++i) {
    double start = 0;
    for (int d : w.ops[i].deps) start = std::max(start, finish[d]);
    finish[i] = start + DurationS(w, placement, static_cast<int>(i));
  }
  return finish;
}

// Total float of each op: latest finish (backward pass) minus earliest finish.
std::vector<double> Slack(const HypeWorkload& w, const std::vector<HypeDevice>& placement) {
  const std::vector<double> finish = EarliestFinish(w, placement);
  const double length = finish.empty() ? 0 : *std::max_element(finish.begin(), finish.end());
  std::vector<double> latest(w.ops.size(), length);
  for (int i = static_cast<int>(w.ops.size()) - 1; i >= 0; --i) {
    const double latest_start = latest[i] - DurationS(w, placement, i);
    for (int d : w.ops[i].deps) latest[d] = std::min(latest[d], latest_start);
  }
  std::vector<double> slack(w.ops.size());
  for (size_t i = 0; i < w.ops.size(); ++i) slack[i] = latest[i] - finish[i];
  return slack;
}

// Case 1 (sec. 3.4): the transfer must be shorter than the GPU op issued right before op i.
bool TransferHidden(const HypeWorkload& w, const std::vector<HypeDevice>& placement, int i) {
  if (!NeedsTransfer(w, placement, i)) return true;
  for (int j = i - 1; j >= 0; --j) {
    if (placement[j] != HypeDevice::kGpu) continue;
    return w.system.TransferS(w.ops[i].transfer_bytes) < DeviceTimeS(w, j, HypeDevice::kGpu);
  }
  return false;  // nothing on the GPU before it to hide the transfer behind
}

}  // namespace

double CriticalPathS(const HypeWorkload& w, const std::vector<HypeDevice>& placement) {
  const std::vector<double> finish = EarliestFinish(w, placement);
  return finish.empty() ? 0 : *std::max_element(finish.begin(), finish.end());
}

absl::StatusOr<HypePlan> PlanHype(const HypeWorkload& w) {
  RETURN_IF_ERROR(w.Validate());
  HypePlan plan;
  ASSIGN_OR_RETURN(plan.thresholds, DeriveOffloadThresholds(w.profiles, w.threshold_kinds));
  for (const KernelVariantSpace& k : w.kernels) {
    ASSIGN_OR_RETURN(KernelVariantChoice c, ChooseKernelConfig(k));
    plan.kernel_choices.push_back(c);
  }
  std::vector<HypeDevice> placement(w.ops.size(), HypeDevice::kGpu);
  const std::vector<double> slack = Slack(w, placement);
  plan.gpu_only_critical_path_s = CriticalPathS(w, placement);
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const HypeKindProfile& p = w.ProfileOf(w.ops[i]);
    OpPlacement& o = plan.ops.emplace_back();
    o.gpu_slack_s = slack[i];
    o.passes_filter = PassesOffloadFilter(p.gpu, plan.thresholds);
    if (!p.fpga) continue;  // kNoFpgaKernel
    const bool faster = p.fpga->time_s <= p.gpu.time_s;
    const bool critical = slack[i] <= kTimeEpsS * std::max(1.0, plan.gpu_only_critical_path_s);
    if (!(o.passes_filter && faster) && critical) {
      o.reason = PlacementReason::kFiltered;
      continue;
    }
    placement[i] = HypeDevice::kFpga;
    if (!TransferHidden(w, placement, static_cast<int>(i))) {
      placement[i] = HypeDevice::kGpu;
      o.reason = PlacementReason::kTransferNotHidden;
      continue;
    }
    if (CriticalPathS(w, placement) > plan.gpu_only_critical_path_s * (1 + 1e-12)) {
      placement[i] = HypeDevice::kGpu;
      o.reason = PlacementReason::kProlongsCriticalPath;
      continue;
    }
    o.device = HypeDevice::kFpga;
    o.reason = o.passes_filter && faster ? PlacementReason::kFilterAndFaster
                                         : PlacementReason::kOffCriticalPath;
  }
  plan.critical_path_s = CriticalPathS(w, placement);
  return plan;
}

std::vector<HypeDevice> Placement(const HypePlan& plan) {
  std::vector<HypeDevice> out;
  for (const OpPlacement& o : plan.ops) out.push_back(o.device);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sec. 3.4: the runtime scheduler.

namespace {

class Simulation {
 public:
  Simulation(const HypeWorkload& w, const std::vector<HypeDevice>& placement,
             std::optional<double> cap)
      : w_(w),
        placement_(placement),
        cap_(cap),
        fpga_busy_until_(w.system.fpga_units, 0),
        ran_on_(placement),
        ops_(w.ops.size()),
        started_(w.ops.size(), false) {}

  absl::Status Run() {
    RETURN_IF_ERROR(CheckEachOpFitsAlone());
    size_t done = 0;
    double now = 0;
    while (done < w_.ops.size()) {
      done += StartGpu(now, /*fpga_ops=*/false);
      for (int u = 0; u < w_.system.fpga_units; ++u) done += StartFpga(u, now);
      done += StartGpu(now, /*fpga_ops=*/true);
      const double next = NextCompletion(now);
      if (std::isinf(next)) {
        if (done < w_.ops.size()) return absl::InternalError("Hype scheduler made no progress");
        break;
      }
      now = next;
    }
    return absl::OkStatus();
  }

  HypeSchedule Result() const;

 private:
  double PeakW(int i, HypeDevice d) const {
    const HypeKindProfile& p = w_.ProfileOf(w_.ops[i]);
    return d == HypeDevice::kGpu ? p.gpu.peak_power_w : p.fpga->peak_power_w;
  }
  double IdleW(HypeDevice d) const {
    return d == HypeDevice::kGpu ? w_.system.gpu_idle_w : w_.system.fpga_idle_w;
  }
  bool HasFpgaKernel(int i) const { return w_.ProfileOf(w_.ops[i]).fpga.has_value(); }

  // System power at `now` if op i started on an idle device `d`.
  bool Fits(int i, HypeDevice d, double now) const {
    if (!cap_) return true;
    return PowerAt(now) - IdleW(d) + PeakW(i, d) <= *cap_ + 1e-9;
  }

  double PowerAt(double now) const {
    double p = w_.system.IdlePowerW();
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (started_[i] && ops_[i].start_s <= now && ops_[i].end_s > now) {
        p += ops_[i].power_w - IdleW(ops_[i].device);
      }
    }
    return p;
  }

  bool Ready(int i, double now) const {
    if (started_[i]) return false;
    for (int d : w_.ops[i].deps) {
      if (!started_[d] || ops_[d].end_s > now) return false;
    }
    return true;
  }

  void Start(int i, HypeDevice d, int unit, double now) {
    ran_on_[i] = d;
    double transfer = 0;
    for (int p : w_.ops[i].deps) {
      if (ran_on_[p] != d) transfer = w_.system.TransferS(w_.ops[i].transfer_bytes);
    }
    const double run = d == HypeDevice::kGpu ? w_.ProfileOf(w_.ops[i]).gpu.time_s
                                             : w_.ProfileOf(w_.ops[i]).fpga->time_s;
    ops_[i] = {.device = d,
               .unit = unit,
               .start_s = now,
               .end_s = now + transfer + run,
               .power_w = PeakW(i, d)};
    started_[i] = true;
  }

  // Case 1: the GPU runs ops placed on it; with `fpga_ops` it runs a ready FPGA-placed op that
  // no free FPGA unit can take, rather than idle ("without waiting").
  int StartGpu(double now, bool fpga_ops) {
    if (gpu_busy_until_ > now) return 0;
    const HypeDevice wanted = fpga_ops ? HypeDevice::kFpga : HypeDevice::kGpu;
    for (int i = 0; i < static_cast<int>(w_.ops.size()); ++i) {
      if (placement_[i] != wanted || !Ready(i, now) || !Fits(i, HypeDevice::kGpu, now)) continue;
      if (fpga_ops && AnyFpgaFree(now) && Fits(i, HypeDevice::kFpga, now)) continue;
      Start(i, HypeDevice::kGpu, 0, now);
      gpu_busy_until_ = ops_[i].end_s;
      return 1;
    }
    return 0;
  }

  bool AnyFpgaFree(double now) const {
    for (double t : fpga_busy_until_) {
      if (t <= now) return true;
    }
    return false;
  }

  int StartFpga(int unit, double now) {
    if (fpga_busy_until_[unit] > now) return 0;
    const bool gpu_idle = gpu_busy_until_ <= now;
    for (int i = 0; i < static_cast<int>(w_.ops.size()); ++i) {
      if (!Ready(i, now) || !HasFpgaKernel(i)) continue;
      // Case 2: a GPU op the cap keeps off the idle GPU may run on the FPGA instead.
      const bool take = placement_[i] == HypeDevice::kFpga || (cap_ && gpu_idle);
      if (!take || !Fits(i, HypeDevice::kFpga, now)) continue;
      Start(i, HypeDevice::kFpga, unit, now);
      fpga_busy_until_[unit] = ops_[i].end_s;
      return 1;
    }
    return 0;
  }

  double NextCompletion(double now) const {
    double next = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (started_[i] && ops_[i].end_s > now) next = std::min(next, ops_[i].end_s);
    }
    return next;
  }

  absl::Status CheckEachOpFitsAlone() const {
    if (!cap_) return absl::OkStatus();
    const double idle = w_.system.IdlePowerW();
    if (idle > *cap_) {
      return absl::InvalidArgumentError(
          absl::StrCat("power cap ", *cap_, " W is below the idle system power ", idle, " W"));
    }
    for (int i = 0; i < static_cast<int>(w_.ops.size()); ++i) {
      double best = idle - IdleW(HypeDevice::kGpu) + PeakW(i, HypeDevice::kGpu);
      if (HasFpgaKernel(i)) {
        best = std::min(best, idle - IdleW(HypeDevice::kFpga) + PeakW(i, HypeDevice::kFpga));
      }
      if (best > *cap_) {
        return absl::InvalidArgumentError(absl::StrCat("op ", w_.ops[i].name, " needs ", best,
                                                       " W alone, above the power cap of ", *cap_,
                                                       " W"));
      }
    }
    return absl::OkStatus();
  }

  const HypeWorkload& w_;
  const std::vector<HypeDevice>& placement_;
  std::optional<double> cap_;
  double gpu_busy_until_ = 0;
  std::vector<double> fpga_busy_until_;
  std::vector<HypeDevice> ran_on_;  // where each op ran (its placement until it starts)
  std::vector<SimulatedOp> ops_;
  std::vector<bool> started_;
};

HypeSchedule Simulation::Result() const {
  HypeSchedule s;
  s.ops = ops_;
  std::vector<double> times = {0};
  for (const SimulatedOp& o : ops_) {
    times.push_back(o.start_s);
    times.push_back(o.end_s);
    s.makespan_s = std::max(s.makespan_s, o.end_s);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  for (size_t k = 0; k < times.size() && times[k] < s.makespan_s; ++k) {
    const double p = PowerAt(times[k]);
    if (s.power.empty() || s.power.back().power_w != p) s.power.push_back({times[k], p});
    s.energy_j += p * (times[k + 1] - times[k]);
    s.peak_power_w = std::max(s.peak_power_w, p);
  }
  return s;
}

}  // namespace

absl::StatusOr<HypeSchedule> SimulateHype(const HypeWorkload& w,
                                          const std::vector<HypeDevice>& placement,
                                          std::optional<double> power_cap_w) {
  // Checked here, not only by the CLI: a NaN cap compares false with every power, so no op would
  // ever start and the caller would get the scheduler's internal "made no progress".
  if (power_cap_w && !(std::isfinite(*power_cap_w) && *power_cap_w >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "power_cap_w must be a finite, non-negative number of watts, got ", *power_cap_w));
  }
  RETURN_IF_ERROR(w.Validate());
  if (placement.size() != w.ops.size()) {
    return absl::InvalidArgumentError("placement: one device per op expected");
  }
  for (size_t i = 0; i < placement.size(); ++i) {
    if (placement[i] == HypeDevice::kFpga && !w.ProfileOf(w.ops[i]).fpga) {
      return absl::InvalidArgumentError(
          absl::StrCat("op ", w.ops[i].name, " placed on the FPGA has no FPGA kernel"));
    }
  }
  Simulation sim(w, placement, power_cap_w);
  RETURN_IF_ERROR(sim.Run());
  return sim.Result();
}

}  // namespace neupims::scheduler::partition
