#include "tools/neupims/hw_commands.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/builtin_configs.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "hw/device.h"
#include "hw/dram/timing_checker.h"
#include "hw/pim/issue_limit.h"
#include "hw/pim/mem_traffic.h"
#include "hw/pim/tile_cost.h"
#include "hw/registry.h"
#include "nlohmann/json.hpp"
#include "tools/neupims/cli_util.h"
#include "tools/neupims/enum_flag.h"
#include "tools/workload/range_flag.h"

namespace neupims::cli {
namespace {

using nlohmann::json;

struct CommonOptions {
  std::string device = "neupims";
  hw::DetailLevel level = hw::DetailLevel::kCommand;
  bool json = false;
};

void AddCommon(CLI::App* cmd, CommonOptions* o) {
  cmd->add_option(
         "--device", o->device,
         absl::StrCat("Device: built-in name (", absl::StrJoin(BuiltinConfigNames("devices"), ", "),
                      ") or a JSON file path"))
      ->capture_default_str();
  AddEnumFlag(cmd, "--level", hw::DetailLevelNames(), &o->level,
              "Level of detail: command (every DRAM/PIM command) or analytic (closed form)");
  cmd->add_flag("--json", o->json, "Print the result as JSON instead of a table");
}

struct Models {
  hw::DeviceConfig device;
  std::unique_ptr<hw::NpuModel> npu;
  std::unique_ptr<hw::PimModel> pim;  // null when the device has no PIM
};

// Where `hw attention` / `hw gemv` run; unset (`--on auto`): on the PIM if the device has one.
enum class Unit { kPim, kNpu };
const EnumNames<Unit>& UnitNames() {
  static constexpr EnumName<Unit> kEntries[] = {{"pim", Unit::kPim}, {"npu", Unit::kNpu}};
  static constexpr EnumNames<Unit> kNames("unit", kEntries);
  return kNames;
}

// True to run on the PIM; FailedPrecondition if `--on pim` names a device without one.
absl::StatusOr<bool> RunsOnPim(std::optional<Unit> on, const Models& m) {
  if (on == Unit::kNpu) return false;
  if (m.pim != nullptr) return true;
  if (!on.has_value()) return false;
  return absl::FailedPreconditionError(
      absl::StrCat("device '", m.device.name, "' has no PIM; use --on npu"));
}

absl::StatusOr<Models> MakeModels(const CommonOptions& o, const hw::PimModelOptions& pim_opts) {
  Models m;
  ASSIGN_OR_RETURN(m.device, hw::LoadDeviceConfig(o.device));
  const hw::DetailModels level = hw::DetailModelsFor(o.level);
  ASSIGN_OR_RETURN(m.npu, hw::CreateNpuModel(level.npu, m.device));
  if (m.device.hbm.pim.enabled) {
    ASSIGN_OR_RETURN(m.pim, hw::CreatePimModel(level.pim, m.device, pim_opts));
  }
  return m;
}

// An operand must fit the memory holding it: a PIM operand one channel (the matrix of a GEMV,
// the K and V of an attention), an NPU one the device's HBM. Larger shapes (`hw gemv --rows
// 2^30 --cols 2^30` is 2 EiB) used to be reported in closed form or, at the command level,
// simulated for hours.
absl::Status CheckFits(absl::string_view what, double bytes, bool on_pim, const Models& m) {
  const hw::HbmOrganization& org = m.device.hbm.org;
  const double channel = static_cast<double>(org.channel_capacity_bytes());
  const double capacity = on_pim ? channel : channel * org.channels;
  if (bytes <= capacity) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s is %.4g bytes, more than %s of device '%s' holds (%.0f bytes)", what,
                      bytes, on_pim ? "one PIM channel" : "the HBM", m.device.name, capacity));
}

json CommandsJson(const hw::CommandCounts& c) {
  json j = json::object();
  for (int t = 0; t < hw::kNumCommandTypes; ++t) {
    if (c[t] != 0) j[hw::CommandName(static_cast<hw::CommandType>(t))] = c[t];
  }
  return j;
}

// ---- PIM results ---------------------------------------------------------------------------

struct PimRunOptions {
  double mem_demand = 0;
  hw::MemTraffic::Pattern mem_pattern = hw::MemTraffic::Pattern::kStream;
  double write_fraction = 0;
  int64_t refresh_phase = 0;
  int phases = 1;
  std::string trace_path;
  bool check = false;
};

void AddPimRunOptions(CLI::App* cmd, PimRunOptions* o) {
  cmd->add_option("--mem-demand", o->mem_demand,
                  "Concurrent NPU MEM traffic on the channel, as a fraction of its peak bandwidth")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  AddEnumFlag(cmd, "--mem-pattern", hw::MemPatternNames(), &o->mem_pattern, "MEM traffic pattern");
  cmd->add_option("--mem-write-fraction", o->write_fraction, "Share of MEM requests that write")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--refresh-phase", o->refresh_phase,
                  "Command level: cycles since the last refresh when the op starts")
      // Taken modulo tREFI; bounded so that adding the --phases steps cannot overflow.
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--phases", o->phases,
                  "Command level: average over this many evenly spaced refresh phases (the "
                  "analytic level reports that expectation; use 16-64 to compare short ops)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--trace", o->trace_path,
                  "Command level: write the issued command trace to this CSV file")
      ->check(OutputFile());
  cmd->add_flag("--check", o->check,
                "Command level: replay the trace through the independent timing checker");
}

hw::MemTraffic ToTraffic(const PimRunOptions& o) {
  hw::MemTraffic t;
  t.demand = o.mem_demand;
  t.write_fraction = o.write_fraction;
  t.pattern = o.mem_pattern;
  return t;
}

absl::Status WriteTrace(const std::string& path, const std::vector<hw::IssuedCommand>& trace) {
  std::string csv = "cycle,command,rank,bank_group,bank,row,col,steps\n";
  for (const hw::IssuedCommand& x : trace) {
    absl::StrAppend(&csv, x.cycle, ",", hw::CommandName(x.cmd.type), ",", int{x.cmd.rank}, ",",
                    int{x.cmd.bank_group}, ",", int{x.cmd.bank}, ",", x.cmd.row, ",", x.cmd.col,
                    ",", x.cmd.steps, "\n");
  }
  return WriteFile(path, csv);
}

int ReportPim(const char* what, const json& shape, const CommonOptions& common,
              const PimRunOptions& run, const Models& m, const hw::PimOpResult& r) {
  const hw::HbmSpec& spec = m.device.hbm;
  const double seconds = spec.clock().CyclesToSeconds(static_cast<double>(r.cycles));
  int violations = -1;
  if (run.check || !run.trace_path.empty()) {
    if (common.level != hw::DetailLevel::kCommand) {
      return ReportError(absl::InvalidArgumentError("--trace and --check need --level command"));
    }
    if (!run.trace_path.empty()) {
      absl::Status s = WriteTrace(run.trace_path, r.trace);
      if (!s.ok()) return ReportError(s);
    }
    if (run.check) violations = static_cast<int>(hw::TimingChecker(spec).Check(r.trace).size());
  }
  const double total_j = r.energy.total_j();
  json j;
  j["operation"] = what;
  j["unit"] = "pim";
  j["device"] = m.device.name;
  j["level"] = hw::ToString(common.level);
  j["model"] = m.pim->name();
  j["row_buffers"] = hw::ToString(spec.pim.row_buffers);
  j["command_set"] = hw::ToString(spec.pim.command_set);
  j["shape"] = shape;
  j["cycles"] = r.cycles;
  j["time_ns"] = seconds * 1e9;
  j["tiles"] = r.tiles;
  j["vector_loads"] = r.vector_loads;
  j["dot_products"] = r.results;
  j["column_steps"] = r.column_steps;
  const int64_t instructions =
      hw::PimInstructions(r.tiles, r.results, r.vector_loads, r.column_steps, spec.pim.command_set);
  j["pim_instructions"] = instructions;
  j["macs"] = r.macs;
  j["refreshes"] = r.refreshes;
  j["mac_utilization"] = r.MacUtilization(spec);
  j["commands"] = CommandsJson(r.commands);
  j["energy_j"] = {{"pim", r.energy.pim_j},
                   {"activate", r.energy.activate_j},
                   {"read_write", r.energy.read_write_j},
                   {"refresh", r.energy.refresh_j},
                   {"background", r.energy.background_j},
                   {"total", total_j}};
  j["energy_per_mac_pj"] = r.macs > 0 ? total_j / static_cast<double>(r.macs) * 1e12 : 0.0;
  if (run.mem_demand > 0) {
    j["mem_traffic"] = {
        {"demand", run.mem_demand},
        {"pattern", hw::MemPatternNames().ToString(run.mem_pattern)},
        {"served_bytes_per_cycle", r.mem_bytes_per_cycle},
        {"served_fraction_of_peak", r.mem_bytes_per_cycle / spec.peak_bytes_per_cycle()},
        {"mean_latency_cycles", r.mem_latency_cycles}};
  }
  if (violations >= 0) j["timing_violations"] = violations;
  if (!run.trace_path.empty()) j["trace"] = run.trace_path;
  if (common.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return violations > 0 ? 1 : 0;
  }
  KeyValueTable t(
      absl::StrFormat("%s on one PIM channel: device %s (%s row buffers, %s commands), "
                      "%s model",
                      what, m.device.name, hw::ToString(spec.pim.row_buffers),
                      hw::ToString(spec.pim.command_set), m.pim->name()));
  t.Section("shape");
  for (auto it = shape.begin(); it != shape.end(); ++it) t.Add(it.key(), it.value().dump());
  t.Section("latency");
  t.Add("cycles (HBM clock)", FormatCount(static_cast<double>(r.cycles)));
  t.Add("time", FormatSi(seconds, "s"));
  t.Add("MAC utilisation", FormatPercent(r.MacUtilization(spec)));
  t.Add("refreshes",
        FormatFixed(r.refreshes,
                    run.phases > 1 || common.level == hw::DetailLevel::kAnalytic ? 2 : 0));
  t.Section("work");
  t.Add("tiles", FormatCount(static_cast<double>(r.tiles)));
  t.Add("vector loads", FormatCount(static_cast<double>(r.vector_loads)));
  t.Add("dot products", FormatCount(static_cast<double>(r.results)));
  t.Add("MACs", FormatCount(static_cast<double>(r.macs)));
  t.Add("PIM instructions", FormatCount(static_cast<double>(instructions)));
  t.Section("commands");
  for (int c = 0; c < hw::kNumCommandTypes; ++c) {
    if (r.commands[c] != 0) {
      t.Add(hw::CommandName(static_cast<hw::CommandType>(c)),
            FormatCount(static_cast<double>(r.commands[c])));
    }
  }
  t.Section("energy");
  t.Add("PIM commands", FormatSi(r.energy.pim_j, "J"));
  t.Add("ACT", FormatSi(r.energy.activate_j, "J"));
  t.Add("RD/WR", FormatSi(r.energy.read_write_j, "J"));
  t.Add("refresh", FormatSi(r.energy.refresh_j, "J"));
  t.Add("background", FormatSi(r.energy.background_j, "J"));
  t.Add("total", FormatSi(total_j, "J"));
  if (r.macs > 0) t.Add("per MAC", FormatSi(total_j / static_cast<double>(r.macs), "J"));
  if (run.mem_demand > 0) {
    t.Section("concurrent MEM traffic");
    t.Add("demanded", FormatPercent(run.mem_demand) + " of peak");
    t.Add("served", FormatPercent(r.mem_bytes_per_cycle / spec.peak_bytes_per_cycle()) +
                        " of peak (" + FormatFixed(r.mem_bytes_per_cycle, 1) + " B/cycle)");
    t.Add("mean latency", FormatFixed(r.mem_latency_cycles, 1) + " cycles");
  }
  if (violations >= 0) {
    t.Section("timing checker");
    t.Add("violations", std::to_string(violations));
  }
  if (!run.trace_path.empty()) t.Add("trace", run.trace_path);
  t.Print();
  return violations > 0 ? 1 : 0;
}

// ---- NPU results ---------------------------------------------------------------------------

int ReportNpu(const char* what, const json& shape, const CommonOptions& common, const Models& m,
              const hw::NpuOpResult& r) {
  const hw::NpuSpec& spec = m.device.npu;
  const double seconds = spec.clock().CyclesToSeconds(static_cast<double>(r.cycles));
  const double static_j = spec.energy.static_power_w * seconds;
  const double total_j = r.energy_j + static_j;
  json j;
  j["operation"] = what;
  j["unit"] = "npu";
  j["device"] = m.device.name;
  j["level"] = hw::ToString(common.level);
  j["model"] = m.npu->name();
  j["shape"] = shape;
  j["cycles"] = r.cycles;
  j["time_ns"] = seconds * 1e9;
  j["compute_cycles"] = r.compute_cycles;
  j["memory_cycles"] = r.memory_cycles;
  j["bound"] = r.memory_bound ? "memory" : "compute";
  j["systolic_utilization"] = r.ArrayUtilization(spec);
  j["vector_busy_cycles"] = r.vector_busy_cycles;
  j["macs"] = r.macs;
  j["hbm_bytes"] = r.hbm_bytes;
  j["hbm_bandwidth_utilization"] =
      r.cycles > 0 ? static_cast<double>(r.hbm_bytes) / (spec.hbm_bytes_per_cycle * r.cycles) : 0;
  j["energy_j"] = {{"dynamic", r.energy_j}, {"static", static_j}, {"total", total_j}};
  if (common.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  KeyValueTable t(
      absl::StrFormat("%s on the NPU: device %s, %s model", what, m.device.name, m.npu->name()));
  t.Section("shape");
  for (auto it = shape.begin(); it != shape.end(); ++it) t.Add(it.key(), it.value().dump());
  t.Section("latency");
  t.Add("cycles (NPU clock)", FormatCount(static_cast<double>(r.cycles)));
  t.Add("time", FormatSi(seconds, "s"));
  t.Add("compute alone", FormatCount(static_cast<double>(r.compute_cycles)) + " cycles");
  t.Add("memory alone", FormatCount(static_cast<double>(r.memory_cycles)) + " cycles");
  t.Add("bound by", r.memory_bound ? "memory bandwidth" : "compute");
  t.Section("utilisation");
  t.Add("systolic arrays", FormatPercent(r.ArrayUtilization(spec)));
  t.Add("HBM bandwidth", FormatPercent(j["hbm_bandwidth_utilization"].get<double>()));
  t.Add("vector busy", FormatCount(static_cast<double>(r.vector_busy_cycles)) + " unit-cycles");
  t.Section("work");
  t.Add("MACs", FormatCount(static_cast<double>(r.macs)));
  t.Add("HBM bytes", FormatCount(static_cast<double>(r.hbm_bytes)));
  t.Section("energy");
  t.Add("dynamic", FormatSi(r.energy_j, "J"));
  t.Add("static", FormatSi(static_j, "J"));
  t.Add("total", FormatSi(total_j, "J"));
  if (r.macs > 0) t.Add("per MAC", FormatSi(total_j / static_cast<double>(r.macs), "J"));
  t.Print();
  return 0;
}

// Sums NPU op results executed back to back.
void Accumulate(hw::NpuOpResult* acc, const hw::NpuOpResult& r, int64_t times) {
  acc->cycles += r.cycles * times;
  acc->compute_cycles += r.compute_cycles * times;
  acc->memory_cycles += r.memory_cycles * times;
  acc->array_busy_cycles += r.array_busy_cycles * times;
  acc->vector_busy_cycles += r.vector_busy_cycles * times;
  acc->macs += r.macs * times;
  acc->hbm_bytes += r.hbm_bytes * times;
  acc->sram_bytes += r.sram_bytes * times;
  acc->energy_j += r.energy_j * static_cast<double>(times);
}

// Attention of one request on the NPU (the npu-only baseline). The keys of all heads stream
// through the arrays as one GEMV-shaped GEMM (1 x d by d x heads*seq) and so do the values
// (1 x seq by seq x heads*d): every KV byte is read from HBM once, the weight-preload pipeline
// stays full across heads, and a softmax runs per head row.
absl::StatusOr<hw::NpuOpResult> NpuAttention(const hw::NpuModel& npu, int64_t seq, int heads,
                                             int head_dim) {
  hw::NpuOpResult total;
  ASSIGN_OR_RETURN(hw::NpuOpResult logit, npu.Gemm({1, head_dim, seq * heads, true, false}));
  ASSIGN_OR_RETURN(hw::NpuOpResult softmax, npu.Vector({hw::VectorOp::kSoftmax, heads, seq}));
  ASSIGN_OR_RETURN(hw::NpuOpResult attend,
                   npu.Gemm({1, seq, static_cast<int64_t>(head_dim) * heads, true, false}));
  Accumulate(&total, logit, 1);
  Accumulate(&total, softmax, 1);
  Accumulate(&total, attend, 1);
  total.memory_bound = total.memory_cycles > total.compute_cycles;
  return total;
}

}  // namespace

void RegisterHwCommands(CLI::App& app, int* exit_code) {
  CLI::App* hw_cmd =
      app.add_subcommand("hw",
                         "Run one operation on the simulated hardware and print cycles, commands, "
                         "utilisation and energy");
  hw_cmd->require_subcommand(1);

  // ---- hw attention -------------------------------------------------------------------------
  {
    auto common = std::make_shared<CommonOptions>();
    auto run = std::make_shared<PimRunOptions>();
    auto seq = std::make_shared<int64_t>(1024);
    auto heads = std::make_shared<int>(8);
    auto kv_heads = std::make_shared<int>(0);
    auto head_dim = std::make_shared<int>(128);
    auto on = std::make_shared<std::optional<Unit>>();
    CLI::App* c = hw_cmd->add_subcommand(
        "attention",
        "Multi-head attention of one request in one decoder layer (logit K^T q, softmax, attend "
        "p V) on the PIM channel holding its KV cache, or on the NPU");
    AddCommon(c, common.get());
    c->add_option("--seq-len", *seq, "Tokens in the KV cache")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
        ->capture_default_str();
    c->add_option("--heads", *heads, "Query heads on this device (after tensor parallelism)")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    c->add_option("--kv-heads", *kv_heads, "Key/value heads (GQA); default: --heads")
        ->check(CLI::Range(1, 4096));
    c->add_option("--head-dim", *head_dim, "Elements per head")
        ->check(CLI::Range(1, 65536))
        ->capture_default_str();
    AddOptionalEnumFlag(c, "--on", UnitNames(), on.get(), "auto",
                        "Where to run: pim, npu, or auto (pim if the device has PIM)");
    AddPimRunOptions(c, run.get());
    c->callback([=] {
      hw::PimModelOptions po{run->refresh_phase, run->phases,
                             !run->trace_path.empty() || run->check};
      auto models = MakeModels(*common, po);
      if (!models.ok()) {
        *exit_code = ReportError(models.status());
        return;
      }
      const int kv = *kv_heads > 0 ? *kv_heads : *heads;
      json shape = {
          {"seq_len", *seq}, {"heads", *heads}, {"kv_heads", kv}, {"head_dim", *head_dim}};
      const absl::StatusOr<bool> use_pim = RunsOnPim(*on, *models);
      if (!use_pim.ok()) {
        *exit_code = ReportError(use_pim.status());
        return;
      }
      // K and V of every KV head: PIM elements in a channel, NPU elements in the HBM.
      const int element_bytes =
          *use_pim ? models->device.hbm.pim.element_bytes : models->device.npu.element_bytes;
      const absl::Status fits = CheckFits(
          "the KV cache (2 x --seq-len x --kv-heads x --head-dim elements)",
          2.0 * static_cast<double>(*seq) * kv * *head_dim * element_bytes, *use_pim, *models);
      if (!fits.ok()) {
        *exit_code = ReportError(fits);
        return;
      }
      if (*use_pim) {
        auto r = models->pim->Attention({*seq, *heads, kv, *head_dim}, ToTraffic(*run));
        *exit_code = r.ok() ? ReportPim("attention", shape, *common, *run, *models, *r)
                            : ReportError(r.status());
      } else {
        auto r = NpuAttention(*models->npu, *seq, *heads, *head_dim);
        *exit_code =
            r.ok() ? ReportNpu("attention", shape, *common, *models, *r) : ReportError(r.status());
      }
    });
  }

  // ---- hw gemv --------------------------------------------------------------------------------
  {
    auto common = std::make_shared<CommonOptions>();
    auto run = std::make_shared<PimRunOptions>();
    auto rows = std::make_shared<int64_t>(4096);
    auto cols = std::make_shared<int64_t>(4096);
    auto on = std::make_shared<std::optional<Unit>>();
    CLI::App* c = hw_cmd->add_subcommand(
        "gemv",
        "Matrix-vector product y = M x with M (rows x cols) stored in one PIM channel "
        "(one matrix row per bank) or streamed by the NPU from HBM");
    AddCommon(c, common.get());
    c->add_option("--rows", *rows, "Matrix rows (outputs)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
        ->capture_default_str();
    c->add_option("--cols", *cols, "Matrix columns (vector length)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
        ->capture_default_str();
    AddOptionalEnumFlag(c, "--on", UnitNames(), on.get(), "auto",
                        "Where to run: pim, npu, or auto (pim if the device has PIM)");
    AddPimRunOptions(c, run.get());
    c->callback([=] {
      hw::PimModelOptions po{run->refresh_phase, run->phases,
                             !run->trace_path.empty() || run->check};
      auto models = MakeModels(*common, po);
      if (!models.ok()) {
        *exit_code = ReportError(models.status());
        return;
      }
      json shape = {{"rows", *rows}, {"cols", *cols}};
      const absl::StatusOr<bool> use_pim = RunsOnPim(*on, *models);
      if (!use_pim.ok()) {
        *exit_code = ReportError(use_pim.status());
        return;
      }
      const int element_bytes =
          *use_pim ? models->device.hbm.pim.element_bytes : models->device.npu.element_bytes;
      const absl::Status fits =
          CheckFits("the matrix (--rows x --cols elements)",
                    static_cast<double>(*rows) * static_cast<double>(*cols) * element_bytes,
                    *use_pim, *models);
      if (!fits.ok()) {
        *exit_code = ReportError(fits);
        return;
      }
      if (*use_pim) {
        auto r = models->pim->Gemv({*rows, *cols}, ToTraffic(*run));
        *exit_code =
            r.ok() ? ReportPim("gemv", shape, *common, *run, *models, *r) : ReportError(r.status());
      } else {
        auto r = models->npu->Gemm({1, *cols, *rows, true, false});
        *exit_code =
            r.ok() ? ReportNpu("gemv", shape, *common, *models, *r) : ReportError(r.status());
      }
    });
  }

  // ---- hw gemm --------------------------------------------------------------------------------
  {
    auto common = std::make_shared<CommonOptions>();
    auto m = std::make_shared<int64_t>(256);
    auto k = std::make_shared<int64_t>(4096);
    auto n = std::make_shared<int64_t>(4096);
    auto bw = std::make_shared<double>(1.0);
    auto act_hbm = std::make_shared<bool>(false);
    auto on_chip = std::make_shared<bool>(false);
    CLI::App* c = hw_cmd->add_subcommand(
        "gemm", "Y[m x n] = X[m x k] W[k x n] on the NPU systolic arrays, W streamed from HBM");
    AddCommon(c, common.get());
    c->add_option("-m,--m", *m, "Rows of X (tokens in the batch)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
        ->capture_default_str();
    c->add_option("-k,--k", *k, "Reduction dimension")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
        ->capture_default_str();
    c->add_option("-n,--n", *n, "Output features")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
        ->capture_default_str();
    c->add_option("--bandwidth-fraction", *bw, "Share of the HBM bandwidth the NPU gets")
        ->check(CLI::Range(1e-6, 1.0))
        ->capture_default_str();
    c->add_flag("--activations-from-hbm", *act_hbm, "Read X from and write Y to HBM");
    c->add_flag("--weights-on-chip", *on_chip, "W is already in the scratchpad");
    c->callback([=] {
      auto models = MakeModels(*common, {});
      if (!models.ok()) {
        *exit_code = ReportError(models.status());
        return;
      }
      hw::GemmShape g{*m, *k, *n, !*on_chip, *act_hbm};
      auto r = models->npu->Gemm(g, {*bw});
      json shape = {{"m", *m}, {"k", *k}, {"n", *n}, {"bandwidth_fraction", *bw}};
      *exit_code =
          r.ok() ? ReportNpu("gemm", shape, *common, *models, *r) : ReportError(r.status());
    });
  }

  // ---- hw vector ------------------------------------------------------------------------------
  {
    auto common = std::make_shared<CommonOptions>();
    auto op = std::make_shared<hw::VectorOp>(hw::VectorOp::kSoftmax);
    auto rows = std::make_shared<int64_t>(256);
    auto cols = std::make_shared<int64_t>(4096);
    CLI::App* c = hw_cmd->add_subcommand("vector", "A vector-unit operation over rows x cols");
    AddCommon(c, common.get());
    AddEnumFlag(c, "--op", hw::VectorOpNames(), op.get(),
                "softmax, layernorm, gelu, add or reduce");
    c->add_option("--rows", *rows, "Rows")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
        ->capture_default_str();
    c->add_option("--cols", *cols, "Columns")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
        ->capture_default_str();
    c->callback([=] {
      auto models = MakeModels(*common, {});
      if (!models.ok()) {
        *exit_code = ReportError(models.status());
        return;
      }
      const absl::Status fits = CheckFits("the operand (--rows x --cols elements)",
                                          static_cast<double>(*rows) * static_cast<double>(*cols) *
                                              models->device.npu.element_bytes,
                                          /*on_pim=*/false, *models);
      if (!fits.ok()) {
        *exit_code = ReportError(fits);
        return;
      }
      auto r = models->npu->Vector({*op, *rows, *cols});
      json shape = {{"op", hw::VectorOpName(*op)}, {"rows", *rows}, {"cols", *cols}};
      *exit_code =
          r.ok() ? ReportNpu("vector", shape, *common, *models, *r) : ReportError(r.status());
    });
  }

  // ---- hw info --------------------------------------------------------------------------------
  {
    auto device = std::make_shared<std::string>("neupims");
    auto as_json = std::make_shared<bool>(false);
    CLI::App* c = hw_cmd->add_subcommand(
        "info", "Describe a device: organisation, peak rates, closed-form PIM tile periods");
    c->add_option("--device", *device, "Built-in name or JSON file path")->capture_default_str();
    c->add_flag("--json", *as_json, "Print JSON");
    c->callback([=] {
      auto cfg = hw::LoadDeviceConfig(*device);
      if (!cfg.ok()) {
        *exit_code = ReportError(cfg.status());
        return;
      }
      const hw::NpuSpec& n = cfg->npu;
      const hw::HbmSpec& h = cfg->hbm;
      const double npu_tflops =
          2.0 * static_cast<double>(n.peak_macs_per_cycle()) * n.frequency_mhz * 1e6 / 1e12;
      json j = {{"name", cfg->name},
                {"description", cfg->description},
                {"npu_peak_tflops", npu_tflops},
                {"hbm_peak_gb_per_s", cfg->PeakHbmBytesPerSecond() / 1e9},
                {"hbm_capacity_gib",
                 static_cast<double>(h.org.channel_capacity_bytes()) * h.org.channels / (1 << 30)},
                {"channels", h.org.channels},
                {"banks_per_channel", h.org.banks_per_channel()},
                {"pim", h.pim.enabled}};
      if (h.pim.enabled) {
        const hw::TileCostModel tiles(h);
        const double pim_macs_per_cycle = static_cast<double>(h.org.banks_per_channel()) *
                                          h.pim.mac_lanes_per_bank / h.timing.tCCD_L *
                                          h.org.channels;
        j["row_buffers"] = hw::ToString(h.pim.row_buffers);
        j["command_set"] = hw::ToString(h.pim.command_set);
        j["pim_peak_tflops"] = 2 * pim_macs_per_cycle * h.frequency_mhz * 1e6 / 1e12;
        j["key_tile_period_cycles"] =
            tiles.TilePeriod({1, h.org.bank_groups_per_channel(), 4, 8}, false);
        j["value_tile_period_cycles"] =
            tiles.TilePeriod({1, h.org.bank_groups_per_channel(), 1, 32}, false);
      }
      if (*as_json) {
        std::printf("%s\n", j.dump(2).c_str());
        *exit_code = 0;
        return;
      }
      KeyValueTable t("device " + cfg->name);
      t.Add("description", cfg->description);
      t.Add("NPU peak", FormatFixed(npu_tflops, 1) + " TFLOP/s (FP16)");
      t.Add("HBM peak", FormatFixed(cfg->PeakHbmBytesPerSecond() / 1e9, 0) + " GB/s over " +
                            std::to_string(h.org.channels) + " channels");
      t.Add("HBM capacity", FormatFixed(j["hbm_capacity_gib"].get<double>(), 0) + " GiB");
      t.Add("banks per channel", std::to_string(h.org.banks_per_channel()));
      if (h.pim.enabled) {
        t.Add("PIM", std::string(hw::ToString(h.pim.row_buffers)) + " row buffers, " +
                         hw::ToString(h.pim.command_set) + " command set");
        t.Add("PIM peak (all-bank MACs)",
              FormatFixed(j["pim_peak_tflops"].get<double>(), 1) + " TFLOP/s");
        t.Add("key tile period (4 heads x 128)",
              std::to_string(j["key_tile_period_cycles"].get<int64_t>()) + " cycles");
        t.Add("value tile period (512 tokens)",
              std::to_string(j["value_tile_period_cycles"].get<int64_t>()) + " cycles");
      } else {
        t.Add("PIM", "none");
      }
      t.Print();
      *exit_code = 0;
    });
  }
}

}  // namespace neupims::cli
