#include "tools/neupims/step_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "common/table_reader.h"
#include "engine/engine.h"
#include "models/model_config.h"
#include "nlohmann/json.hpp"
#include "tools/neupims/cli_util.h"
#include "tools/neupims/engine_flags.h"
#include "tools/neupims/enum_flag.h"
#include "tools/neupims/timeline_writer.h"
#include "tools/workload/batch_file.h"
#include "tools/workload/range_flag.h"

namespace neupims::cli {
namespace {

using nlohmann::json;

// How much of the device's stage `step` runs: one or two decoder layers, or all of them.
enum class StepLayers { kOne, kTwo, kAll };
const EnumNames<StepLayers>& StepLayersNames() {
  static constexpr EnumName<StepLayers> kEntries[] = {
      {"one", StepLayers::kOne}, {"two", StepLayers::kTwo}, {"all", StepLayers::kAll}};
  static constexpr EnumNames<StepLayers> kNames("layer count", kEntries);
  return kNames;
}

struct StepFlags {
  EngineFlags engine;
  std::string batch_file;
  std::vector<std::string> seq_lens;  // checked by CommaList; SplitCommaList in RunStep
  int64_t batch = 0;
  int64_t seq_len = 512;
  StepLayers layers = StepLayers::kAll;
  std::string timeline_path;
  bool json = false;
};

// The batch's KV cache must fit the device's memory in total, or the batch is refused. A channel
// a file overfills, or a batch beyond the room the engine leaves beside the weights, is a
// warning: some published batch files (share-gpt2-bs512-*-rr-0.csv: 282 blocks on a channel of
// 256) do that and still run.
absl::Status CheckKvCapacity(const engine::Engine& e,
                             const std::vector<engine::Engine::StepRequest>& batch) {
  const int64_t block_tokens = e.options().block_tokens;
  const int channels = e.kv_channels();
  const int64_t room = e.kv_blocks_per_channel();
  const hw::HbmOrganization& org = e.device().hbm.org;
  const int64_t block_bytes = models::KvBytesPerToken(e.model(), e.parallelism()) * block_tokens;
  const int64_t whole = org.channel_capacity_bytes() * org.channels / channels / block_bytes;
  std::vector<int64_t> pinned(channels, 0);
  int64_t total = 0;
  for (const engine::Engine::StepRequest& r : batch) {
    const int64_t blocks = (r.seq_len + block_tokens - 1) / block_tokens;
    total += blocks;
    if (r.channel >= 0 && r.channel < channels) pinned[r.channel] += blocks;
  }
  const int64_t most = *std::max_element(pinned.begin(), pinned.end());
  if (total > whole * channels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch needs ", total, " KV blocks of ", block_tokens, " tokens, but the device holds ",
        whole * channels, " (", channels, " channels x ", whole, ")"));
  }
  if (most > room || total > room * channels) {
    // The pinned part only when a row pins a channel: the engine places the others itself, so
    // without pins there is no per-channel figure to give ("up to 0 on one channel" misled).
    const std::string pinned_part =
        most > 0 ? absl::StrCat(", up to ", most, " pinned to one channel") : "";
    std::fprintf(stderr,
                 "warning: the batch's KV cache (%lld blocks of %lld tokens%s) exceeds the room "
                 "beside the weights (%lld per channel, %lld in all; whole memory %lld per "
                 "channel)\n",
                 static_cast<long long>(total), static_cast<long long>(block_tokens),
                 pinned_part.c_str(), static_cast<long long>(room),
                 static_cast<long long>(room * channels), static_cast<long long>(whole));
  }
  return absl::OkStatus();
}

// A barrier stage's name: A, B, ... (stage_graph.h), then S26, S27, ...
std::string StageLabel(int index) {
  return index < 26 ? std::string(1, static_cast<char>('A' + index)) : absl::StrCat("S", index);
}

// The engine's check of each row (Engine::CheckStepRequest), with the file and line in front.
absl::Status CheckBatchFileRows(const engine::Engine& e, const std::string& path,
                                const std::vector<workload::BatchRow>& rows) {
  for (const workload::BatchRow& r : rows) {
    const absl::Status s = e.CheckStepRequest({r.seq_len, r.channel.value_or(-1)});
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(path, ":", r.line, ": ", s.message()));
  }
  return absl::OkStatus();
}

int RunStep(const StepFlags& f) {
  auto engine_or = engine::Engine::Create(f.engine.options);
  if (!engine_or.ok()) return ReportError(engine_or.status());
  engine::Engine& e = **engine_or;
  std::vector<engine::Engine::StepRequest> batch;
  if (!f.batch_file.empty()) {
    auto rows = workload::ReadBatchFile(f.batch_file);
    if (!rows.ok()) return ReportError(rows.status());
    if (absl::Status s = CheckBatchFileRows(e, f.batch_file, *rows); !s.ok()) {
      return ReportError(s);
    }
    for (const workload::BatchRow& r : *rows) batch.push_back({r.seq_len, r.channel.value_or(-1)});
  } else if (!f.seq_lens.empty()) {
    const std::vector<std::string> items = SplitCommaList(f.seq_lens);
    for (size_t i = 0; i < items.size(); ++i) {
      int64_t seq_len = 0;
      NEUPIMS_CHECK(absl::SimpleAtoi(items[i], &seq_len));  // the flag's check parsed it
      const absl::Status s = e.CheckStepRequest({seq_len, -1});
      if (!s.ok()) {
        return ReportError(
            absl::Status(s.code(), absl::StrCat("--seq-lens value ", i + 1, ": ", s.message())));
      }
      batch.push_back({seq_len, -1});
    }
  } else {
    if (f.batch < 1) {
      return ReportError(absl::InvalidArgumentError(
          "give --batch-file, --seq-lens, or --batch N (with --seq-len)"));
    }
    if (const absl::Status s = e.CheckStepRequest({f.seq_len, -1}); !s.ok()) {
      return ReportError(absl::Status(s.code(), absl::StrCat("--seq-len: ", s.message())));
    }
    for (int64_t i = 0; i < f.batch; ++i) batch.push_back({f.seq_len, -1});
  }
  if (absl::Status s = CheckKvCapacity(e, batch); !s.ok()) return ReportError(s);
  // Engine::SimulateStep: 0 layers is the device's whole stage.
  const int layers = f.layers == StepLayers::kOne ? 1 : f.layers == StepLayers::kTwo ? 2 : 0;
  auto cost = e.SimulateStep(batch, layers, /*timeline=*/true);
  if (!cost.ok()) return ReportError(cost.status());

  // Per-stage breakdown: time each operation kind occupied its unit, per sub-batch (PIM ops:
  // the busiest channel).
  std::map<std::pair<std::string, int>, double> stage_ns;
  std::map<std::pair<std::string, int>, double> pim_span;  // per (op, sub-batch, layer) max
  std::map<std::tuple<std::string, int, int, int>, double> pim_op;
  for (const engine::TimelineEvent& ev : cost->timeline) {
    if (ev.lane == engine::Lane::kPim) {
      double& v = pim_op[{ev.name, ev.sub_batch, ev.layer, ev.micro_batch}];
      v = std::max(v, ev.end_ns - ev.start_ns);
    } else {
      stage_ns[{ev.name, ev.sub_batch}] += ev.end_ns - ev.start_ns;
    }
  }
  for (const auto& [k, v] : pim_op) {
    stage_ns[{std::get<0>(k), std::get<1>(k)}] += v;
  }
  if (!f.timeline_path.empty()) {
    absl::Status s = WriteTimeline(f.timeline_path, cost->timeline,
                                   {{0, 0, static_cast<engine::SimTime>(cost->duration_ns)}}, e);
    if (!s.ok()) return ReportError(s);
  }
  const hw::DeviceConfig& dev = e.device();
  const double dur = cost->duration_ns;
  const int channels = dev.hbm.org.channels;
  json j;
  j["model"] = e.model().name;
  j["mode"] = e.mode().name;
  j["device"] = dev.name;
  j["tp"] = e.parallelism().tp;
  j["pp"] = e.parallelism().pp;
  j["layers"] = layers > 0 ? layers : e.iteration_model().layers_per_device();
  j["batch"] = static_cast<int64_t>(batch.size());
  j["sub_batches"] = {cost->sub_batch_sizes[0], cost->sub_batch_sizes[1]};
  j["duration_ns"] = dur;
  j["npu_cycles"] = dur * dev.npu.frequency_mhz / 1e3;
  j["tokens_per_s"] = dur > 0 ? static_cast<double>(batch.size()) / (dur * 1e-9) : 0;
  json stages = json::array();
  for (const auto& [k, v] : stage_ns) {
    stages.push_back({{"op", k.first}, {"sub_batch", k.second + 1}, {"ns", v}});
  }
  j["stages"] = stages;
  // The reference simulator's stage view (issue 14): layer 1's pre-attention (A), attention (B)
  // and post-attention (E) per sub-batch, and the steady per-layer period.
  const double cycles_per_ns = dev.npu.frequency_mhz / 1e3;
  json phases = json::array();
  for (const engine::PhaseSpan& p : cost->phases) {
    if (p.layer != 0 || p.micro_batch != 0) continue;
    phases.push_back({{"phase", engine::ToString(p.phase)},
                      {"sub_batch", p.sub_batch + 1},
                      {"start_cycles", p.start_ns * cycles_per_ns},
                      {"cycles", (p.end_ns - p.start_ns) * cycles_per_ns}});
  }
  j["layer1_phases"] = phases;
  if (cost->layer_period_ns > 0) j["layer_period_cycles"] = cost->layer_period_ns * cycles_per_ns;
  // With stage barriers (device stage_barriers): every barrier stage, A first.
  json barrier_stages = json::array();
  for (const engine::StageSpan& s : cost->stages) {
    if (s.micro_batch != 0) continue;
    barrier_stages.push_back({{"stage", StageLabel(s.index)},
                              {"start_cycles", s.start_ns * cycles_per_ns},
                              {"cycles", (s.end_ns - s.start_ns) * cycles_per_ns}});
  }
  if (!barrier_stages.empty()) {
    j["barrier_stages"] = barrier_stages;
    // Interleaved over two layers (A-F): the steady period is C + D (stage_graph.h). One layer
    // (A-D) has no steady state.
    if (cost->sub_batch_sizes[1] > 0 && e.mode().sub_batch_interleaving &&
        barrier_stages.size() >= 6 && !j.contains("layer_period_cycles")) {
      j["layer_period_cycles"] =
          barrier_stages[2]["cycles"].get<double>() + barrier_stages[3]["cycles"].get<double>();
    }
  }
  j["utilization"] = {
      {"npu_systolic", cost->systolic_busy_ns / dur},
      {"npu_vector", cost->vector_busy_ns / dur},
      {"pim", cost->pim_mac_ns / channels / dur},
      {"pim_channels_busy", cost->pim_channel_busy_ns / channels / dur},
      {"hbm_bandwidth", cost->npu_hbm_bytes / (dev.PeakHbmBytesPerSecond() * 1e-9) / dur}};
  j["channel_load_imbalance"] = cost->channel_imbalance;
  json cmds = json::object();
  for (int t = 0; t < hw::kNumCommandTypes; ++t) {
    if (cost->pim_commands[t] != 0) {
      cmds[hw::CommandName(static_cast<hw::CommandType>(t))] = cost->pim_commands[t];
    }
  }
  j["pim_commands_per_device"] = cmds;
  j["energy_j"] = cost->energy_j();
  if (f.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  KeyValueTable t(absl::StrFormat(
      "one decode iteration: %s on %s (%s), TP %d x PP %d, %s", e.model().name, dev.name,
      e.mode().name, e.parallelism().tp, e.parallelism().pp,
      layers == 1 ? "one decoder layer" : absl::StrCat(j["layers"].get<int>(), " layers")));
  t.Add("batch", absl::StrFormat("%d requests (sub-batches %d + %d)", batch.size(),
                                 cost->sub_batch_sizes[0], cost->sub_batch_sizes[1]));
  t.Add("latency", absl::StrFormat("%s cycles, %s", FormatCount(j["npu_cycles"].get<double>()),
                                   FormatSi(dur * 1e-9, "s")));
  t.Add("throughput", FormatFixed(j["tokens_per_s"].get<double>(), 0) + " tokens/s");
  t.Section("per stage (unit busy time; PIM = busiest channel)");
  for (const auto& [k, v] : stage_ns) {
    if (v <= 0) continue;
    t.Add(absl::StrFormat("%-16s SB%d", k.first, k.second + 1),
          absl::StrFormat("%10s  %5.1f%%", FormatSi(v * 1e-9, "s"), 100 * v / dur));
  }
  t.Section("layer 1 phases (cycles; A = pre-attention, B = attention, E = post-attention)");
  for (const json& p : phases) {
    t.Add(absl::StrFormat("%-16s SB%d", p["phase"].get<std::string>(), p["sub_batch"].get<int>()),
          absl::StrFormat("%10s  from %s", FormatCount(p["cycles"].get<double>()),
                          FormatCount(p["start_cycles"].get<double>())));
  }
  if (j.contains("barrier_stages")) {
    t.Section(
        "barrier stages (cycles; stage_graph.h: A, B, E per layer, or A-F over two layers "
        "interleaved)");
    for (const json& s : j["barrier_stages"]) {
      t.Add(s["stage"].get<std::string>(),
            absl::StrFormat("%10s  from %s", FormatCount(s["cycles"].get<double>()),
                            FormatCount(s["start_cycles"].get<double>())));
    }
  }
  if (j.contains("layer_period_cycles")) {
    t.Add("steady layer period", FormatCount(j["layer_period_cycles"].get<double>()) + " cycles");
  }
  t.Section("utilisation");
  const json& u = j["utilization"];
  t.Add("NPU systolic arrays", FormatPercent(u["npu_systolic"]));
  t.Add("NPU vector units", FormatPercent(u["npu_vector"]));
  t.Add("PIM MAC datapath", FormatPercent(u["pim"]));
  t.Add("PIM channels busy", FormatPercent(u["pim_channels_busy"]));
  t.Add("HBM bandwidth (NPU)", FormatPercent(u["hbm_bandwidth"]));
  t.Add("channel load imbalance", FormatFixed(cost->channel_imbalance, 3));
  t.Section("PIM commands (one device)");
  for (auto it = cmds.begin(); it != cmds.end(); ++it) {
    t.Add(it.key(), FormatCount(it.value().get<double>()));
  }
  t.Section("energy (device group)");
  t.Add("total", FormatSi(cost->energy_j(), "J"));
  t.Print();
  return 0;
}

}  // namespace

void RegisterStepCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<StepFlags>();
  CLI::App* c = app.add_subcommand(
      "step",
      "Simulate one decode iteration of a given batch (one layer or the whole model) and print "
      "the per-stage breakdown, utilisation and PIM commands");
  AddEngineFlags(c, &f->engine);
  CLI::Option* batch_file =
      c->add_option(
           "--batch-file", f->batch_file,
           "CSV with header seq_len[,channel] (ch_idx also accepted), one request per line; "
           "e.g. ../shared/datasets/batches/*.csv")
          ->check(NonEmpty());
  CLI::Option* seq_lens = c->add_option("--seq-lens", f->seq_lens,
                                        "Sequence lengths of the batch (channels assigned by "
                                        "the mode's policy)")
                              ->check(CommaList(CLI::Range(int64_t{1}, int64_t{1} << 20)));
  CLI::Option* batch =
      c->add_option("--batch", f->batch, "A batch of this many requests of --seq-len tokens")
          ->check(CLI::Range(int64_t{1}, workload::kMaxBatchRequests));
  // One way to give the batch: two of these together is an error, not a silent choice.
  batch_file->excludes(seq_lens)->excludes(batch);
  seq_lens->excludes(batch);
  c->add_option("--seq-len", f->seq_len, "Tokens per request with --batch")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  AddEnumFlag(c, "--layers", StepLayersNames(), &f->layers,
              "one or two decoder layers (two shows the interleaved stages A-F), or all of the "
              "device's");
  c->add_flag("--json", f->json, "Print JSON");
  c->add_option("--timeline", f->timeline_path,
                "Write the iteration as a Chrome trace-event JSON (Perfetto / chrome://tracing)")
      ->check(OutputFile());
  c->callback([f, exit_code] { *exit_code = RunStep(*f); });
}

}  // namespace neupims::cli
