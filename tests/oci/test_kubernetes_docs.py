"""docs/kubernetes.md's manifests and containerd stanza: each YAML block parses and has the
fields the page relies on (the RuntimeClass's handler, the Job's podFailurePolicy on 125, the
admission rule on runtimeClassName), and the TOML stanza names the safex-oci binary through the
stock runc shim. No cluster is involved: this checks what the page says, not a deployment."""

import os
import re
import tomllib
import unittest

import yaml

SOURCE_DIR = os.environ.get("SAFEX_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))


def blocks(lang):
    with open(os.path.join(SOURCE_DIR, "docs", "kubernetes.md")) as f:
        text = f.read()
    return re.findall(r"^```" + lang + r"\n(.*?)^```", text, re.S | re.M)


def documents():
    docs = []
    for block in blocks("yaml"):
        docs += [d for d in yaml.safe_load_all(block) if d is not None]
    return {d["kind"]: d for d in docs}


class KubernetesDocsTest(unittest.TestCase):
    def test_every_yaml_block_parses_into_objects_with_kind_and_api_version(self):
        self.assertGreaterEqual(len(blocks("yaml")), 4)
        for block in blocks("yaml"):
            for d in yaml.safe_load_all(block):
                self.assertIn("apiVersion", d)
                self.assertIn("kind", d)
                self.assertIn("name", d["metadata"])

    def test_the_runtime_class_names_the_handler_of_the_containerd_stanza(self):
        rc = documents()["RuntimeClass"]
        self.assertEqual(rc["apiVersion"], "node.k8s.io/v1")
        stanza = tomllib.loads(blocks("toml")[0])
        runtimes = stanza["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
        handler = runtimes[rc["handler"]]
        self.assertEqual(handler["runtime_type"], "io.containerd.runc.v2")
        self.assertEqual(handler["options"]["BinaryName"], "/usr/local/bin/safex-oci")
        self.assertIs(handler["options"]["SystemdCgroup"], False)
        self.assertEqual(handler["pod_annotations"], ["safex.dev/policy"])

    def test_the_job_uses_the_class_and_fails_fast_on_a_refusal(self):
        job = documents()["Job"]
        pod = job["spec"]["template"]
        self.assertEqual(pod["spec"]["runtimeClassName"], documents()["RuntimeClass"]["metadata"]["name"])
        self.assertIn("safex.dev/policy", pod["metadata"]["annotations"])
        self.assertIs(pod["spec"]["automountServiceAccountToken"], False)
        rule = job["spec"]["podFailurePolicy"]["rules"][0]
        self.assertEqual(rule["action"], "FailJob")
        self.assertIn(125, rule["onExitCodes"]["values"])
        self.assertEqual(rule["onExitCodes"]["containerName"],
                         pod["spec"]["containers"][0]["name"])

    def test_the_admission_rule_requires_the_class_in_bound_namespaces(self):
        d = documents()
        policy = d["ValidatingAdmissionPolicy"]
        binding = d["ValidatingAdmissionPolicyBinding"]
        self.assertEqual(binding["spec"]["policyName"], policy["metadata"]["name"])
        self.assertEqual(binding["spec"]["validationActions"], ["Deny"])
        self.assertIn("runtimeClassName == 'safex'", policy["spec"]["validations"][0]["expression"])

    def test_the_daemonset_installs_the_link_the_stanza_names(self):
        ds = documents()["DaemonSet"]
        spec = ds["spec"]["template"]["spec"]
        self.assertEqual(ds["spec"]["selector"]["matchLabels"],
                         ds["spec"]["template"]["metadata"]["labels"])
        script = " ".join(spec["initContainers"][0]["command"])
        self.assertIn("ln -sf safex /host/usr/local/bin/safex-oci", script)
        self.assertEqual(spec["nodeSelector"],
                         documents()["RuntimeClass"]["scheduling"]["nodeSelector"])


if __name__ == "__main__":
    unittest.main()
