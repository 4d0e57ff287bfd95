// Security::Load's checks of the TLS and token files, the bearer-token check and the bind warning.
#include "server/security.h"

#include <openssl/ssl.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/test_pki.h"

namespace neupims::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class SecurityLoad : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new test_pki::TestPki();
    const absl::Status s = test_pki::MakeTestPki(
        (std::filesystem::path(::testing::TempDir()) / "security_test").string(), pki_);
    ASSERT_TRUE(s.ok()) << s;
  }
  static void TearDownTestSuite() {
    if (!pki_->dir.empty()) std::filesystem::remove_all(pki_->dir);
    delete pki_;
    pki_ = nullptr;
  }

  void SetUp() override {
    ASSERT_FALSE(pki_->ca_cert.empty()) << "no test PKI (see the set-up failure above)";
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = pki_->Path(name);
    std::ofstream(path) << text;
    return path;
  }

  SecurityOptions Tls() const {
    SecurityOptions o;
    o.tls_cert = pki_->server_cert;
    o.tls_key = pki_->server_key;
    return o;
  }

  static test_pki::TestPki* pki_;
};

test_pki::TestPki* SecurityLoad::pki_ = nullptr;

absl::Status LoadStatus(const SecurityOptions& o) { return Security::Load(o).status(); }

TEST_F(SecurityLoad, NothingSetIsPlainAndOpen) {
  absl::StatusOr<std::shared_ptr<const Security>> s = Security::Load({});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->tls());
  EXPECT_FALSE((*s)->token());
  EXPECT_TRUE((*s)->CheckAuthorization({}).ok());
}

TEST_F(SecurityLoad, ACertificateAndItsKeyLoad) {
  SecurityOptions o = Tls();
  o.tls_client_ca = pki_->ca_cert;
  absl::StatusOr<std::shared_ptr<const Security>> s = Security::Load(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->tls());
  EXPECT_TRUE((*s)->mutual_tls());
  EXPECT_THAT((*s)->cert_pem(), HasSubstr("BEGIN CERTIFICATE"));
}

TEST_F(SecurityLoad, HalfATlsPairNamesBothFlagsAndKeys) {
  SecurityOptions cert_only;
  cert_only.tls_cert = "x";
  const absl::Status a = LoadStatus(cert_only);
  EXPECT_EQ(a.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.message(), AllOf(HasSubstr("--tls-cert"), HasSubstr("tls_cert"),
                                 HasSubstr("--tls-key"), HasSubstr("tls_key")));
  SecurityOptions key_only;
  key_only.tls_key = pki_->server_key;
  EXPECT_THAT(LoadStatus(key_only).message(),
              AllOf(HasSubstr("--tls-key (config \"tls_key\"): given without --tls-cert")));
  SecurityOptions ca_only;
  ca_only.tls_client_ca = pki_->ca_cert;
  EXPECT_THAT(LoadStatus(ca_only).message(),
              AllOf(HasSubstr("--tls-client-ca"), HasSubstr("needs TLS")));
}

TEST_F(SecurityLoad, FileProblemsNameTheOptionAndThePath) {
  SecurityOptions missing = Tls();
  missing.tls_cert = pki_->Path("nope.pem");
  const absl::Status m = LoadStatus(missing);
  EXPECT_EQ(m.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.message(), AllOf(HasSubstr("--tls-cert"), HasSubstr("nope.pem: no such file")));

  SecurityOptions empty = Tls();
  empty.tls_key = Write("empty.key", "");
  EXPECT_THAT(LoadStatus(empty).message(),
              AllOf(HasSubstr("--tls-key"), HasSubstr("empty.key: empty file")));

  SecurityOptions dir = Tls();
  dir.tls_client_ca = pki_->dir;
  EXPECT_THAT(LoadStatus(dir).message(),
              AllOf(HasSubstr("--tls-client-ca"), HasSubstr("is a directory")));
}

TEST_F(SecurityLoad, ContentsThatAreNotWhatTheOptionNeedsAreRefused) {
  SecurityOptions swapped = Tls();
  swapped.tls_cert = pki_->server_key;  // a key where the certificate belongs
  EXPECT_THAT(LoadStatus(swapped).message(),
              AllOf(HasSubstr("--tls-cert"), HasSubstr("no PEM certificate")));

  SecurityOptions no_key = Tls();
  no_key.tls_key = pki_->server_cert;
  EXPECT_THAT(LoadStatus(no_key).message(),
              AllOf(HasSubstr("--tls-key"), HasSubstr("no unencrypted PEM private key")));

  SecurityOptions damaged = Tls();
  damaged.tls_cert = Write(
      "damaged.pem", "-----BEGIN CERTIFICATE-----\nnot base64 !!\n-----END CERTIFICATE-----\n");
  EXPECT_THAT(LoadStatus(damaged).message(),
              AllOf(HasSubstr("--tls-cert"), HasSubstr("bad PEM certificate")));

  SecurityOptions mismatch = Tls();
  mismatch.tls_key = pki_->client_key;
  const absl::Status s = LoadStatus(mismatch);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--tls-key"), HasSubstr("client.key"),
                                 HasSubstr("does not match"), HasSubstr("server.pem")));
}

TEST_F(SecurityLoad, TheTokenIsTheFirstLineTrimmedAndMustNotBeEmpty) {
  SecurityOptions o;
  o.auth_token_file = Write("token", "  s3cret-Token_1  \nsecond line is ignored\n");
  absl::StatusOr<std::shared_ptr<const Security>> s = Security::Load(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->token());
  EXPECT_TRUE((*s)->CheckAuthorization({"Bearer s3cret-Token_1"}).ok());

  o.auth_token_file = Write("blank_first_line", "   \nlater\n");
  const absl::Status blank = LoadStatus(o);
  EXPECT_EQ(blank.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(blank.message(), AllOf(HasSubstr("--auth-token-file (config \"auth_token_file\")"),
                                     HasSubstr("blank_first_line: the first line is empty")));
  o.auth_token_file = Write("empty_token", "");
  EXPECT_THAT(LoadStatus(o).message(), HasSubstr("empty_token: empty file"));
  o.auth_token_file = Write("spaced_token", "two words\n");
  const absl::Status spaced = LoadStatus(o);
  EXPECT_THAT(spaced.message(), HasSubstr("visible ASCII"));
  EXPECT_THAT(spaced.message(), Not(HasSubstr("two words")));
}

TEST_F(SecurityLoad, TheBearerCheckSaysWhatIsWrongWithoutEchoingIt) {
  SecurityOptions o;
  o.auth_token_file = Write("token2", "right-token\n");
  absl::StatusOr<std::shared_ptr<const Security>> loaded = Security::Load(o);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Security& s = **loaded;
  EXPECT_TRUE(s.CheckAuthorization({"Bearer right-token"}).ok());
  EXPECT_TRUE(s.CheckAuthorization({"bearer   right-token "}).ok());  // scheme: any case
  const absl::Status missing = s.CheckAuthorization({});
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.message(), HasSubstr("missing bearer token"));
  const absl::Status wrong = s.CheckAuthorization({"Bearer wrong-token"});
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(wrong.message(), AllOf(HasSubstr("invalid bearer token"),
                                     Not(HasSubstr("wrong-token")), Not(HasSubstr("right"))));
  for (absl::string_view bad : {"right-token", "Basic right-token", "Bearer", "Bearer "}) {
    const absl::Status b = s.CheckAuthorization({bad});
    EXPECT_EQ(b.code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_THAT(b.message(), HasSubstr("not a bearer token")) << bad;
  }
  EXPECT_THAT(s.CheckAuthorization({"Bearer right-token", "Bearer right-token"}).message(),
              HasSubstr("more than one"));
  EXPECT_FALSE(s.CheckAuthorization({"Bearer right-token-and-more"}).ok());
  EXPECT_FALSE(s.CheckAuthorization({"Bearer right-toke"}).ok());
}

TEST_F(SecurityLoad, TheHttpTlsContextGetsTheChainTheKeyAndTheClientCheck) {
  SecurityOptions o = Tls();
  // A chain file: the leaf, then its CA (as a server behind an intermediate would send).
  o.tls_cert =
      Write("chain.pem", test_pki::ReadText(pki_->server_cert) + test_pki::ReadText(pki_->ca_cert));
  o.tls_client_ca = pki_->ca_cert;
  absl::StatusOr<std::shared_ptr<const Security>> s = Security::Load(o);
  ASSERT_TRUE(s.ok()) << s.status();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE((*s)->ConfigureServerContext(ctx));
  STACK_OF(X509)* extra = nullptr;
  SSL_CTX_get_extra_chain_certs(ctx, &extra);
  EXPECT_EQ(extra == nullptr ? 0 : sk_X509_num(extra), 1);
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_verify_mode(ctx), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
  EXPECT_EQ(sk_X509_NAME_num(SSL_CTX_get_client_CA_list(ctx)), 1);
  SSL_CTX_free(ctx);

  // Without a client CA, client certificates are not asked for.
  o.tls_client_ca.clear();
  s = Security::Load(o);
  ASSERT_TRUE(s.ok()) << s.status();
  ctx = SSL_CTX_new(TLS_server_method());
  EXPECT_TRUE((*s)->ConfigureServerContext(ctx));
  EXPECT_EQ(SSL_CTX_get_verify_mode(ctx), SSL_VERIFY_NONE);
  SSL_CTX_free(ctx);
}

TEST(BindWarning, SaysWhichProtectionIsMissing) {
  SecurityOptions none;
  EXPECT_THAT(BindWarning("127.0.0.1", none), IsEmpty());
  EXPECT_THAT(BindWarning("::1", none), IsEmpty());
  const std::string both = BindWarning("0.0.0.0", none);
  EXPECT_THAT(both, AllOf(HasSubstr("0.0.0.0"), HasSubstr("without TLS (--tls-cert, --tls-key)"),
                          HasSubstr("without client authentication (--auth-token-file")));

  SecurityOptions token;
  token.auth_token_file = "t";
  const std::string no_tls = BindWarning("0.0.0.0", token);
  EXPECT_THAT(no_tls, AllOf(HasSubstr("without TLS"), HasSubstr("in clear text"),
                            Not(HasSubstr("client authentication"))));

  SecurityOptions tls;
  tls.tls_cert = "c";
  tls.tls_key = "k";
  const std::string no_auth = BindWarning("10.0.0.5", tls);
  EXPECT_THAT(no_auth, AllOf(HasSubstr("without client authentication"), Not(HasSubstr("TLS ("))));

  tls.auth_token_file = "t";
  EXPECT_THAT(BindWarning("0.0.0.0", tls), IsEmpty());
  SecurityOptions mutual;
  mutual.tls_cert = "c";
  mutual.tls_key = "k";
  mutual.tls_client_ca = "ca";
  EXPECT_THAT(BindWarning("0.0.0.0", mutual), IsEmpty());
}

}  // namespace
}  // namespace neupims::server
