"""The Helm chart: it lints, renders, installs on the real API server, and its RBAC is enough for the operator
to do its work (the operator runs here under the chart's ServiceAccount token) and no more."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kopf.testing import KopfRunner

from kaliper.controllers import metrics
from kaliper.netutil import free_port
from tests.support.controlplane import ControlPlaneError, Kubectl, build_binaries
from tests.support.groundtruth import groundtruth
from tests.support.operator_runner import Cluster
from tests.support.paths import REPO
from tests.support.serving import serving

CHART = REPO / "charts" / "kaliper"


def helm(kubectl: Kubectl, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(build_binaries("helm") / "helm"), f"--kubeconfig={kubectl.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def release(crds: Kubectl, namespace: str) -> Iterator[str]:
    """The chart installed watching every namespace (a ClusterRole); the CRDs are the session's, shared."""
    install = helm(crds, "install", "kaliper", str(CHART), "-n", namespace, "--set=crds.install=false")
    assert install.returncode == 0, install.stderr
    yield f"system:serviceaccount:{namespace}:kaliper-kaliper"
    helm(crds, "uninstall", "kaliper", "-n", namespace)


@pytest.fixture
def namespaced_release(crds: Kubectl, namespace: str) -> Iterator[str]:
    """The chart installed watching only its own namespace (a Role there, nothing elsewhere)."""
    release_name = f"k{namespace[-6:]}"  # cluster-scoped objects carry the release name: one per test
    install = helm(
        crds,
        "install",
        release_name,
        str(CHART),
        "-n",
        namespace,
        f"--set=watchNamespaces={{{namespace}}}",
        "--set=crds.install=false",
    )
    assert install.returncode == 0, install.stderr
    yield f"system:serviceaccount:{namespace}:{release_name}-kaliper"
    helm(crds, "uninstall", release_name, "-n", namespace)


def test_chart_lints_and_renders(crds: Kubectl) -> None:
    lint = helm(crds, "lint", str(CHART))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    rendered = helm(crds, "template", "kaliper", str(CHART), "--set", "watchNamespaces={ml,staging}")
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    kinds = sorted(d["kind"] for d in documents)
    assert kinds.count("CustomResourceDefinition") == 4
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"} <= set(kinds)
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    assert deployment["spec"]["strategy"]["type"] == "Recreate" and deployment["spec"]["replicas"] == 1
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][-2:] == ["--namespace=ml", "--namespace=staging"]
    # Watching two namespaces: Roles there, and cluster-wide only what has no namespace.
    # (And one in namespace default that reads the API server's Service and endpoints: the load generators'
    # NetworkPolicy lets them reach it.)
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in documents if d["kind"] == "Role"}
    assert sorted(roles) == [
        ("default", "kaliper-kaliper-api-server"),
        ("ml", "kaliper-kaliper"),
        ("staging", "kaliper-kaliper"),
    ]
    assert roles[("default", "kaliper-kaliper-api-server")]["rules"] == [
        {"apiGroups": [""], "resources": ["services"], "resourceNames": ["kubernetes"], "verbs": ["get"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
    ]
    bindings = sorted(d["metadata"]["namespace"] for d in documents if d["kind"] == "RoleBinding")
    assert bindings == ["default", "ml", "staging"]
    cluster_roles = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ClusterRole"}
    # The operator's, and the two that the built-in edit and view roles aggregate (userRoles.aggregate).
    assert sorted(cluster_roles) == ["kaliper-kaliper", "kaliper-kaliper-edit", "kaliper-kaliper-view"]
    assert {k: v for k, v in cluster_roles["kaliper-kaliper-view"]["metadata"]["labels"].items() if "rbac" in k} == {
        "rbac.authorization.k8s.io/aggregate-to-view": "true"
    }
    assert cluster_roles["kaliper-kaliper"]["rules"] == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    ]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert "PodMonitor" not in kinds  # off by default: it needs the Prometheus Operator's CRDs
    rendered = helm(crds, "template", "kaliper", str(CHART), "--set", "serverPodMonitor.enabled=true")
    (monitor,) = [d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "PodMonitor"]
    assert monitor["spec"] == {
        "namespaceSelector": {"any": True},
        "selector": {"matchLabels": {"kaliper.dev/server-metrics": "true"}},
        "podMetricsEndpoints": [{"port": "http", "path": "/metrics", "interval": "30s"}],
    }


@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        ("logLevel=verbose", "- at '/logLevel': value must be one of 'debug', 'info', 'warning', 'error'"),
        (
            "loadGenerator.antiAffinity=always",
            "- at '/loadGenerator/antiAffinity': value must be one of 'required', 'preferred', 'none'",
        ),
        ("prometheus.url=prometheus:9090", "- at '/prometheus/url': 'prometheus:9090' does not match pattern"),
        ("prometheus.scrapeInterval=30", "- at '/prometheus/scrapeInterval': got number, want string"),
        ("metrics.port=0", "- at '/metrics/port': minimum: got 0, want 1"),
        ("prometheus.ur=http://p:9090", "- at '/prometheus': additional properties 'ur' not allowed"),
    ],
)
def test_bad_values_are_refused_naming_the_value(crds: Kubectl, value: str, refusal: str) -> None:
    rendered = helm(crds, "template", "kaliper", str(CHART), "--set", value)
    assert rendered.returncode == 1
    assert refusal in rendered.stderr.splitlines()[2], rendered.stderr


def test_names_can_be_overridden_and_monitors_labelled_for_the_prometheus_that_selects_them(crds: Kubectl) -> None:
    rendered = helm(
        crds,
        "template",
        "k",
        str(CHART),
        "--set=nameOverride=perf",
        "--set=serviceMonitor.enabled=true",
        "--set=serviceMonitor.labels.release=kube-prometheus-stack",
        "--set=serverPodMonitor.enabled=true",
    )
    assert rendered.returncode == 0, rendered.stderr
    skipped = ("ClusterRole", "Pod")  # the ClusterRole for CRDs and namespaces; `helm test`'s pod
    documents = {d["kind"]: d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] not in skipped}
    assert documents["Deployment"]["metadata"]["name"] == "k-perf"
    assert documents["Deployment"]["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "perf",
        "app.kubernetes.io/instance": "k",
    }
    assert documents["Deployment"]["spec"]["template"]["spec"]["serviceAccountName"] == "k-perf"
    assert documents["ServiceMonitor"]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert "release" not in documents["PodMonitor"]["metadata"]["labels"]
    full = helm(crds, "template", "k", str(CHART), "--set=fullnameOverride=kaliper-operator")
    names = {
        d["metadata"]["name"] for d in yaml.safe_load_all(full.stdout) if d and d["kind"] != "CustomResourceDefinition"
    }
    # `helm test`'s pod, the Role (and binding) that reads the API server's endpoints in namespace default, and the
    # ClusterRoles the built-in edit and view roles aggregate.
    assert names == {
        "kaliper-operator",
        "kaliper-operator-test",
        "kaliper-operator-api-server",
        "kaliper-operator-edit",
        "kaliper-operator-view",
    }


def test_install_notes_say_what_to_run_and_what_is_missing(crds: Kubectl, namespace: str) -> None:
    # The session's CRDs were applied with kubectl: Helm refuses to adopt them without --take-ownership.
    refused = helm(crds, "install", "kaliper", str(CHART), "-n", namespace, "--dry-run=client")
    assert refused.returncode == 1
    assert 'CustomResourceDefinition "cleanups.kaliper.dev" in namespace "" exists and cannot be imported' in (
        refused.stderr
    )
    shared = "--set=crds.install=false"
    installed = helm(crds, "install", "kaliper", str(CHART), "-n", namespace, "--dry-run=client", shared)
    assert installed.returncode == 0, installed.stderr
    notes = installed.stdout.split("NOTES:\n", 1)[1]
    assert notes.startswith(f"Kaliper 0.1.0 is installed in {namespace}, watching every namespace.")
    assert "No prometheus.url is set" in notes
    url = "--set=prometheus.url=http://prometheus-operated.monitoring:9090"
    watching = helm(
        crds,
        "install",
        "kaliper",
        str(CHART),
        "-n",
        namespace,
        "--dry-run=client",
        url,
        "--set=watchNamespaces={ml}",
        shared,
    )
    notes = watching.stdout.split("NOTES:\n", 1)[1]
    assert notes.startswith(f"Kaliper 0.1.0 is installed in {namespace}, watching ml.")
    assert "prometheus.url" not in notes


def can(kubectl: Kubectl, identity: str, verb: str, resource: str, namespace: str) -> bool:
    """`kubectl auth can-i`; RESOURCE/SUB asks about a subresource (kubectl would read SUB as an object name)."""
    resource, _, subresource = resource.partition("/")
    extra = [f"--subresource={subresource}"] if subresource else []
    result = kubectl("auth", "can-i", verb, resource, *extra, "-n", namespace, f"--as={identity}", check=False)
    return result.stdout.strip() == "yes"


def test_rbac_allows_the_operators_work_and_nothing_else(crds: Kubectl, namespace: str, release: str) -> None:
    for verb, resource in [
        ("patch", "modeldeployments.kaliper.dev"),
        ("patch", "profileruns.kaliper.dev/status"),
        ("update", "profileruns.kaliper.dev/finalizers"),  # blockOwnerDeletion on what it creates
        ("create", "deployments.apps"),
        ("delete", "deployments.apps"),  # a workloadRef trial's copy, deleted with its trial
        ("delete", "services"),
        ("create", "jobs.batch"),
        ("get", "jobs.batch"),  # the optimizer's Job, read by each step of a ModelOptimization
        ("get", "pods/log"),  # the optimizer's progress line
        ("create", "configmaps"),
        ("list", "pods"),
        ("watch", "pods"),
        ("create", "events"),
        ("create", "serviceaccounts"),
        ("patch", "roles.rbac.authorization.k8s.io"),
        ("create", "rolebindings.rbac.authorization.k8s.io"),
    ]:
        assert can(crds, release, verb, resource, namespace), f"cannot {verb} {resource}"
    for verb, resource in [
        ("get", "secrets"),
        ("list", "secrets"),
        ("delete", "nodes"),
        ("create", "pods"),
        ("patch", "clusterroles.rbac.authorization.k8s.io"),
        ("delete", "namespaces"),
        ("create", "customresourcedefinitions.apiextensions.k8s.io"),
    ]:
        assert not can(crds, release, verb, resource, namespace), f"can {verb} {resource}"


def test_a_namespaces_editors_manage_kaliper_kinds_and_its_viewers_read_them(
    crds: Kubectl, namespace: str, release: str
) -> None:
    """Through the built-in edit and view ClusterRoles, which aggregate the chart's (userRoles.aggregate), bound in
    the namespace as its admin would; nothing of it in another namespace."""
    crds("create", "rolebinding", "alice-edits", "--clusterrole=edit", "--user=alice", "-n", namespace)
    crds("create", "rolebinding", "bob-views", "--clusterrole=view", "--user=bob", "-n", namespace)
    crds.wait_for(lambda: can(crds, "alice", "create", "profileruns.kaliper.dev", namespace), 30, "aggregation")
    for verb in ("create", "patch", "delete", "deletecollection"):
        for kind in ("profileruns", "modeldeployments", "modeloptimizations", "cleanups"):
            assert can(crds, "alice", verb, f"{kind}.kaliper.dev", namespace), f"alice cannot {verb} {kind}"
    assert can(crds, "alice", "get", "profileruns.kaliper.dev/status", namespace)
    assert not can(crds, "alice", "patch", "profileruns.kaliper.dev/status", namespace)  # the operator's
    assert not can(crds, "alice", "create", "profileruns.kaliper.dev", "default")
    crds.wait_for(lambda: can(crds, "bob", "list", "cleanups.kaliper.dev", namespace), 30, "aggregation")
    for verb in ("get", "list", "watch"):
        assert can(crds, "bob", verb, "modeldeployments.kaliper.dev", namespace), f"bob cannot {verb}"
    assert can(crds, "bob", "get", "modeloptimizations.kaliper.dev/status", namespace)
    for verb in ("create", "patch", "delete"):
        assert not can(crds, "bob", verb, "profileruns.kaliper.dev", namespace), f"bob can {verb}"
    # Kubernetes' own rules for the user, as kubectl describes them: the kinds came through the edit role.
    rules = crds("auth", "can-i", "--list", "-n", namespace, "--as=alice").stdout
    assert (
        "profileruns.kaliper.dev " in rules and "[get list watch create update patch delete deletecollection]" in rules
    )


def test_a_release_without_user_roles_grants_namespace_editors_nothing_of_kaliper(
    crds: Kubectl, namespace: str
) -> None:
    release_name = f"u{namespace[-6:]}"
    install = helm(crds, "install", release_name, str(CHART), "-n", namespace, "--set=crds.install=false",
                   "--set=userRoles.aggregate=false")  # fmt: skip
    assert install.returncode == 0, install.stderr
    try:
        crds("create", "rolebinding", "carol-edits", "--clusterrole=edit", "--user=carol", "-n", namespace)
        crds.wait_for(lambda: can(crds, "carol", "create", "configmaps", namespace), 30, "the binding")
        assert not can(crds, "carol", "create", "profileruns.kaliper.dev", namespace)
        assert not can(crds, "carol", "get", "profileruns.kaliper.dev", namespace)
    finally:
        helm(crds, "uninstall", release_name, "-n", namespace)


PROFILE_RUN = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ProfileRun",
    "metadata": {"name": "rbac"},
    "spec": {
        "target": {"deploymentRef": {"name": "rbac"}},
        "payload": {"inline": "{}"},
        "load": {"closedLoop": {"concurrency": 1}, "warmup": "0s", "minDuration": "1s", "maxDuration": "1s"},
    },
}


def test_rbac_watching_one_namespace_grants_nothing_elsewhere(
    crds: Kubectl, namespace: str, namespaced_release: str
) -> None:
    crds.wait_for(lambda: can(crds, namespaced_release, "create", "jobs.batch", namespace), timeout=30, what="RBAC")
    for verb, resource in [("create", "jobs.batch"), ("create", "deployments.apps"), ("create", "configmaps")]:
        assert can(crds, namespaced_release, verb, resource, namespace), f"cannot {verb} {resource} in {namespace}"
        assert not can(crds, namespaced_release, verb, resource, "default"), f"can {verb} {resource} in default"


def test_the_operator_does_its_work_under_the_charts_identity(
    crds: Kubectl, namespace: str, namespaced_release: str, tmp_path: Path
) -> None:
    release = namespaced_release
    # RBAC bindings take effect within a moment of being created: start once they have.
    crds.wait_for(
        lambda: (
            can(crds, release, "watch", "modeldeployments.kaliper.dev", namespace)
            and can(crds, release, "patch", "deployments.apps", namespace)
        ),
        timeout=30,
        what="RBAC",
    )
    kubeconfig = crds.token_kubeconfig(release.rsplit(":", 1)[1], namespace, tmp_path / "operator.kubeconfig")
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(kubeconfig)
    metrics_port = free_port()
    # The counters live in this process, where other tests may have run operators before this one.
    succeeded_before = metrics.TRIALS.labels("Succeeded")._value.get()
    runs_before = metrics.FINISHED.labels("ProfileRun", "Succeeded")._value.get()
    os.environ["KALIPER_METRICS_PORT"] = str(metrics_port)
    from kaliper.controllers import kube

    kube.api_client.cache_clear()
    cluster = Cluster(crds, namespace, "rbac")
    try:
        with (
            groundtruth("-median", "2ms") as target,
            KopfRunner(
                ["run", "--standalone", f"--namespace={namespace}", "-m", "kaliper.controllers.main"], timeout=60
            ) as runner,
        ):
            manifest = {
                "apiVersion": "kaliper.dev/v1alpha1",
                "kind": "ModelDeployment",
                "metadata": {"name": "rbac"},
                "spec": {"model": {"configMap": {"name": "m", "key": "model.onnx"}}},
            }
            crds("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
            crds.wait_for_phase("modeldeployment", "rbac", namespace, "Ready", timeout=90)  # under the chart's RBAC
            # A ProfileRun: the operator creates the load generator's identity, which may write its results
            # (the stand-in runs under that identity's token) and nothing else.
            crds("apply", "-n", namespace, "-f", "-", input=json.dumps(PROFILE_RUN))
            cluster.wait_trial(0, "Running")
            loadgen = f"system:serviceaccount:{namespace}:rbac-loadgen"  # the run's own identity
            assert can(crds, loadgen, "create", "configmaps", namespace)
            for verb, resource in [
                ("get", "secrets"),
                ("delete", "configmaps"),
                ("get", "configmaps"),
                ("list", "pods"),
                ("watch", "pods"),
            ]:
                assert not can(crds, loadgen, verb, resource, namespace), f"the load generator can {verb} {resource}"
            as_loadgen = crds.token_kubeconfig("rbac-loadgen", namespace, tmp_path / "loadgen.kubeconfig")
            played = cluster.play_load(0, target, kubeconfig=as_loadgen)
            assert played.returncode == 0, played.stderr
            assert cluster.wait_phase("Succeeded")["trials"][0]["requests"] > 0
            # The operator's own metrics endpoint counts its work.
            scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
            samples = {
                line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in scraped.splitlines()
                if line and not line.startswith("#")
            }
            for kind in ("ProfileRun", "ModelDeployment"):  # every kind's steps, counted and timed
                assert samples[f'kaliper_reconciles_total{{kind="{kind}"}}'] > 0
                assert samples[f'kaliper_reconcile_seconds_count{{kind="{kind}"}}'] > 0
            assert samples['kaliper_trials_total{outcome="Succeeded"}'] == succeeded_before + 1
            assert samples['kaliper_finished_total{kind="ProfileRun",phase="Succeeded"}'] == runs_before + 1
            # What the watch streams show now: this run Succeeded, and its target Ready.
            assert samples['kaliper_objects{kind="ProfileRun",phase="Succeeded"}'] >= 1
            assert samples['kaliper_objects{kind="ModelDeployment",phase="Ready"}'] >= 1
            # The identity is the run's: it goes with the run.
            crds("delete", "profilerun", "rbac", "-n", namespace)
            crds.wait_for(
                lambda: all(
                    crds("get", kind, "rbac-loadgen", "-n", namespace, check=False).returncode != 0
                    for kind in ("serviceaccount", "role", "rolebinding")
                ),
                timeout=60,
                what="the load generator's identity to go with its run",
            )
            crds("delete", "modeldeployment", "rbac", "-n", namespace)
        assert runner.exception is None
        forbidden = [line for line in runner.output.splitlines() if "Forbidden" in line or "403 Forbidden" in line]
        assert forbidden == [], forbidden
    finally:
        os.environ.pop("KALIPER_METRICS_PORT")
        if previous is None:
            os.environ.pop("KUBECONFIG")
        else:
            os.environ["KUBECONFIG"] = previous
        kube.api_client.cache_clear()


def earlier_chart(directory: Path) -> Path:
    """The chart as an earlier version shipped it: version 0.0.9, its ProfileRun CRD without failIfNotMet."""
    earlier = directory / "kaliper"
    shutil.copytree(CHART, earlier)
    chart_file = earlier / "Chart.yaml"
    chart_file.write_text(yaml.safe_dump(yaml.safe_load(chart_file.read_text()) | {"version": "0.0.9"}))
    crd_file = earlier / "files" / "crds" / "kaliper.dev_profileruns.yaml"
    crd = yaml.safe_load(crd_file.read_text())
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec_schema["properties"]["failIfNotMet"]
    crd_file.write_text(yaml.safe_dump(crd))
    return earlier


def stored_gate(crds: Kubectl, namespace: str, name: str, *validate: str) -> object:
    """Apply a ProfileRun that sets failIfNotMet; what the API server stored of that field."""
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": name},
        "spec": {
            "target": {"url": "http://127.0.0.1:9/"},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
            "failIfNotMet": True,
        },
    }
    crds("apply", "-n", namespace, *validate, "-f", "-", input=json.dumps(run))
    return crds.json("get", "profilerun", name, "-n", namespace)["spec"].get("failIfNotMet")


def crd_knows_fail_if_not_met(crds: Kubectl) -> bool:
    """Whether the ProfileRun CRD the API server holds has the spec field (not just a description naming it)."""
    versions = crds.json("get", "crd", "profileruns.kaliper.dev")["spec"]["versions"]
    return any("failIfNotMet" in v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] for v in versions)


def test_helm_upgrade_upgrades_the_crds_and_a_field_they_gained_survives(
    crds: Kubectl, namespace: str, tmp_path: Path
) -> None:
    earlier = earlier_chart(tmp_path)
    release = f"u{namespace[-6:]}"
    try:
        # The session's CRDs (applied with kubectl) become the release's: Helm takes them over.
        installed = helm(crds, "install", release, str(earlier), "-n", namespace, "--take-ownership")
        assert installed.returncode == 0, installed.stderr
        # The earlier schema refuses the field it does not know (kubectl's strict validation), or prunes it
        # silently (a client that does not ask for validation).
        with pytest.raises(ControlPlaneError, match=r'unknown field "spec\.failIfNotMet"'):
            stored_gate(crds, namespace, "gate")
        assert stored_gate(crds, namespace, "gate", "--validate=false") is None
        upgraded = helm(crds, "upgrade", release, str(CHART), "-n", namespace)
        assert upgraded.returncode == 0, upgraded.stderr
        crds.wait_for(lambda: crd_knows_fail_if_not_met(crds), what="the upgraded CRD")
        assert stored_gate(crds, namespace, "gate-v2") is True  # a new name: a ProfileRun's spec cannot change
        # Uninstalling the release keeps the CRDs, and every run with them.
        assert helm(crds, "uninstall", release, "-n", namespace).returncode == 0
        assert crds("get", "profilerun", "gate", "-n", namespace, check=False).returncode == 0
    finally:  # whatever happened, the session's CRDs as the other tests expect them
        helm(crds, "uninstall", release, "-n", namespace)
        crds("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))


def test_helm_uninstall_and_the_documented_step_leave_nothing(crds: Kubectl, namespace: str) -> None:
    """docs/how-to/upgrade.md's uninstall: `helm uninstall` keeps the CRDs and the runs; deleting the CRDs by their
    label takes every Kaliper object and, through the garbage collector, what they own."""
    release = f"x{namespace[-6:]}"
    try:
        installed = helm(crds, "install", release, str(CHART), "-n", namespace, "--take-ownership")
        assert installed.returncode == 0, installed.stderr
        stored_gate(crds, namespace, "kept")
        run_uid = crds.json("get", "profilerun", "kept", "-n", namespace)["metadata"]["uid"]
        owner = {"apiVersion": "kaliper.dev/v1alpha1", "kind": "ProfileRun", "name": "kept", "uid": run_uid}
        report = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"report.json": "{}"},
                  "metadata": {"name": "kept-report", "ownerReferences": [owner]}}  # fmt: skip
        crds("apply", "-n", namespace, "-f", "-", input=json.dumps(report))
        assert helm(crds, "uninstall", release, "-n", namespace).returncode == 0
        assert crds("get", "profilerun", "kept", "-n", namespace, check=False).returncode == 0  # kept
        left = crds("get", "clusterroles,clusterrolebindings,roles,rolebindings", "-A", "-o", "name",
                    "-l", f"app.kubernetes.io/instance={release}").stdout  # fmt: skip
        assert left == ""
        crds("delete", "crd", "-l", "app.kubernetes.io/part-of=kaliper", "--timeout=60s")
        assert crds("get", "crd", "-l", "app.kubernetes.io/part-of=kaliper", "-o", "name").stdout == ""
        crds.wait_for(
            lambda: crds("get", "configmap", "kept-report", "-n", namespace, check=False).returncode != 0,
            what="the garbage collector to delete the report its run owned",
        )
    finally:  # whatever happened, the session's CRDs as the other tests expect them
        helm(crds, "uninstall", release, "-n", namespace)
        crds("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
        crds("wait", "--for=condition=Established", "crd", "-l", "app.kubernetes.io/part-of=kaliper")


# --- the same upgrade through Flux ------------------------------------------------------------------


@contextlib.contextmanager
def _serve_directory(directory: Path) -> Iterator[str]:
    """The files of a directory over HTTP on loopback, as source-controller serves its artifacts."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield url


def _publish(crds: Kubectl, namespace: str, name: str, tarball: Path, base_url: str) -> None:
    """Point the ExternalArtifact at a packaged chart, as a producer of artifacts does (its status)."""
    digest = "sha256:" + hashlib.sha256(tarball.read_bytes()).hexdigest()
    artifact = {
        "path": tarball.name,
        "url": f"{base_url}/{tarball.name}",
        "revision": digest,
        "digest": digest,
        "size": tarball.stat().st_size,
        "lastUpdateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    patch = json.dumps({"status": {"artifact": artifact}})
    crds("patch", "externalartifact", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", patch)


def _release_state(crds: Kubectl, namespace: str, name: str) -> tuple[str, str]:
    """(Ready condition's status, the chart version of the latest release in the HelmRelease's history)."""
    status = crds.json("get", "helmrelease", name, "-n", namespace).get("status", {})
    ready = next((c["status"] for c in status.get("conditions", []) if c["type"] == "Ready"), "")
    history = status.get("history") or [{}]
    return ready, history[0].get("chartVersion", "")


@contextlib.contextmanager
def _helm_controller(crds: Kubectl, namespace: str, log: Path) -> Iterator[subprocess.Popen]:
    """Flux's helm-controller, watching only this namespace, taking charts from ExternalArtifacts."""
    process = subprocess.Popen(
        [
            str(build_binaries("helm-controller") / "helm-controller"),
            "--watch-all-namespaces=false",  # only RUNTIME_NAMESPACE
            "--feature-gates=ExternalArtifact=true",
            "--metrics-addr=0",
            f"--health-addr=127.0.0.1:{free_port()}",
            "--concurrent=1",
        ],
        env={**os.environ, "KUBECONFIG": str(crds.kubeconfig), "RUNTIME_NAMESPACE": namespace},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_flux_helmrelease_upgrades_the_crds_and_a_field_they_gained_survives(
    crds: Kubectl, namespace: str, tmp_path: Path
) -> None:
    """Flux's own helm-controller installs the earlier chart and upgrades it to this one: the CRDs are templates,
    so Flux upgrades them like the rest of the release (it applies a chart's crds/ folder only as its crds
    policy says)."""
    flux_crds = sorted((build_binaries("helm-controller") / "helm-controller").resolve().parent.glob("*.yaml"))
    charts = tmp_path / "charts"
    for chart in (earlier_chart(tmp_path), CHART):
        packaged = helm(crds, "package", str(chart), "-d", str(charts))
        assert packaged.returncode == 0, packaged.stderr
    earlier, current = sorted(charts.glob("*.tgz"))
    assert (earlier.name, current.name) == ("kaliper-0.0.9.tgz", "kaliper-0.1.0.tgz")
    for path in flux_crds:
        crds("apply", "--server-side", "-f", str(path))
    for path in flux_crds:
        crds("wait", "--for=condition=Established", "--timeout=60s", "-f", str(path))
    log = tmp_path / "helm-controller.log"
    helm_release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "kaliper"},
        "spec": {
            "interval": "10m",
            "releaseName": f"f{namespace[-6:]}",
            "chartRef": {"kind": "ExternalArtifact", "name": "kaliper-chart"},
            # This tier has no kubelet: the operator's pod never starts, so nothing waits for it.
            "install": {"disableWait": True},
            "upgrade": {"disableWait": True},
        },
    }
    artifact = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "ExternalArtifact",
        "metadata": {"name": "kaliper-chart"},
        "spec": {},
    }
    try:
        with _serve_directory(charts) as base_url, _helm_controller(crds, namespace, log) as controller:

            def released(version: str) -> bool:
                assert controller.poll() is None, log.read_text()[-4000:]
                ready, chart_version = _release_state(crds, namespace, "kaliper")
                return ready == "True" and chart_version.split("+")[0] == version

            try:
                crds("apply", "-n", namespace, "-f", "-", input=json.dumps(artifact))
                _publish(crds, namespace, "kaliper-chart", earlier, base_url)
                crds("apply", "-n", namespace, "-f", "-", input=json.dumps(helm_release))
                crds.wait_for(lambda: released("0.0.9"), timeout=120, what="Flux installing chart 0.0.9")
                # The session's CRDs became the release's, at the earlier version: the field is refused.
                assert not crd_knows_fail_if_not_met(crds)
                with pytest.raises(ControlPlaneError, match=r'unknown field "spec\.failIfNotMet"'):
                    stored_gate(crds, namespace, "flux-gate")

                _publish(crds, namespace, "kaliper-chart", current, base_url)
                crds.wait_for(lambda: released("0.1.0"), timeout=120, what="Flux upgrading to chart 0.1.0")
                assert crd_knows_fail_if_not_met(crds)
                assert stored_gate(crds, namespace, "flux-gate") is True
                # Deleting the HelmRelease uninstalls the release; the CRDs stay, and every run with them.
                crds("delete", "helmrelease", "kaliper", "-n", namespace, "--timeout=60s")
                assert crds("get", "profilerun", "flux-gate", "-n", namespace, check=False).returncode == 0
            finally:  # while the controller runs: it removes its finalizer
                crds(
                    "delete",
                    "helmrelease",
                    "kaliper",
                    "-n",
                    namespace,
                    "--ignore-not-found",
                    "--timeout=60s",
                    check=False,
                )
    finally:  # the session's CRDs as the other tests expect them, and no Flux CRDs
        for path in flux_crds:
            crds("delete", "-f", str(path), "--ignore-not-found", "--wait=false", check=False)
        crds("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
