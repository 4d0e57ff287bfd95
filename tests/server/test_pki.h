// A throw-away PKI for the TLS tests, made at test time with the `openssl` command (Debian's
// openssl package, scripts/install_deps.sh): a CA, a server certificate for localhost and
// 127.0.0.1 signed by it, a client certificate signed by it, and a second, untrusted CA with a
// client certificate of its own. EC P-256 keys: quick to generate.
#ifndef NEUPIMS_TESTS_SERVER_TEST_PKI_H_
#define NEUPIMS_TESTS_SERVER_TEST_PKI_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace neupims::server::test_pki {

struct TestPki {
  std::string dir;
  std::string ca_cert;                              // the CA the server and the client trust
  std::string server_cert, server_key;              // CN localhost, SAN DNS:localhost, IP:127.0.0.1
  std::string client_cert, client_key;              // signed by ca_cert
  std::string rogue_client_cert, rogue_client_key;  // signed by another CA

  std::string Path(const std::string& name) const { return dir + "/" + name; }
};

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `openssl args` in `dir`; its output goes to dir/openssl.log.
inline absl::Status OpenSsl(const std::string& dir, const std::string& args) {
  const std::string command =
      absl::StrCat("cd '", dir, "' && openssl ", args, " >>openssl.log 2>&1");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("openssl ", args,
                                            " failed (is the openssl command "
                                            "installed? scripts/install_deps.sh): ",
                                            ReadText(dir + "/openssl.log")));
  }
  return absl::OkStatus();
}

// A self-signed CA: <name>.pem, <name>.key.
inline absl::Status MakeCa(const std::string& dir, const std::string& name) {
  return OpenSsl(dir, absl::StrCat("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                                   "-nodes -days 2 -subj /CN=",
                                   name, " -keyout ", name, ".key -out ", name, ".pem"));
}

// A leaf certificate <name>.pem / <name>.key signed by CA <ca>, with the extensions in <ext>.
inline absl::Status MakeLeaf(const std::string& dir, const std::string& name, const std::string& ca,
                             const std::string& cn, const std::string& ext, int serial) {
  std::ofstream(dir + "/" + name + ".ext") << ext;
  if (absl::Status s =
          OpenSsl(dir, absl::StrCat("req -new -newkey ec -pkeyopt "
                                    "ec_paramgen_curve:prime256v1 -nodes -subj /CN=",
                                    cn, " -keyout ", name, ".key -out ", name, ".csr"));
      !s.ok()) {
    return s;
  }
  return OpenSsl(dir, absl::StrCat("x509 -req -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                                   ".key -set_serial ", serial, " -days 2 -extfile ", name,
                                   ".ext -out ", name, ".pem"));
}

// Makes the whole set in a fresh directory under `parent`, one per process: CTest runs each test
// in a process of its own, several at once.
inline absl::Status MakeTestPki(const std::string& parent, TestPki* pki) {
  pki->dir = (std::filesystem::path(parent) / absl::StrCat("pki-", getpid())).string();
  std::filesystem::remove_all(pki->dir);
  std::filesystem::create_directories(pki->dir);
  const std::string& d = pki->dir;
  const std::string server_ext =
      "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
      "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n";
  const std::string client_ext =
      "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n";
  for (absl::Status s : {MakeCa(d, "ca"), MakeCa(d, "rogue_ca"),
                         MakeLeaf(d, "server", "ca", "localhost", server_ext, 2),
                         MakeLeaf(d, "client", "ca", "test-client", client_ext, 3),
                         MakeLeaf(d, "rogue_client", "rogue_ca", "rogue-client", client_ext, 4)}) {
    if (!s.ok()) return s;
  }
  pki->ca_cert = pki->Path("ca.pem");
  pki->server_cert = pki->Path("server.pem");
  pki->server_key = pki->Path("server.key");
  pki->client_cert = pki->Path("client.pem");
  pki->client_key = pki->Path("client.key");
  pki->rogue_client_cert = pki->Path("rogue_client.pem");
  pki->rogue_client_key = pki->Path("rogue_client.key");
  return absl::OkStatus();
}

}  // namespace neupims::server::test_pki

#endif  // NEUPIMS_TESTS_SERVER_TEST_PKI_H_
