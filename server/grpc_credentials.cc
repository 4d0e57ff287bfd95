#include "server/grpc_credentials.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "common/check.h"

namespace neupims::server {
namespace {

// Health probes need no token (the rule: every service but health).
constexpr absl::string_view kHealthPathPrefix = "/grpc.health.v1.Health/";

struct ProcessorState {
  std::shared_ptr<const Security> security;
  std::function<void()> on_refused;
};

absl::string_view View(const grpc_slice& s) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(s)),
                           GRPC_SLICE_LENGTH(s));
}

// grpc_auth_metadata_processor::process: runs on each call's initial metadata, before routing.
// `done` is called before returning (the check is a digest compare, nothing blocks).
void ProcessCall(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                 size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
  const ProcessorState& st = *static_cast<const ProcessorState*>(state);
  bool health = false;
  std::vector<absl::string_view> values;
  std::vector<grpc_metadata> consumed;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = View(md[i].key);
    if (key == ":path") {
      health = absl::StartsWith(View(md[i].value), kHealthPathPrefix);
    } else if (key == "authorization") {
      values.push_back(View(md[i].value));
      consumed.push_back(md[i]);
    }
  }
  const absl::Status status = health ? absl::OkStatus() : st.security->CheckAuthorization(values);
  if (!status.ok()) {
    if (st.on_refused) st.on_refused();
    const std::string message(status.message());
    done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_UNAUTHENTICATED, message.c_str());
    return;
  }
  done(user_data, consumed.data(), consumed.size(), nullptr, 0, GRPC_STATUS_OK, nullptr);
}

void DestroyState(void* state) { delete static_cast<ProcessorState*>(state); }

class NeupimsServerCredentials final : public grpc::ServerCredentials {
 public:
  NeupimsServerCredentials(std::shared_ptr<const Security> security,
                           std::function<void()> on_refused)
      : security_(std::move(security)), on_refused_(std::move(on_refused)) {}

  // The token check is this class's own; nothing else installs a processor.
  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {
    NEUPIMS_CHECK_MSG(false, "NeupimsServerCredentials has its own auth metadata processor");
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    grpc_server_credentials* creds = CoreCredentials();
    if (security_->token()) {
      grpc_server_credentials_set_auth_metadata_processor(
          creds, {ProcessCall, DestroyState, new ProcessorState{security_, on_refused_}});
    }
    const int port = grpc_server_add_http2_port(server, addr.c_str(), creds);
    grpc_server_credentials_release(creds);
    return port;
  }

  grpc_server_credentials* CoreCredentials() const {
    if (!security_->tls()) return grpc_insecure_server_credentials_create();
    grpc_ssl_pem_key_cert_pair pair{security_->key_pem().c_str(), security_->cert_pem().c_str()};
    return grpc_ssl_server_credentials_create_ex(
        security_->mutual_tls() ? security_->client_ca_pem().c_str() : nullptr, &pair, 1,
        security_->mutual_tls() ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        nullptr);
  }

  std::shared_ptr<const Security> security_;
  std::function<void()> on_refused_;
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> MakeGrpcServerCredentials(
    std::shared_ptr<const Security> security, std::function<void()> on_refused) {
  return std::make_shared<NeupimsServerCredentials>(std::move(security), std::move(on_refused));
}

}  // namespace neupims::server
