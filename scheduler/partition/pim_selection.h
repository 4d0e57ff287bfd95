// Heterogeneous-PIM offload selection and scheduling (paper 000, sec. III-C).
//
// Selection (Step 1): the operations of one profiled training step are ranked twice, by execution
// time and by main-memory accesses (descending, rank 1 = largest); each operation's global index
// is the sum of its two ranks; operations are taken in ascending global index until they cover
// x% (default 90%) of the step's execution time.
//
// Scheduling (Step 2), a list scheduler over an operation DAG following the three principles:
// fixed-function PIMs first, then the programmable PIM, the CPU only when every PIM is busy
// (candidates) or for the operations not selected; dependencies respected.
//
// Plain data: the profile table is what the paper's profiler (its Fig. 1) reports; the built-in
// tables are Table I of the paper (configs/profiles/hpim_table1.json).
#ifndef NEUPIMS_SCHEDULER_PARTITION_PIM_SELECTION_H_
#define NEUPIMS_SCHEDULER_PARTITION_PIM_SELECTION_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::scheduler::partition {

// One operation type of a profiled step. A share is absent when the profile does not report it
// (Table I lists only the top five of each ranking): such an operation ranks after every
// operation with a value in that list.
struct PimOpShare {
  std::string name;
  std::optional<double> time_share;           // fraction of the step's execution time
  std::optional<double> memory_access_share;  // fraction of the step's main-memory accesses
  int invocations = 0;
};

struct PimOpProfile {
  std::string model;  // e.g. "vgg19"
  std::string display_name;
  std::vector<PimOpShare> ops;
  int other_ops = 0;              // operations aggregated in the "Other" row (not selectable)
  double other_time_share = 0;    // their time share
  double other_memory_share = 0;  // their memory-access share

  // Names unique, shares in [0, 1], the time shares (with "Other") summing to at most 1.
  absl::Status Validate() const;
};

struct RankedPimOp {
  std::string name;
  int time_rank = 0;      // 1 = most time-consuming
  int memory_rank = 0;    // 1 = most main-memory accesses
  int global_index = 0;   // time_rank + memory_rank
  double time_share = 0;  // 0 where the profile has no value (a lower bound)
};

struct PimSelection {
  std::vector<RankedPimOp> global_list;  // every operation, in selection order
  std::vector<std::string> selected;     // the prefix of global_list that was offloaded
  double covered_time_share = 0;         // time share of `selected`
  bool target_reached = false;           // false when every operation falls short of x%
};

// Ranks within one list are competition ranks (equal shares get the same rank, "1224"); an
// operation without a value ranks after all valued ones (valued count + 1). Ties in global index
// go to the lower time rank, then the lower memory rank, then the name.
absl::StatusOr<PimSelection> SelectPimOffload(const PimOpProfile& profile, double coverage = 0.9);

// The profile tables of a file (or built-in "profiles/<name>.json"), e.g. "hpim_table1".
absl::StatusOr<std::vector<PimOpProfile>> LoadPimOpProfiles(absl::string_view name_or_path);
// The table of `model` in it; NotFound lists the models available.
absl::StatusOr<PimOpProfile> FindPimOpProfile(const std::vector<PimOpProfile>& tables,
                                              absl::string_view model);

// ---------------------------------------------------------------------------------------------
// Step 2: scheduling.

enum class PimUnit { kFixedFunction, kProgrammable, kCpu };
const char* PimUnitName(PimUnit unit);

struct PimTask {
  std::string name;
  std::vector<int> deps;   // indices of earlier tasks whose outputs it reads
  bool candidate = false;  // selected for offload (SelectPimOffload)
  // Time on each kind of unit; absent where the operation cannot run there (a fixed-function
  // unit runs only multiply/add decomposable operations). CPU time is required.
  std::optional<double> fixed_function_s;
  std::optional<double> programmable_s;
  double cpu_s = 0;
};

struct PimUnits {
  int fixed_function = 1;  // groups of fixed-function PIMs that each run one operation
  int programmable = 1;    // programmable PIM cores
  int cpu = 1;             // host cores
};

struct PimScheduledTask {
  PimUnit unit = PimUnit::kCpu;
  int unit_index = 0;
  double start_s = 0;
  double end_s = 0;
};

struct PimSchedule {
  std::vector<PimScheduledTask> tasks;  // indexed like the input
  double makespan_s = 0;
};

// Event-driven list scheduler: whenever a unit frees, ready tasks (dependencies finished) are
// taken in input order; a candidate goes to a free fixed-function unit if it can run there, else
// a free programmable PIM, else a free CPU; a non-candidate runs on a CPU.
absl::StatusOr<PimSchedule> SchedulePimTasks(const std::vector<PimTask>& tasks,
                                             const PimUnits& units);

}  // namespace neupims::scheduler::partition

#endif  // NEUPIMS_SCHEDULER_PARTITION_PIM_SELECTION_H_
