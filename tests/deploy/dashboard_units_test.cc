// The unit of every dashboard query (deploy/grafana/neupims.json) matches the quantity it plots:
// a latency quantile or mean of a `_seconds` histogram has a time unit, watts are only simulated
// power (neupims:power_watts, or a joules counter's rate divided by the simulated clock's rate:
// a joules counter's rate per wall second is watts only under realtime pacing at speed 1), and
// joules per token are joules. A query's unit is its panel's default unless an override matching
// its refId (byFrameRefID) sets one.
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "deploy_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace neupims::deploy_test {
namespace {

// What a query plots, from the names it selects; kAny where the dashboard's unit is free.
enum class Quantity { kAny, kSeconds, kSimulatedWatts, kWallJoulesRate, kJoulesPerToken };

Quantity QuantityOf(const std::string& expr) {
  bool seconds = false;
  for (const std::string& n : PromqlMetricNames(expr)) {
    if (absl::StrContains(n, "power_watts") ||
        absl::StrContains(n, "joules:rate1m_per_sim_second")) {
      return Quantity::kSimulatedWatts;
    }
    if (absl::StrContains(n, "joules_per_token")) return Quantity::kJoulesPerToken;
    if (absl::StrContains(n, "joules")) return Quantity::kWallJoulesRate;
    // Quantiles (histogram_quantile of _bucket, or the :pNN recording rules) and means
    // (_sum / _count) of a seconds histogram; not the simulated clock's own rate.
    if (absl::StrContains(n, "_seconds_bucket") || absl::StrContains(n, "_seconds:p") ||
        absl::StrContains(n, "_seconds_sum")) {
      seconds = true;
    }
  }
  return seconds ? Quantity::kSeconds : Quantity::kAny;
}

// The unit Grafana shows for `target` of `panel`.
std::string UnitOf(const nlohmann::json& panel, const nlohmann::json& target) {
  const nlohmann::json& config = panel.at("fieldConfig");
  for (const nlohmann::json& o : config.value("overrides", nlohmann::json::array())) {
    const nlohmann::json& m = o.at("matcher");
    if (m.at("id") != "byFrameRefID" || m.at("options") != target.at("refId")) continue;
    for (const nlohmann::json& p : o.at("properties")) {
      if (p.at("id") == "unit") return p.at("value");
    }
  }
  return config.at("defaults").value("unit", "");
}

struct Query {
  std::string title;
  std::string expr;
  std::string unit;
};

std::vector<Query> DashboardQueries() {
  const nlohmann::json dashboard =
      nlohmann::json::parse(ReadFile(SourcePath("deploy/grafana/neupims.json")));
  std::vector<Query> queries;
  for (const nlohmann::json& panel : dashboard.at("panels")) {
    if (panel.at("type") == "row") continue;
    for (const nlohmann::json& target : panel.at("targets")) {
      queries.push_back({panel.at("title"), target.at("expr"), UnitOf(panel, target)});
    }
  }
  return queries;
}

TEST(DashboardUnitsTest, QuantityOfReadsTheSelectedNames) {
  EXPECT_EQ(QuantityOf("histogram_quantile(0.99, sum by (le) (rate(x:a_seconds_bucket[5m])))"),
            Quantity::kSeconds);
  EXPECT_EQ(QuantityOf("model_name:x_seconds:p99_5m"), Quantity::kSeconds);
  EXPECT_EQ(QuantityOf("rate(x:a_seconds_sum[1m]) / rate(x:a_seconds_count[1m])"),
            Quantity::kSeconds);
  EXPECT_EQ(QuantityOf("model_name:neupims_sim_time_seconds:deriv1m"), Quantity::kAny);
  EXPECT_EQ(QuantityOf("model_name_component:neupims_energy_joules:rate1m"),
            Quantity::kWallJoulesRate);
  EXPECT_EQ(QuantityOf("model_name_component:neupims_energy_joules:rate1m_per_sim_second"),
            Quantity::kSimulatedWatts);
  EXPECT_EQ(QuantityOf("sum(neupims:power_watts)"), Quantity::kSimulatedWatts);
  EXPECT_EQ(QuantityOf("model_name:neupims_energy_joules_per_token:ratio_rate5m"),
            Quantity::kJoulesPerToken);
}

TEST(DashboardUnitsTest, SecondsQuantitiesHaveATimeUnit) {
  const std::set<std::string> kTimeUnits = {"s", "ms", "µs", "ns", "dtdurations"};
  int checked = 0;
  for (const Query& q : DashboardQueries()) {
    if (QuantityOf(q.expr) != Quantity::kSeconds) continue;
    ++checked;
    EXPECT_TRUE(kTimeUnits.contains(q.unit))
        << q.title << ": unit '" << q.unit << "' for " << q.expr;
  }
  EXPECT_GE(checked, 10);
}

TEST(DashboardUnitsTest, WattsAreSimulatedPowerOnly) {
  int power = 0;
  for (const Query& q : DashboardQueries()) {
    const Quantity quantity = QuantityOf(q.expr);
    if (quantity == Quantity::kSimulatedWatts) {
      ++power;
      EXPECT_EQ(q.unit, "watt") << q.title << ": " << q.expr;
    } else {
      EXPECT_NE(q.unit, "watt") << q.title << ": not power: " << q.expr;
    }
  }
  EXPECT_GE(power, 2);
}

TEST(DashboardUnitsTest, NoQueryPlotsJoulesPerWallSecond) {
  for (const Query& q : DashboardQueries()) {
    EXPECT_NE(QuantityOf(q.expr), Quantity::kWallJoulesRate) << q.title << ": " << q.expr;
  }
}

TEST(DashboardUnitsTest, JoulesPerTokenAreJoules) {
  int checked = 0;
  for (const Query& q : DashboardQueries()) {
    if (QuantityOf(q.expr) != Quantity::kJoulesPerToken) continue;
    ++checked;
    EXPECT_EQ(q.unit, "joule") << q.title << ": " << q.expr;
  }
  EXPECT_GE(checked, 1);
}

}  // namespace
}  // namespace neupims::deploy_test
