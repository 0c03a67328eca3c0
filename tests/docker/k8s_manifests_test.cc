// docker/k8s/*.yaml: no cluster runs them here, so this checks what can be checked without
// one: every file parses, and the manifests agree with each other and with the server and
// image contracts (ports, probes, shutdown timing, read-only models, non-root).
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace textgen::testing {
namespace k8s_manifests_test {

using nlohmann::json;

std::string K8sDir() { return SourceDir() + "/docker/k8s"; }

// Every document of a YAML file, as JSON, through Debian's python3-yaml (no C++ YAML parser is a
// project dependency): /usr/bin/python3, not whatever python3 comes first on PATH.
std::vector<json> LoadYaml(const std::string& path) {
  const CommandResult r = RunCommand(
      "/usr/bin/python3 -c 'import json, sys, yaml; "
      "json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None], "
      "sys.stdout)' " +
      ShellQuote(path) + " 2>&1");
  if (r.exit_code == 127 || r.out.find("No module named 'yaml'") != std::string::npos) {
    FAIL(
        "python3 with its yaml module is needed to read the manifests: install Debian's "
        "python3-yaml (scripts/install-deps.sh)\n"
        << r.out);
  }
  if (r.exit_code != 0) FAIL("cannot parse " << path << ":\n" << r.out);
  return json::parse(r.out).get<std::vector<json>>();
}

// The one document of `path`, which must be of `kind`.
json LoadOne(const std::string& file, const std::string& kind) {
  const std::vector<json> docs = LoadYaml(K8sDir() + "/" + file);
  INFO(file);
  REQUIRE(docs.size() == 1);
  REQUIRE(docs[0].at("kind") == kind);
  return docs[0];
}

// The container's environment as a map (value entries only).
std::map<std::string, std::string> EnvOf(const json& container) {
  std::map<std::string, std::string> env;
  for (const json& e : container.value("env", json::array())) {
    env[e.at("name").get<std::string>()] = e.value("value", "");
  }
  return env;
}

TEST_CASE("every k8s manifest parses as Kubernetes objects", "[docker][k8s]") {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(K8sDir())) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    INFO(entry.path().string());
    const std::vector<json> docs = LoadYaml(entry.path().string());
    REQUIRE(!docs.empty());
    for (const json& d : docs) {
      CHECK(d.contains("apiVersion"));
      CHECK(d.contains("kind"));
      CHECK(d.at("metadata").contains("name"));
    }
  }
  CHECK(files >= 4);  // deployment, service, hpa, models PVC (and the ingress example)
}

TEST_CASE("the InferencePool example selects the Deployment's pods on their HTTP port",
          "[docker][k8s]") {
  const json deployment = LoadOne("deployment.yaml", "Deployment");
  const json pool = LoadOne("inference-pool.yaml", "InferencePool");
  CHECK(pool.at("apiVersion") == "inference.networking.k8s.io/v1");
  const json& labels = deployment.at("spec").at("template").at("metadata").at("labels");
  CHECK(pool.at("spec").at("selector").at("matchLabels") == labels);
  const json& c = deployment.at("spec").at("template").at("spec").at("containers")[0];
  int http_port = 0;
  for (const json& p : c.at("ports")) {
    if (p.at("name") == "http") http_port = p.at("containerPort");
  }
  REQUIRE(pool.at("spec").at("targetPorts").size() == 1);
  CHECK(pool.at("spec").at("targetPorts")[0].at("number") == http_port);
  CHECK(pool.at("spec").at("endpointPickerRef").contains("name"));
}

TEST_CASE("the k8s manifests agree with each other and the server", "[docker][k8s]") {
  const json deployment = LoadOne("deployment.yaml", "Deployment");
  const json service = LoadOne("service.yaml", "Service");
  const json hpa = LoadOne("hpa.yaml", "HorizontalPodAutoscaler");
  const json pvc = LoadOne("models-pvc.yaml", "PersistentVolumeClaim");
  const json ingress = LoadOne("ingress.yaml", "Ingress");

  const json& spec = deployment.at("spec");
  CHECK(spec.at("replicas") == 2);
  const json& labels = spec.at("template").at("metadata").at("labels");
  CHECK(spec.at("selector").at("matchLabels") == labels);
  const json& pod = spec.at("template").at("spec");
  REQUIRE(pod.at("containers").size() == 1);
  const json& c = pod.at("containers")[0];
  CHECK(c.at("image") == "textgen:latest");

  // The image runs as uid 10001 and writes nothing outside /tmp.
  CHECK(pod.at("securityContext").at("runAsNonRoot") == true);
  CHECK(pod.at("securityContext").at("runAsUser") == 10001);
  CHECK(c.at("securityContext").at("allowPrivilegeEscalation") == false);
  CHECK(c.at("securityContext").at("readOnlyRootFilesystem") == true);

  // Ports and probes on the address the server listens on.
  const std::map<std::string, std::string> env = EnvOf(c);
  CHECK(env.at("TEXTGEN_LISTEN") == "0.0.0.0:50051");
  CHECK(env.at("TEXTGEN_METRICS_LISTEN") == "0.0.0.0:9090");
  std::map<std::string, int> ports;
  for (const json& p : c.at("ports")) ports[p.at("name")] = p.at("containerPort");
  CHECK(env.at("TEXTGEN_HTTP_LISTEN") == "0.0.0.0:8000");
  CHECK(ports == std::map<std::string, int>{{"grpc", 50051}, {"metrics", 9090}, {"http", 8000}});
  for (const char* probe : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    INFO(probe);
    CHECK(c.at(probe).at("grpc").at("port") == 50051);
  }
  const json& startup = c.at("startupProbe");
  CHECK(startup.at("periodSeconds").get<int>() * startup.at("failureThreshold").get<int>() >= 300);

  // SIGTERM comes after preStop; the kubelet SIGKILLs at terminationGracePeriodSeconds, which
  // must leave the server its whole --shutdown-grace (10 s unless the manifest says otherwise).
  const int grace =
      env.count("TEXTGEN_SHUTDOWN_GRACE") ? std::stoi(env.at("TEXTGEN_SHUTDOWN_GRACE")) : 10;
  int pre_stop = 0;
  if (c.contains("lifecycle")) {
    const json& cmd = c.at("lifecycle").at("preStop").at("exec").at("command");
    REQUIRE(cmd.size() == 2);
    CHECK(cmd[0] == "sleep");
    pre_stop = std::stoi(cmd[1].get<std::string>());
  }
  CHECK(pod.at("terminationGracePeriodSeconds").get<int>() > pre_stop + grace);

  // CPU and memory both requested and limited; the thread count matches the CPU limit.
  for (const char* kind : {"requests", "limits"}) {
    INFO(kind);
    CHECK(c.at("resources").at(kind).contains("cpu"));
    CHECK(c.at("resources").at(kind).contains("memory"));
  }
  CHECK(env.at("TEXTGEN_THREADS") == c.at("resources").at("limits").at("cpu").get<std::string>());

  // The model comes read-only from the claim, at the path TEXTGEN_MODEL names.
  CHECK(env.at("TEXTGEN_MODEL").starts_with("/models/"));
  bool models_mounted = false;
  for (const json& m : c.at("volumeMounts")) {
    if (m.at("mountPath") == "/models") {
      models_mounted = true;
      CHECK(m.at("readOnly") == true);
      for (const json& v : pod.at("volumes")) {
        if (v.at("name") == m.at("name")) {
          CHECK(v.at("persistentVolumeClaim").at("claimName") == pvc.at("metadata").at("name"));
        }
      }
    }
  }
  CHECK(models_mounted);

  // The Service selects the pods and exposes both ports under their names.
  CHECK(service.at("spec").at("type") == "ClusterIP");
  CHECK(service.at("spec").at("selector") == labels);
  std::map<std::string, json> service_ports;
  for (const json& p : service.at("spec").at("ports")) service_ports[p.at("name")] = p;
  CHECK(service_ports.at("grpc").at("port") == 50051);
  CHECK(service_ports.at("grpc").at("appProtocol") == "grpc");
  CHECK(ports.count(service_ports.at("grpc").at("targetPort").get<std::string>()) == 1);
  CHECK(service_ports.at("metrics").at("port") == 9090);
  CHECK(ports.count(service_ports.at("metrics").at("targetPort").get<std::string>()) == 1);

  // The autoscaler drives this Deployment on CPU, never below its two replicas.
  CHECK(hpa.at("apiVersion") == "autoscaling/v2");
  CHECK(hpa.at("spec").at("scaleTargetRef").at("kind") == "Deployment");
  CHECK(hpa.at("spec").at("scaleTargetRef").at("name") == deployment.at("metadata").at("name"));
  CHECK(hpa.at("spec").at("minReplicas") == spec.at("replicas"));
  const json& metric = hpa.at("spec").at("metrics")[0];
  CHECK(metric.at("resource").at("name") == "cpu");
  CHECK(metric.at("resource").at("target").at("type") == "Utilization");

  // The ingress example routes gRPC to the Service and hashes on the session.
  const json& annotations = ingress.at("metadata").at("annotations");
  CHECK(annotations.at("nginx.ingress.kubernetes.io/backend-protocol") == "GRPC");
  CHECK(annotations.contains("nginx.ingress.kubernetes.io/upstream-hash-by"));
  const json& backend =
      ingress.at("spec").at("rules")[0].at("http").at("paths")[0].at("backend").at("service");
  CHECK(backend.at("name") == service.at("metadata").at("name"));
  CHECK(backend.at("port").at("name") == "grpc");
}

}  // namespace k8s_manifests_test
}  // namespace textgen::testing
