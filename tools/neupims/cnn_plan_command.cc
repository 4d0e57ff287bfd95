#include "tools/neupims/cnn_plan_command.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "engine/cnn/plan.h"
#include "engine/cnn/profiler.h"
#include "hw/cluster/cluster.h"
#include "models/cnn/graph.h"
#include "nlohmann/json.hpp"
#include "scheduler/partition/donna.h"
#include "tools/neupims/cli_util.h"
#include "tools/neupims/enum_flag.h"

namespace neupims::cli {
namespace {

using nlohmann::json;
using scheduler::partition::Plan;
using scheduler::partition::Profile;

using engine::cnn::PlanPolicy;
using engine::cnn::PlanPolicyNames;

struct PlanFlags {
  std::string model = "resnet152";
  std::string cluster = "donna-hetero";
  PlanPolicy policy = PlanPolicy::kDonna;
  double alpha = 1.0;
  bool alpha_sweep = false;
  bool json = false;
};

absl::StatusOr<Profile> LoadProfile(const PlanFlags& f) {
  ASSIGN_OR_RETURN(models::cnn::Graph g, models::cnn::LoadGraph(f.model));
  ASSIGN_OR_RETURN(hw::cluster::Cluster c, hw::cluster::LoadCluster(f.cluster));
  return engine::cnn::BuildProfile(g, c);
}

json PlanJson(const Profile& p, const Plan& plan) {
  json stages = json::array();
  for (const auto& s : plan.stages) {
    stages.push_back({{"device", p.devices[s.device].name},
                      {"kind", p.devices[s.device].kind},
                      {"first_layer", p.layers[s.first_layer].name},
                      {"last_layer", p.layers[s.last_layer].name},
                      {"layers", s.last_layer - s.first_layer + 1},
                      {"compute_s", s.compute_s},
                      {"compute_energy_j", s.compute_energy_j},
                      {"transfer_s", s.transfer_s},
                      {"transfer_energy_j", s.transfer_energy_j},
                      {"transfer_bytes", s.transfer_bytes}});
  }
  return {{"stages", stages},
          {"bottleneck_s", plan.bottleneck_s},
          {"throughput_per_s", plan.throughput_per_s()},
          {"energy_j", plan.energy_j},
          {"objective", plan.objective}};
}

void PrintPlan(const Profile& p, const Plan& plan) {
  std::printf("%-3s %-10s %-5s %-44s %6s %11s %11s %11s\n", "#", "device", "kind", "layers",
              "count", "compute ms", "send ms", "energy mJ");
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const auto& s = plan.stages[k];
    const std::string range =
        absl::StrCat(p.layers[s.first_layer].name, " .. ", p.layers[s.last_layer].name);
    std::printf("%-3zu %-10s %-5s %-44s %6d %11.3f %11.3f %11.3f\n", k,
                p.devices[s.device].name.c_str(), p.devices[s.device].kind.c_str(),
                range.substr(0, 44).c_str(), s.last_layer - s.first_layer + 1, s.compute_s * 1e3,
                s.transfer_s * 1e3, (s.compute_energy_j + s.transfer_energy_j) * 1e3);
  }
}

int RunPlan(const PlanFlags& f) {
  absl::StatusOr<Profile> p = LoadProfile(f);
  if (!p.ok()) return ReportError(p.status());
  absl::StatusOr<Plan> plan = engine::cnn::SolvePlan(*p, f.policy, f.alpha);
  if (!plan.ok()) return ReportError(plan.status());
  if (f.json) {
    json j = PlanJson(*p, *plan);
    j["model"] = p->model;
    j["cluster"] = f.cluster;
    j["policy"] = PlanPolicyNames().ToString(f.policy);
    j["alpha"] = f.alpha;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  PrintPlan(*p, *plan);
  KeyValueTable t(absl::StrCat(p->model, " on ", f.cluster, ", ",
                               PlanPolicyNames().ToString(f.policy), ", alpha ", f.alpha));
  t.Add("stages", absl::StrCat(plan->stages.size()));
  t.Add("partition", engine::cnn::PartitionString(*p, *plan));
  // A hype plan may revisit a device: its T is that device's stages summed, not one stage.
  t.Add(f.policy == PlanPolicy::kHype ? "busiest device" : "slowest stage",
        FormatSi(plan->bottleneck_s, "s"));
  t.Add("throughput", absl::StrCat(FormatFixed(plan->throughput_per_s(), 2), " inferences/s"));
  t.Add("energy per inference", FormatSi(plan->energy_j, "J"));
  t.Add("objective C (eq. 1)", FormatFixed(plan->objective, 4));
  t.Print();
  return 0;
}

int RunSweep(const PlanFlags& f) {
  absl::StatusOr<Profile> p = LoadProfile(f);
  if (!p.ok()) return ReportError(p.status());
  json sweep = json::array();
  if (!f.json) {
    std::printf("%s on %s: alpha sweep (exact DP; published DP's C beside it)\n", p->model.c_str(),
                f.cluster.c_str());
    std::printf("%6s %7s %14s %14s %12s %12s  %s\n", "alpha", "stages", "inferences/s", "energy mJ",
                "C exact", "C published", "devices");
  }
  for (int k = 0; k <= 10; ++k) {
    const double alpha = k / 10.0;
    absl::StatusOr<Plan> exact = scheduler::partition::DonnaExact(*p, alpha);
    absl::StatusOr<Plan> published = scheduler::partition::DonnaPublished(*p, alpha);
    if (!exact.ok()) return ReportError(exact.status());
    if (!published.ok()) return ReportError(published.status());
    std::vector<std::string> devices;
    for (const auto& s : exact->stages) devices.push_back(p->devices[s.device].name);
    if (f.json) {
      json j = PlanJson(*p, *exact);
      j["alpha"] = alpha;
      j["published_objective"] = published->objective;
      sweep.push_back(j);
      continue;
    }
    std::printf("%6.1f %7zu %14.2f %14.3f %12.5f %12.5f  %s\n", alpha, exact->stages.size(),
                exact->throughput_per_s(), exact->energy_j * 1e3, exact->objective,
                published->objective, absl::StrJoin(devices, " > ").c_str());
  }
  absl::StatusOr<std::vector<Plan>> front = scheduler::partition::ParetoFront(*p);
  if (!front.ok()) return ReportError(front.status());
  if (f.json) {
    json pts = json::array();
    for (const Plan& pl : *front) pts.push_back(PlanJson(*p, pl));
    std::printf(
        "%s\n",
        json{{"model", p->model}, {"cluster", f.cluster}, {"sweep", sweep}, {"pareto_front", pts}}
            .dump(2)
            .c_str());
    return 0;
  }
  std::printf("\nPareto front (%zu plans no other plan beats on both):\n", front->size());
  std::printf("%14s %14s  %s\n", "inferences/s", "energy mJ", "devices");
  for (const Plan& pl : *front) {
    std::vector<std::string> devices;
    for (const auto& s : pl.stages) devices.push_back(p->devices[s.device].name);
    std::printf("%14.2f %14.3f  %s\n", pl.throughput_per_s(), pl.energy_j * 1e3,
                absl::StrJoin(devices, " > ").c_str());
  }
  return 0;
}

void AddCommonFlags(CLI::App* c, const std::shared_ptr<PlanFlags>& f) {
  c->add_option("--model", f->model, "Built-in network (neupims cnn models) or a graph JSON")
      ->capture_default_str();
  c->add_option(
       "--cluster", f->cluster,
       absl::StrCat("Built-in cluster (", absl::StrJoin(hw::cluster::BuiltinClusterNames(), ", "),
                    ") or a cluster JSON"))
      ->capture_default_str();
  c->add_flag("--json", f->json, "Print JSON");
}

}  // namespace

void RegisterCnnPlanCommands(CLI::App* cnn, int* exit_code) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* plan = cnn->add_subcommand(
      "plan", "Partition a CNN over a cluster (DONNA): stages, per-stage time and energy");
  AddCommonFlags(plan, f);
  AddEnumFlag(plan, "--policy", PlanPolicyNames(), &f->policy,
              "donna (Algorithm 1 as published), donna-exact (Pareto labels), <kind>-only, or "
              "hype (Hype's per-layer GPU + FPGA placement; a device may host several stages)");
  plan->add_option("--alpha", f->alpha, "Weight of time against energy in eq. 1")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  plan->add_flag("--alpha-sweep", f->alpha_sweep,
                 "Sweep alpha from 0 to 1 and print the throughput-energy Pareto front");
  plan->callback([f, exit_code] { *exit_code = f->alpha_sweep ? RunSweep(*f) : RunPlan(*f); });

  auto g = std::make_shared<PlanFlags>();
  CLI::App* pareto = cnn->add_subcommand(
      "pareto", "The alpha sweep of DONNA and the throughput-energy Pareto front of a CNN");
  AddCommonFlags(pareto, g);
  pareto->callback([g, exit_code] { *exit_code = RunSweep(*g); });
}

}  // namespace neupims::cli
