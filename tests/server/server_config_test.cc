// LoadServerConfig: the server's JSON config reads the engine's typed options through their
// names tables.
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/server.h"

namespace neupims::server {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Status LoadText(const std::string& name, const std::string& json, ServerOptions* o) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path) << json;
  return LoadServerConfig(path, o);
}

TEST(LoadServerConfig, ReadsEveryTypedEngineOption) {
  ServerOptions o;
  const absl::Status s = LoadText("server_config_all.json", R"({
    "mode": "npu+pim", "device": "neupims", "prefill": "local", "level": "command",
    "mha_estimator": "algorithm1", "channel_policy": "min_load", "sub_batch": "auto",
    "dual_row_buffers": true, "pacing": "fast"})",
                                  &o);
  ASSERT_TRUE(s.ok()) << s;
  const engine::EngineOptions& e = o.runner.engine;
  EXPECT_EQ(e.mode, engine::SystemModeKind::kNpuPim);
  EXPECT_EQ(e.device, "neupims");
  EXPECT_EQ(e.prefill, engine::PrefillPlacement::kLocal);
  EXPECT_EQ(e.level, hw::DetailLevel::kCommand);
  EXPECT_EQ(e.mha_estimator, engine::MhaEstimatorKind::kAlgorithm1);
  EXPECT_EQ(e.channel_policy, scheduler::ChannelPolicy::kMinLoad);
  EXPECT_EQ(e.sub_batch_interleaving, engine::SubBatchInterleaving::kAuto);
  EXPECT_EQ(e.dual_row_buffers, true);
  EXPECT_EQ(o.runner.pacing, Pacing::kFast);
}

TEST(LoadServerConfig, HttpPortIsOptionalAndMinusOneTurnsItOff) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_http_default.json", "{}", &o).ok());
  EXPECT_EQ(o.http_port, 8000);
  ASSERT_TRUE(LoadText("server_config_http.json", R"({"http_port": 8080})", &o).ok());
  EXPECT_EQ(o.http_port, 8080);
  ASSERT_TRUE(LoadText("server_config_http_off.json", R"({"http_port": -1})", &o).ok());
  EXPECT_EQ(o.http_port, std::nullopt);
  const absl::Status bad = LoadText("server_config_http_bad.json", R"({"http_port": 70000})", &o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("http_port"));
}

TEST(LoadServerConfig, ReadsTheRequestSizeLimits) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_limits_default.json", "{}", &o).ok());
  EXPECT_EQ(o.max_message_bytes, int64_t{4} << 20);
  EXPECT_EQ(o.runner.engine.max_prompt_tokens, std::nullopt);
  ASSERT_TRUE(LoadText("server_config_limits.json",
                       R"({"max_message_bytes": 65536, "max_prompt_tokens": 512})", &o)
                  .ok());
  EXPECT_EQ(o.max_message_bytes, 65536);
  EXPECT_EQ(o.runner.engine.max_prompt_tokens, 512);
  ASSERT_TRUE(LoadText("server_config_limits_off.json", R"({"max_prompt_tokens": 0})", &o).ok());
  EXPECT_EQ(o.runner.engine.max_prompt_tokens, std::nullopt);
  const absl::Status bad =
      LoadText("server_config_limits_bad.json", R"({"max_message_bytes": 10})", &o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("max_message_bytes"));
}

TEST(LoadServerConfig, ReadsTheStreamBufferBound) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_stream_default.json", "{}", &o).ok());
  EXPECT_EQ(o.max_stream_buffer, 4096);
  ASSERT_TRUE(LoadText("server_config_stream.json", R"({"max_stream_buffer": 64})", &o).ok());
  EXPECT_EQ(o.max_stream_buffer, 64);
  ASSERT_TRUE(LoadText("server_config_stream_off.json", R"({"max_stream_buffer": 0})", &o).ok());
  EXPECT_EQ(o.max_stream_buffer, 0);
  const absl::Status bad =
      LoadText("server_config_stream_bad.json", R"({"max_stream_buffer": -1})", &o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("max_stream_buffer"));
}

TEST(LoadServerConfig, ReadsTheConcurrentStreamLimit) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_streams_default.json", "{}", &o).ok());
  EXPECT_EQ(o.max_concurrent_streams, 1024);
  ASSERT_TRUE(
      LoadText("server_config_streams.json", R"({"max_concurrent_streams": 100})", &o).ok());
  EXPECT_EQ(o.max_concurrent_streams, 100);
  for (const char* bad_value : {"0", "2147483648"}) {
    const absl::Status bad =
        LoadText("server_config_streams_bad.json",
                 absl::StrCat(R"({"max_concurrent_streams": )", bad_value, "}"), &o);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad_value;
    EXPECT_THAT(bad.message(), HasSubstr("max_concurrent_streams")) << bad_value;
  }
}

TEST(LoadServerConfig, ReadsTheHttpThreadCount) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_http_threads_default.json", "{}", &o).ok());
  EXPECT_EQ(o.http_threads, 512);
  const absl::Status s = LoadText("server_config_http_threads.json", R"({"http_threads": 16})", &o);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(o.http_threads, 16);
  const absl::Status bad =
      LoadText("server_config_http_threads_bad.json", R"({"http_threads": 0})", &o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("http_threads"));
}

TEST(LoadServerConfig, ReadsEveryNumericEngineFlag) {
  ServerOptions o;
  const absl::Status s = LoadText("server_config_numeric.json", R"({
    "max_batch": 64, "max_prefill_tokens": 2048, "block_tokens": 16, "sbi_min_batch": 32,
    "prefill_groups": 3, "prefill_link_gbps": 32.5, "interconnect_gbps": 100,
    "interconnect_latency_ns": 500})",
                                  &o);
  ASSERT_TRUE(s.ok()) << s;
  const engine::EngineOptions& e = o.runner.engine;
  EXPECT_EQ(e.max_batch, 64);
  EXPECT_EQ(e.max_prefill_tokens, 2048);
  EXPECT_EQ(e.block_tokens, 16);
  EXPECT_EQ(e.sbi_min_batch, 32);
  EXPECT_EQ(e.prefill_groups, 3);
  EXPECT_EQ(e.prefill_link.gb_per_s, 32.5);
  EXPECT_EQ(e.interconnect.gb_per_s, 100);
  EXPECT_EQ(e.interconnect.latency_ns, 500);
  const absl::Status zero =
      LoadText("server_config_zero_bw.json", R"({"interconnect_gbps": 0})", &o);
  EXPECT_EQ(zero.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.message()), HasSubstr("interconnect_gbps"));
}

TEST(LoadServerConfig, AbsentOverridesStayTheModesChoice) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_empty.json", "{}", &o).ok());
  const engine::EngineOptions& e = o.runner.engine;
  EXPECT_EQ(e.mode, engine::SystemModeKind::kNeuPims);
  EXPECT_FALSE(e.device.has_value());
  EXPECT_FALSE(e.channel_policy.has_value());
  EXPECT_FALSE(e.sub_batch_interleaving.has_value());
  EXPECT_FALSE(e.dual_row_buffers.has_value());
}

TEST(LoadServerConfig, ParallelismIsOptionalAndAtLeastOne) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_nopar.json", "{}", &o).ok());
  EXPECT_FALSE(o.runner.engine.tp.has_value());  // the model's default (Table 3)
  EXPECT_FALSE(o.runner.engine.pp.has_value());
  ASSERT_TRUE(LoadText("server_config_par.json", R"({"tp": 2, "pp": 1})", &o).ok());
  EXPECT_EQ(o.runner.engine.tp, 2);
  EXPECT_EQ(o.runner.engine.pp, 1);
  const absl::Status s = LoadText("server_config_tp0.json", R"({"tp": 0})", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tp"));
}

// The flags' check (engine::CheckDualRowBuffers) holds for a config file too.
TEST(LoadServerConfig, DualRowBuffersOnWithNpuOnlyIsRefusedNamingBoth) {
  ServerOptions o;
  const absl::Status s = LoadText("server_config_npu_dual.json",
                                  R"({"mode": "npu-only", "dual_row_buffers": true})", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dual_row_buffers"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("npu-only"));
  EXPECT_TRUE(LoadText("server_config_npu_single.json",
                       R"({"mode": "npu-only", "dual_row_buffers": false})", &o)
                  .ok());
}

TEST(LoadServerConfig, UnknownEnumValueIsAnErrorNamingTheFieldAndTheChoices) {
  struct Case {
    const char* field;
    const char* choices;
  };
  for (const Case& c :
       {Case{"mode", "npu-only, npu+pim, neupims"}, Case{"prefill", "standalone, local"},
        Case{"level", "command, analytic"}, Case{"mha_estimator", "analytic, algorithm1"},
        Case{"channel_policy", "round_robin, min_load"}, Case{"sub_batch", "on, off, auto"},
        Case{"pacing", "realtime, fast"}}) {
    SCOPED_TRACE(c.field);
    ServerOptions o;
    const absl::Status s = LoadText(std::string("server_config_bad_") + c.field + ".json",
                                    std::string(R"({")") + c.field + R"(": "bogus"})", &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr(std::string("'") + c.field + "'"));
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.choices));
    EXPECT_THAT(std::string(s.message()), HasSubstr("bogus"));
  }
}

TEST(LoadServerConfig, ReadsTheSecurityFilePathsAndRefusesWrongTypes) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_security_default.json", "{}", &o).ok());
  EXPECT_FALSE(o.security.any());
  const absl::Status s = LoadText("server_config_security.json", R"({
    "tls_cert": "c.pem", "tls_key": "k.pem", "tls_client_ca": "ca.pem",
    "auth_token_file": "token"})",
                                  &o);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(o.security.tls_cert, "c.pem");
  EXPECT_EQ(o.security.tls_key, "k.pem");
  EXPECT_EQ(o.security.tls_client_ca, "ca.pem");
  EXPECT_EQ(o.security.auth_token_file, "token");
  // The files themselves are checked by Server::Start (Security::Load, security_test.cc).
  const absl::Status bad = LoadText("server_config_security_bad.json", R"({"tls_key": 1})", &o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("tls_key"));
  const absl::Status typo = LoadText("server_config_security_typo.json", R"({"tls_crt": "c"})", &o);
  EXPECT_THAT(std::string(typo.message()), HasSubstr("tls_crt"));
}

TEST(LoadServerConfig, ReadsTheCorsListsAndRefusesBadItemsNamingTheFileAndTheKey) {
  ServerOptions o;
  ASSERT_TRUE(LoadText("server_config_cors_default.json", "{}", &o).ok());
  EXPECT_FALSE(o.cors.enabled());  // off unless origins are given
  const absl::Status s = LoadText("server_config_cors.json", R"({
    "allowed_origins": ["http://localhost:3000", "https://ui.example"],
    "allowed_methods": ["GET", "POST"], "allowed_headers": ["Authorization", "Content-Type"],
    "allow_credentials": true})",
                                  &o);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(o.cors.allowed_origins, ElementsAre("http://localhost:3000", "https://ui.example"));
  EXPECT_THAT(o.cors.allowed_methods, ElementsAre("GET", "POST"));
  EXPECT_THAT(o.cors.allowed_headers, ElementsAre("Authorization", "Content-Type"));
  EXPECT_TRUE(o.cors.allow_credentials);
  for (const auto& [text, field, what] :
       {std::tuple{R"({"allowed_origins": ["http://ok", "http://ui.example/"]})",
                   "allowed_origins[1]", "no path or trailing slash"},
        std::tuple{R"({"allowed_origins": ["localhost:3000"]})", "allowed_origins[0]",
                   "scheme://host[:port]"},
        std::tuple{R"({"allowed_origins": "http://ok"})", "allowed_origins", "array"},
        std::tuple{R"({"allowed_methods": ["FETCH"]})", "allowed_methods[0]", "GET, HEAD, POST"},
        std::tuple{R"({"allowed_headers": ["X Bad"]})", "allowed_headers[0]", "header name"},
        std::tuple{R"({"allow_credentials": "yes"})", "allow_credentials", ""}}) {
    const std::string path =
        (std::filesystem::path(::testing::TempDir()) / "server_config_cors_bad.json").string();
    const absl::Status bad = LoadText("server_config_cors_bad.json", text, &o);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(bad.message()),
                AllOf(HasSubstr(path), HasSubstr(field), HasSubstr(what)))
        << text;
  }
}

// The CORS keys beyond allowed_origins do nothing without an allowed origin (no CORS header is
// sent then): a config that sets one without origins was silently ignored; now it is refused.
TEST(LoadServerConfig, CorsKeysWithoutAllowedOriginsAreRefusedNamingTheKey) {
  ServerOptions o;
  for (const auto& [text, key] :
       {std::pair{R"({"allowed_methods": ["GET"]})", "allowed_methods"},
        std::pair{R"({"allowed_headers": ["Content-Type"]})", "allowed_headers"},
        std::pair{R"({"allow_credentials": true})", "allow_credentials"},
        std::pair{R"({"allowed_origins": [], "allow_credentials": false})", "allow_credentials"}}) {
    const absl::Status s = LoadText("server_config_cors_no_origins.json", text, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(key), HasSubstr("needs allowed_origins")))
        << text;
  }
}

// An unknown model or device and a misspelt bind address were refused only when the server
// started, by messages naming neither the config file nor the field. (A well-spelt host name that
// does not resolve is still refused at start: reading the file does no DNS lookup.)
TEST(LoadServerConfig, AnUnknownModelDeviceCnnOrBindAddressNamesTheFileAndTheField) {
  ServerOptions o;
  const std::string dir = ::testing::TempDir();
  for (const auto& [field, json] : std::vector<std::pair<std::string, std::string>>{
           {"model", R"({"model": "no-such-model"})"},
           {"device", R"({"device": "no-such-device"})"},
           {"device", R"({"device": ""})"},
           {"bind_address", R"({"bind_address": "no such host"})"},
           {"cnn_models[1]", R"({"cnn_models": ["resnet50", "no-such-cnn"]})"},
           {"cnn_cluster", R"({"cnn_cluster": "no-such-cluster"})"}}) {
    const absl::Status s = LoadText("server_config_bad_" + field + ".json", json, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(
        std::string(s.message()),
        HasSubstr((std::filesystem::path(dir) / ("server_config_bad_" + field + ".json")).string() +
                  ": field '" + field + "'"))
        << s;
  }
}

TEST(LoadServerConfig, BindAddressIsCheckedBySpellingWithoutALookup) {
  ServerOptions o;
  for (const char* good : {"127.0.0.1", "0.0.0.0", "localhost", "::1", "[::1]",
                           "::", "no.such.host.invalid", "host-1.example."}) {
    EXPECT_TRUE(LoadText("server_config_bind_ok.json",
                         absl::StrCat(R"({"bind_address": ")", good, R"("})"), &o)
                    .ok())
        << good;
  }
  for (const char* bad :
       {"", "a b", "-lead.example", "x..y", "[::1", "1:2:3:zz", "a_b", "host:8080"}) {
    const absl::Status s = LoadText("server_config_bind_bad.json",
                                    absl::StrCat(R"({"bind_address": ")", bad, R"("})"), &o);
    EXPECT_THAT(std::string(s.message()), HasSubstr("field 'bind_address'")) << bad;
  }
}

// The flags --max-waiting and --max-prompt-tokens share these bounds (option_ranges.h).
TEST(LoadServerConfig, QueueAndPromptLimitsHaveAnUpperBound) {
  ServerOptions o;
  const absl::Status w = LoadText("server_config_waiting.json", R"({"max_waiting": 1e15})", &o);
  EXPECT_THAT(std::string(w.message()), HasSubstr("field 'max_waiting'"));
  const absl::Status p =
      LoadText("server_config_prompt.json", R"({"max_prompt_tokens": 1099511627776})", &o);
  EXPECT_THAT(std::string(p.message()), HasSubstr("field 'max_prompt_tokens'"));
  EXPECT_TRUE(LoadText("server_config_limits_ok.json",
                       R"({"max_waiting": 16777216, "max_prompt_tokens": 1073741824})", &o)
                  .ok());
}

TEST(ParseServerConfig, ReadsTextLikeAFileAndNamesTheSource) {
  ServerOptions o;
  ASSERT_TRUE(ParseServerConfig(R"({"port": 7000, "speed": 2.5})", "inline.json", &o).ok());
  EXPECT_EQ(o.port, 7000);
  EXPECT_DOUBLE_EQ(o.runner.speed, 2.5);
  const absl::Status bad = ParseServerConfig(R"({"prot": 1})", "inline.json", &o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("inline.json"));
  EXPECT_THAT(bad.message(), HasSubstr("prot"));
}

}  // namespace
}  // namespace neupims::server
