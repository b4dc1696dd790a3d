"""The committed CRDs are exactly what the models generate, and they are well-formed structural schemas."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaliper.api.argocd import argocd_patch_stale
from kaliper.api.crd import crd_files, custom_resource_definition, stale_crds, write_crds
from kaliper.api.resources import KINDS, KindInfo

REPO = Path(__file__).resolve().parents[1]
CRD_DIRS = [REPO / "crds", REPO / "charts" / "kaliper" / "files" / "crds"]


def test_committed_crds_match_the_models() -> None:
    stale = stale_crds(CRD_DIRS)
    assert not stale, f"regenerate with `kaliper crds generate`: {[str(p) for p in stale]}"


def test_the_charts_argocd_patch_carries_its_health_checks() -> None:
    # charts/kaliper/argocd/argocd-cm.yaml holds exactly the health.lua files beside it.
    assert not argocd_patch_stale(REPO / "charts" / "kaliper" / "argocd"), "regenerate with `kaliper crds generate`"


def test_drift_is_detected(tmp_path: Path) -> None:
    write_crds([tmp_path])
    assert stale_crds([tmp_path]) == []
    victim = tmp_path / "kaliper.dev_profileruns.yaml"
    victim.write_text(victim.read_text().replace("Trials completed of total.", "edited by hand"))
    (tmp_path / "kaliper.dev_leftovers.yaml").write_text("old")
    assert {p.name for p in stale_crds([tmp_path])} == {victim.name, "kaliper.dev_leftovers.yaml"}


def walk(node: dict[str, Any], path: str = ""):  # type: ignore[no-untyped-def]
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


# What `kubectl get` shows first: the phase, except for a ModelDeployment, whose runtime leads.
FIRST_COLUMN = {
    "Cleanup": ("Phase", ".status.phase"),
    "ModelDeployment": ("Runtime", ".spec.runtime.type"),
    "ModelOptimization": ("Phase", ".status.phase"),
    "ProfileRun": ("Phase", ".status.phase"),
}


@pytest.mark.parametrize("info", KINDS, ids=lambda k: k.kind)
def test_crd_is_structural_and_documented(info: KindInfo) -> None:
    crd = yaml.safe_load(crd_files()[f"kaliper.dev_{info.plural}.yaml"])
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns[0] == FIRST_COLUMN[info.kind]
    assert columns[-1] == ("Age", ".metadata.creationTimestamp")
    assert crd["spec"]["names"]["shortNames"] and crd["spec"]["names"]["categories"] == ["kaliper"]

    schema = version["schema"]["openAPIV3Schema"]
    for path, node in walk(schema):
        assert "$ref" not in node and "allOf" not in node and "oneOf" not in node, path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string"), f"{path}: anyOf outside int-or-string"
        else:
            assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
    for path, node in walk(schema):
        if path.endswith("{}") or path.endswith("[]") or path == ".metadata":
            continue
        assert node.get("description"), f"{info.kind}{path} has no description"


def test_rule_field_paths_point_at_real_fields() -> None:
    """A CEL fieldPath that names no field would be refused by the API server when the rule fires."""
    for info in KINDS:
        schema = custom_resource_definition(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for path, node in walk(schema):
            for rule in node.get("x-kubernetes-validations", []):
                target = node
                for part in filter(None, rule.get("fieldPath", "").split(".")):
                    assert part in target.get("properties", {}), f"{info.kind}{path}: bad fieldPath {rule['fieldPath']}"
                    target = target["properties"][part]


def unguarded_reads(rule: str, schema: dict[str, Any]) -> list[str]:
    """The optional objects a CEL rule reaches into without first asking has() of them.

    The API server answers such a read with "no such key" instead of the rule's message, and refuses
    every object that leaves the field out.
    """
    missing = []
    for match in re.finditer(r"(has\()?self((?:\.\w+)+)", rule):
        parts = match.group(2).lstrip(".").split(".")
        node = schema
        # Inside has() the last field may be absent; outside it, every field read must be there.
        reached = parts[:-1] if match.group(1) else parts
        for depth, part in enumerate(reached):
            if part not in node.get("properties", {}):
                break
            prefix = "self." + ".".join(parts[: depth + 1])
            always_there = part in node.get("required", []) or prefix == "self.metadata"
            if not always_there and f"has({prefix})" not in rule:
                missing.append(prefix)
            node = node["properties"][part]
    return missing


def test_rules_ask_has_before_reading_into_an_optional_object() -> None:
    for info in KINDS:
        schema = custom_resource_definition(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for path, node in walk(schema):
            for rule in node.get("x-kubernetes-validations", []):
                assert not unguarded_reads(rule["rule"], node), f"{info.kind}{path}: {rule['rule']}"


def test_an_unguarded_read_is_found() -> None:
    schema = {"properties": {"a": {"properties": {"b": {"properties": {"c": {}}}}}, "d": {}}, "required": ["d"]}
    assert unguarded_reads("!has(self.a.b) || self.d == 1", schema) == ["self.a"]
    assert unguarded_reads("!has(self.a) || !has(self.a.b) || !has(self.a.b.c) || self.a.b.c == 1", schema) == []
    assert unguarded_reads("has(self.a) && self.a.b.c == 1", schema) == ["self.a.b", "self.a.b.c"]


def test_defaults_are_documented_not_applied_by_the_server() -> None:
    """Defaults live in the models only, so the server and the models can never disagree about them."""
    schema = custom_resource_definition(KINDS[2])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    warmup = schema["properties"]["spec"]["properties"]["load"]["properties"]["warmup"]
    assert "default" not in warmup
    assert warmup["description"].endswith("Default: 10s.")
