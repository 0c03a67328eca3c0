#include "server/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace textgen::server {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

absl::StatusOr<std::string> ReadFile(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::unique_ptr<BIO, BioFree> MemBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// "Nov 24 09:17:35 2026 GMT" for messages.
std::string AsnTime(const ASN1_TIME* t) {
  std::unique_ptr<BIO, BioFree> out(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(out.get(), t);
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// The certificate must be valid now; a warning when it soon will not be.
absl::Status CheckValidity(const std::string& path, X509* cert) {
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert: ", path, " is not valid before ",
                                                   AsnTime(X509_get0_notBefore(cert))));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert: ", path, " expired on ",
                                                   AsnTime(X509_get0_notAfter(cert)),
                                                   "; renew it (clients refuse it)"));
  }
  time_t in_a_week = std::time(nullptr) + 7 * 24 * 3600;
  if (X509_cmp_time(X509_get0_notAfter(cert), &in_a_week) < 0) {
    spdlog::warn("--tls-cert {} expires on {}: renew it and restart", path,
                 AsnTime(X509_get0_notAfter(cert)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TlsPem> ReadTlsFiles(const TlsFiles& tls) {
  TlsPem pem;
  auto cert = ReadFile("--tls-cert", tls.cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadFile("--tls-key", tls.key);
  if (!key.ok()) return key.status();
  pem.cert_chain = *std::move(cert);
  pem.private_key = *std::move(key);
  if (!tls.client_ca.empty()) {
    auto ca = ReadFile("--tls-client-ca", tls.client_ca);
    if (!ca.ok()) return ca.status();
    pem.client_ca = *std::move(ca);
  }
  return pem;
}

absl::Status CheckTlsFiles(const TlsFiles& tls) {
  if (!tls.enabled()) {
    if (!tls.client_ca.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return absl::OkStatus();
  }
  if (tls.cert.empty() || tls.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  auto pem = ReadTlsFiles(tls);
  if (!pem.ok()) return pem.status();
  std::unique_ptr<X509, X509Free> cert(
      PEM_read_bio_X509(MemBio(pem->cert_chain).get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert: ", tls.cert, " holds no PEM certificate"));
  }
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_bio_PrivateKey(MemBio(pem->private_key).get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key: ", tls.key, " holds no PEM private key (or one protected by a passphrase)"));
  }
  ERR_clear_error();
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key: ", tls.key, " is not the private key of --tls-cert ", tls.cert));
  }
  if (absl::Status st = CheckValidity(tls.cert, cert.get()); !st.ok()) return st;
  if (!pem->client_ca.empty()) {
    std::unique_ptr<X509, X509Free> ca(
        PEM_read_bio_X509(MemBio(pem->client_ca).get(), nullptr, nullptr, nullptr));
    if (ca == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-client-ca: ", tls.client_ca, " holds no PEM certificate"));
    }
  }
  ERR_clear_error();
  return absl::OkStatus();
}

}  // namespace textgen::server
