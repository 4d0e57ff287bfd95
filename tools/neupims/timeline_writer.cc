#include "tools/neupims/timeline_writer.h"

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "nlohmann/json.hpp"

namespace neupims::cli {

using nlohmann::json;

// Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev): one lane per NPU unit and PIM
// channel, slices named by operation and sub-batch so the two sub-batches get their own colours.
absl::Status WriteTimeline(const std::string& path,
                           const std::vector<engine::TimelineEvent>& timeline,
                           const std::vector<IterationMark>& iterations, const engine::Engine& e) {
  json events = json::array();
  auto lane_name = [&](int tid) -> std::string {
    if (tid == 0) return "NPU systolic arrays (8x 128x128)";
    if (tid == 1) return "NPU vector units (8x 128)";
    if (tid == 2) return "interconnect";
    return absl::StrCat("PIM channel ", tid - 10);
  };
  std::vector<int> tids = {0, 1, 2};
  for (int ch = 0; ch < e.device().hbm.org.channels; ++ch) tids.push_back(10 + ch);
  for (int tid : tids) {
    events.push_back({{"ph", "M"},
                      {"pid", 1},
                      {"tid", tid},
                      {"name", "thread_name"},
                      {"args", {{"name", lane_name(tid)}}}});
    events.push_back({{"ph", "M"},
                      {"pid", 1},
                      {"tid", tid},
                      {"name", "thread_sort_index"},
                      {"args", {{"sort_index", tid}}}});
  }
  events.push_back(
      {{"ph", "M"},
       {"pid", 1},
       {"name", "process_name"},
       {"args",
        {{"name", absl::StrCat("device 0 (", e.device().name, ", ", e.mode().name, ")")}}}});
  for (const engine::TimelineEvent& ev : timeline) {
    int tid = 0;
    switch (ev.lane) {
      case engine::Lane::kSystolic:
        tid = 0;
        break;
      case engine::Lane::kVector:
        tid = 1;
        break;
      case engine::Lane::kInterconnect:
        tid = 2;
        break;
      case engine::Lane::kPim:
        tid = 10 + ev.channel;
        break;
    }
    events.push_back({{"ph", "X"},
                      {"pid", 1},
                      {"tid", tid},
                      {"name", absl::StrCat(ev.name, " SB", ev.sub_batch + 1)},
                      {"cat", absl::StrCat("sub_batch_", ev.sub_batch + 1)},
                      {"cname", ev.sub_batch == 0 ? "thread_state_running" : "rail_load"},
                      {"ts", ev.start_ns / 1e3},
                      {"dur", (ev.end_ns - ev.start_ns) / 1e3},
                      {"args",
                       {{"layer", ev.layer},
                        {"sub_batch", ev.sub_batch + 1},
                        {"micro_batch", ev.micro_batch}}}});
  }
  for (const IterationMark& m : iterations) {
    events.push_back({{"ph", "i"},
                      {"pid", 1},
                      {"tid", 0},
                      {"s", "p"},
                      {"name", absl::StrCat("iteration ", m.index)},
                      {"ts", m.start / 1e3}});
  }
  return WriteFile(
      path, absl::StrCat(json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump(), "\n"));
}

}  // namespace neupims::cli
