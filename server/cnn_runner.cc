#include "server/cnn_runner.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/cnn/profiler.h"
#include "hw/cluster/cluster.h"
#include "models/cnn/graph.h"
#include "server/metrics.h"
#include "server/start_thread.h"

namespace neupims::server {
namespace {

constexpr int64_t kIdleWaitMs = 250;

constexpr EnumName<CnnDatatype> kDatatypes[] = {
    {"FP32", CnnDatatype::kFp32},
    {"INT8", CnnDatatype::kInt8}};  // the runner thread's longest sleep without a completion

std::vector<int64_t> BatchShape(const models::cnn::Shape& s) {
  if (s.h == 1 && s.w == 1) return {-1, s.c};
  return {-1, s.c, s.h, s.w};
}

absl::StatusOr<std::unique_ptr<CnnModel>> LoadModel(const std::string& name,
                                                    const hw::cluster::Cluster& cluster,
                                                    const CnnOptions& o) {
  auto m = std::make_unique<CnnModel>();
  auto in_context = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("CNN model '", name, "': ", s.message()));
  };
  absl::StatusOr<models::cnn::Graph> graph = models::cnn::LoadGraph(name);
  if (!graph.ok()) return in_context(graph.status());
  m->name = graph->name;
  const models::cnn::Node& in = graph->nodes.front();
  const models::cnn::Node& out = graph->nodes.back();
  m->input = {.name = in.name,
              .datatype = CnnDatatypeNames().ToString(o.input_datatype),
              .shape = {-1, in.out.c, in.out.h, in.out.w}};
  m->output = {.name = out.name, .shape = BatchShape(out.out)};
  absl::StatusOr<scheduler::partition::Profile> profile =
      engine::cnn::BuildProfile(*graph, cluster);
  if (!profile.ok()) return in_context(profile.status());
  m->profile = *std::move(profile);
  absl::StatusOr<scheduler::partition::Plan> plan =
      engine::cnn::SolvePlan(m->profile, o.policy, o.alpha);
  if (!plan.ok()) return in_context(plan.status());
  m->plan = *std::move(plan);
  m->partition = engine::cnn::PartitionString(m->profile, m->plan);
  return m;
}

}  // namespace

const EnumNames<CnnDatatype>& CnnDatatypeNames() {
  static constexpr EnumNames<CnnDatatype> kNames("CNN input datatype", kDatatypes);
  return kNames;
}

int64_t CnnTensorSpec::elements_per_image() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

CnnRunner::CnnRunner(const CnnOptions& options, Pacing pacing, double speed, ServerMetrics* metrics)
    : options_(options), pacing_(pacing), speed_(speed), metrics_(metrics) {}

absl::StatusOr<std::unique_ptr<CnnRunner>> CnnRunner::Create(const CnnOptions& options,
                                                             Pacing pacing, double speed,
                                                             ServerMetrics* metrics) {
  absl::StatusOr<hw::cluster::Cluster> cluster = hw::cluster::LoadCluster(options.cluster);
  if (!cluster.ok()) {
    return absl::Status(cluster.status().code(),
                        absl::StrCat("CNN cluster: ", cluster.status().message()));
  }
  std::unique_ptr<CnnRunner> r(new CnnRunner(options, pacing, speed, metrics));
  for (const std::string& name : options.models) {
    ASSIGN_OR_RETURN(std::unique_ptr<CnnModel> m, LoadModel(name, *cluster, options));
    if (r->Find(m->name) != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("CNN model '", m->name, "' is listed twice"));
    }
    r->models_.push_back(std::move(m));
  }
  absl::MutexLock lock(&r->mu_);
  for (const auto& m : r->models_) {
    ASSIGN_OR_RETURN(engine::cnn::Pipeline pipe,
                     engine::cnn::Pipeline::Create(m->profile, m->plan));
    const size_t n = pipe.resources().size();
    r->states_.push_back({.model = m.get(),
                          .pipeline = std::move(pipe),
                          .reported_busy_s = std::vector<double>(n, 0.0),
                          .reported_energy_j = std::vector<double>(n, 0.0)});
  }
  r->wall_start_ = std::chrono::steady_clock::now();
  if (pacing == Pacing::kRealtime) {
    ASSIGN_OR_RETURN(r->thread_,
                     StartThread("the CNN runner thread", [p = r.get()] { p->Loop(); }));
  }
  return r;
}

CnnRunner::~CnnRunner() { Stop(); }

const CnnModel* CnnRunner::Find(const std::string& name) const {
  for (const auto& m : models_) {
    if (m->name == name) return m.get();
  }
  return nullptr;
}

std::string CnnRunner::ModelList() const {
  std::vector<std::string> names;
  for (const auto& m : models_) names.push_back(m->name);
  return absl::StrJoin(names, ", ");
}

double CnnRunner::WallSimSeconds() const {
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall_start_;
  return wall.count() * speed_;
}

absl::StatusOr<int64_t> CnnRunner::Infer(const CnnModel& model, int64_t images, Done done) {
  std::vector<Delivery> out;
  int64_t ticket = 0;
  {
    absl::MutexLock lock(&mu_);
    if (draining_ || stop_) return absl::UnavailableError("the server is draining");
    ModelState* st = nullptr;
    for (ModelState& s : states_) {
      if (s.model == &model) st = &s;
    }
    if (st == nullptr) return absl::NotFoundError(absl::StrCat("unknown model '", model.name, "'"));
    engine::cnn::Pipeline& pipe = st->pipeline;
    const double arrival = pacing_ == Pacing::kFast
                               ? pipe.EarliestUnqueuedArrival(pipe.last_arrival_s())
                               : std::max(WallSimSeconds(), pipe.last_arrival_s());
    CnnResult result{.images = images, .arrival_s = arrival};
    int64_t last = 0;
    for (int64_t i = 0; i < images; ++i) {
      last = next_image_++;
      ASSIGN_OR_RETURN(engine::cnn::PipelineCompletion c, pipe.Submit(last, arrival));
      if (i == 0) result.queue_s = c.queue_s;
      result.energy_j += c.energy_j;
      result.completion_s = c.completion_s;
    }
    st->pending.emplace(last, Pending{result, std::move(done)});
    ++in_flight_;
    ticket = last;
    if (pacing_ == Pacing::kFast) {
      AdvanceLocked(*st, result.completion_s, &out);
    } else {
      kick_ = true;
    }
  }
  Deliver(out);
  return ticket;
}

void CnnRunner::Cancel(int64_t ticket) {
  Done done;
  {
    absl::MutexLock lock(&mu_);
    for (ModelState& st : states_) {
      auto it = st.pending.find(ticket);
      if (it == st.pending.end()) continue;
      done = std::move(it->second.done);
      st.pending.erase(it);  // its last image's completion now finds nothing to answer
      --in_flight_;
      break;
    }
  }
  if (done) done(absl::CancelledError("the client cancelled the call"));
}

void CnnRunner::AdvanceLocked(ModelState& st, double t, std::vector<Delivery>* out) {
  for (const engine::cnn::PipelineCompletion& c : st.pipeline.AdvanceTo(t)) {
    auto it = st.pending.find(c.id);
    if (it == st.pending.end()) continue;  // not the last image of its request
    out->emplace_back(std::move(it->second.done), it->second.result);
    st.pending.erase(it);
    --in_flight_;
  }
  if (metrics_ == nullptr) return;
  const auto& res = st.pipeline.resources();
  const double now = st.pipeline.now_s();
  for (size_t r = 0; r < res.size(); ++r) {
    metrics_->OnCnnResource(
        st.model->name, res[r].name, res[r].link, res[r].busy_s - st.reported_busy_s[r],
        res[r].total_energy_j - st.reported_energy_j[r], now > 0 ? res[r].busy_s / now : 0);
    st.reported_busy_s[r] = res[r].busy_s;
    st.reported_energy_j[r] = res[r].total_energy_j;
  }
  metrics_->SetCnnSimTime(st.model->name, now);
}

void CnnRunner::Deliver(std::vector<Delivery>& out) {
  for (auto& [done, result] : out) done(result);
}

void CnnRunner::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    // Every wake moves every pipeline to the wall-clock time, so that idle models' clocks and
    // utilisation gauges keep following it (at least every kIdleWaitMs).
    std::vector<Delivery> out;
    for (ModelState& s : states_) AdvanceLocked(s, WallSimSeconds(), &out);
    if (!out.empty()) {
      // Completion callbacks finish gRPC calls: never under the lock.
      mu_.Unlock();
      Deliver(out);
      mu_.Lock();
      continue;
    }
    double next = std::numeric_limits<double>::infinity();
    for (const ModelState& s : states_) next = std::min(next, s.pipeline.next_completion_s());
    const double wait_ms =
        std::clamp((next - WallSimSeconds()) / speed_ * 1e3, 0.0, static_cast<double>(kIdleWaitMs));
    kick_ = false;
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || kick_; };
    mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(wait_ms));
  }
}

bool CnnRunner::ready() {
  absl::MutexLock lock(&mu_);
  return !draining_ && !stop_;
}

int64_t CnnRunner::in_flight() {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

void CnnRunner::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool CnnRunner::WaitDrained(std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&drained), absl::FromChrono(timeout));
}

void CnnRunner::Stop() {
  std::vector<Done> aborted;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
    for (ModelState& s : states_) {
      for (auto& [id, p] : s.pending) aborted.push_back(std::move(p.done));
      s.pending.clear();
    }
    in_flight_ = 0;
  }
  if (thread_.joinable()) thread_.join();
  for (Done& d : aborted)
    d(absl::UnavailableError("the server stopped before the inference ended"));
}

}  // namespace neupims::server
