#include "scheduler/partition/pim_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"

namespace neupims::scheduler::partition {
namespace {

constexpr double kShareSlack = 1e-9;  // rounding of the published percentages

bool ValidShare(const std::optional<double>& s) { return !s || (*s >= 0 && *s <= 1); }

// Competition ranks (descending, "1224") of the valued entries; unvalued ones rank after all.
std::vector<int> Ranks(const std::vector<std::optional<double>>& values) {
  int valued = 0;
  for (const auto& v : values) valued += v.has_value();
  std::vector<int> ranks(values.size(), valued + 1);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) continue;
    int larger = 0;
    for (const auto& v : values) larger += v && *v > *values[i];
    ranks[i] = larger + 1;
  }
  return ranks;
}

std::vector<RankedPimOp> GlobalList(const PimOpProfile& profile) {
  std::vector<std::optional<double>> time, memory;
  for (const PimOpShare& op : profile.ops) {
    time.push_back(op.time_share);
    memory.push_back(op.memory_access_share);
  }
  const std::vector<int> time_rank = Ranks(time);
  const std::vector<int> memory_rank = Ranks(memory);
  std::vector<RankedPimOp> list;
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    list.push_back({.name = profile.ops[i].name,
                    .time_rank = time_rank[i],
                    .memory_rank = memory_rank[i],
                    .global_index = time_rank[i] + memory_rank[i],
                    .time_share = profile.ops[i].time_share.value_or(0)});
  }
  std::sort(list.begin(), list.end(), [](const RankedPimOp& a, const RankedPimOp& b) {
    return std::tie(a.global_index, a.time_rank, a.memory_rank, a.name) <
           std::tie(b.global_index, b.time_rank, b.memory_rank, b.name);
  });
  return list;
}

std::optional<double> OptionalPercent(ConfigObject& o, absl::string_view key) {
  if (!o.Has(key)) return std::nullopt;
  return o.Double(key, {.min = 0, .max = 100}) / 100.0;
}

PimOpProfile ParseProfile(ConfigObject& m) {
  PimOpProfile p;
  p.model = m.String("name");
  p.display_name = m.OptionalString("display_name", p.model);
  for (ConfigObject& o : m.Objects("ops", "name")) {
    PimOpShare op;
    op.name = o.String("name");
    op.time_share = OptionalPercent(o, "time_pct");
    op.memory_access_share = OptionalPercent(o, "memory_access_pct");
    op.invocations = static_cast<int>(o.Int("invocations", {.min = 1, .max = 1 << 30}));
    o.Finish();
    p.ops.push_back(std::move(op));
  }
  ConfigObject other = m.Child("other");
  p.other_ops = static_cast<int>(other.Int("ops", {.min = 0, .max = 1 << 30}));
  p.other_time_share = other.Double("time_pct", {.min = 0, .max = 100}) / 100.0;
  p.other_memory_share = other.Double("memory_access_pct", {.min = 0, .max = 100}) / 100.0;
  other.Finish();
  m.Finish();
  return p;
}

}  // namespace

absl::Status PimOpProfile::Validate() const {
  if (ops.empty()) return absl::InvalidArgumentError(absl::StrCat(model, ": no operations"));
  std::set<std::string> names;
  double time = other_time_share;
  for (const PimOpShare& op : ops) {
    if (!names.insert(op.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(model, ": duplicate operation ", op.name));
    }
    if (!ValidShare(op.time_share) || !ValidShare(op.memory_access_share)) {
      return absl::InvalidArgumentError(
          absl::StrCat(model, ": ", op.name, ": shares must be in [0, 1]"));
    }
    time += op.time_share.value_or(0);
  }
  if (time > 1 + 1e-6) {
    return absl::InvalidArgumentError(
        absl::StrCat(model, ": time shares sum to ", time * 100, "% > 100%"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PimSelection> SelectPimOffload(const PimOpProfile& profile, double coverage) {
  if (!(coverage > 0 && coverage <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("coverage must be in (0, 1], got ", coverage));
  }
  RETURN_IF_ERROR(profile.Validate());
  PimSelection s;
  s.global_list = GlobalList(profile);
  for (const RankedPimOp& op : s.global_list) {
    if (s.covered_time_share + kShareSlack >= coverage) break;
    s.selected.push_back(op.name);
    s.covered_time_share += op.time_share;
  }
  s.target_reached = s.covered_time_share + kShareSlack >= coverage;
  return s;
}

absl::StatusOr<std::vector<PimOpProfile>> LoadPimOpProfiles(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("profiles", name_or_path));
  ConfigObject root = doc->Root();
  root.OptionalString("source", "");
  std::vector<PimOpProfile> tables;
  for (ConfigObject& m : root.Objects("models", "name")) tables.push_back(ParseProfile(m));
  root.Finish();
  RETURN_IF_ERROR(doc->status());
  for (const PimOpProfile& t : tables) {
    absl::Status st = t.Validate();
    if (!st.ok())
      return absl::InvalidArgumentError(absl::StrCat(doc->source(), ": ", st.message()));
  }
  return tables;
}

absl::StatusOr<PimOpProfile> FindPimOpProfile(const std::vector<PimOpProfile>& tables,
                                              absl::string_view model) {
  std::vector<std::string> names;
  for (const PimOpProfile& t : tables) {
    if (t.model == model) return t;
    names.push_back(t.model);
  }
  return absl::NotFoundError(absl::StrCat("unknown profiled model '", model,
                                          "' (choices: ", absl::StrJoin(names, ", "), ")"));
}

// ---------------------------------------------------------------------------------------------
// Step 2.

const char* PimUnitName(PimUnit unit) {
  switch (unit) {
    case PimUnit::kFixedFunction:
      return "fixed-function";
    case PimUnit::kProgrammable:
      return "programmable";
    case PimUnit::kCpu:
      return "cpu";
  }
  return "?";
}

namespace {

absl::Status ValidateTasks(const std::vector<PimTask>& tasks, const PimUnits& units) {
  if (units.fixed_function < 0 || units.programmable < 0 || units.cpu < 1) {
    return absl::InvalidArgumentError("units: need >= 0 PIM units of each kind and >= 1 CPU");
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    const PimTask& t = tasks[i];
    for (int d : t.deps) {
      if (d < 0 || d >= static_cast<int>(i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "task ", t.name, ": dependency ", d, " is not an earlier task (topological order)"));
      }
    }
    const bool bad = t.cpu_s < 0 || (t.fixed_function_s && *t.fixed_function_s < 0) ||
                     (t.programmable_s && *t.programmable_s < 0);
    if (bad) return absl::InvalidArgumentError(absl::StrCat("task ", t.name, ": negative time"));
  }
  return absl::OkStatus();
}

// Free units of each kind at time `now` (unit free when its busy-until time <= now).
struct UnitPool {
  std::vector<double> busy_until;
  int Free(double now) const {
    for (size_t u = 0; u < busy_until.size(); ++u) {
      if (busy_until[u] <= now) return static_cast<int>(u);
    }
    return -1;
  }
};

bool Ready(const PimTask& t, const PimSchedule& s, const std::vector<bool>& started, double now) {
  for (int d : t.deps) {
    if (!started[d] || s.tasks[d].end_s > now) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<PimSchedule> SchedulePimTasks(const std::vector<PimTask>& tasks,
                                             const PimUnits& units) {
  RETURN_IF_ERROR(ValidateTasks(tasks, units));
  UnitPool ff{std::vector<double>(units.fixed_function, 0)};
  UnitPool prog{std::vector<double>(units.programmable, 0)};
  UnitPool cpu{std::vector<double>(units.cpu, 0)};
  PimSchedule s;
  s.tasks.resize(tasks.size());
  std::vector<bool> started(tasks.size(), false);
  size_t done = 0;
  double now = 0;
  while (done < tasks.size()) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      const PimTask& t = tasks[i];
      if (started[i] || !Ready(t, s, started, now)) continue;
      // Principles 1-2: fixed-function first, then the programmable PIM, the CPU last.
      struct Option {
        UnitPool* pool;
        PimUnit unit;
        std::optional<double> time;
      };
      const Option options[] = {
          {&ff, PimUnit::kFixedFunction, t.candidate ? t.fixed_function_s : std::nullopt},
          {&prog, PimUnit::kProgrammable, t.candidate ? t.programmable_s : std::nullopt},
          {&cpu, PimUnit::kCpu, t.cpu_s}};
      for (const Option& o : options) {
        const int u = o.time ? o.pool->Free(now) : -1;
        if (u < 0) continue;
        s.tasks[i] = {.unit = o.unit, .unit_index = u, .start_s = now, .end_s = now + *o.time};
        o.pool->busy_until[u] = s.tasks[i].end_s;
        started[i] = true;
        ++done;
        break;
      }
    }
    // Advance to the next completion after `now` (principle 3: successors wait for it).
    double next = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (started[i] && s.tasks[i].end_s > now) next = std::min(next, s.tasks[i].end_s);
    }
    if (done < tasks.size() && std::isinf(next)) {
      return absl::InternalError("PIM list scheduler made no progress");
    }
    if (!std::isinf(next)) now = next;
  }
  for (const PimScheduledTask& t : s.tasks) s.makespan_s = std::max(s.makespan_s, t.end_s);
  return s;
}

}  // namespace neupims::scheduler::partition
