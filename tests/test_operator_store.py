"""The operator's store of watched objects: newer versions win, deletions stick, runs' children by run."""

from __future__ import annotations

from kaliper.controllers.store import Store

RUN = "kaliper.dev/profilerun"


def obj(name: str, version: int, run: str | None = None, **extra: object) -> dict:
    labels = {RUN: run} if run else {}
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": str(version), "labels": labels}, **extra}


def test_a_late_event_of_an_older_version_does_not_undo_a_newer_write() -> None:
    store = Store(group_label=RUN)
    store.seen("Job", obj("j", 12, status={"active": 0}))  # the operator's own write, returned by the API
    store.seen("Job", obj("j", 11, status={"active": 1}))  # the watch event of the version before it
    assert store.get("Job", "ns", "j")["status"] == {"active": 0}
    store.seen("Job", obj("j", 13, status={"succeeded": 1}))
    assert store.get("Job", "ns", "j")["status"] == {"succeeded": 1}


def test_a_deleted_object_does_not_come_back_from_an_older_copy() -> None:
    store = Store(group_label=RUN)
    store.seen("Pod", obj("p", 5, run="r"))
    store.seen("Pod", obj("p", 7, run="r"), deleted=True)
    store.seen("Pod", obj("p", 6, run="r"))  # a listing taken before the deletion
    assert store.get("Pod", "ns", "p") is None
    assert store.group("Pod", "ns", "r") == []
    store.seen("Pod", obj("p", 9, run="r"))  # created again under the same name
    assert store.get("Pod", "ns", "p")["metadata"]["resourceVersion"] == "9"


def test_objects_are_grouped_by_run_and_a_relabelled_object_moves() -> None:
    store = Store(group_label=RUN)
    store.seen("Job", obj("a-t0-lg", 1, run="a"))
    store.seen("Job", obj("a-t1-lg", 2, run="a"))
    store.seen("Job", obj("b-t0-lg", 3, run="b"))
    store.seen("Pod", obj("a-t0-x", 4, run="a"))
    store.seen("Job", obj("plain", 5))
    assert [j["metadata"]["name"] for j in store.group("Job", "ns", "a")] == ["a-t0-lg", "a-t1-lg"]
    store.seen("Job", obj("a-t1-lg", 6, run="b"))
    assert [j["metadata"]["name"] for j in store.group("Job", "ns", "a")] == ["a-t0-lg"]
    assert [j["metadata"]["name"] for j in store.group("Job", "ns", "b")] == ["a-t1-lg", "b-t0-lg"]
    store.drop_group("ns", "a")
    assert store.group("Job", "ns", "a") == [] and store.group("Pod", "ns", "a") == []
    assert store.get("Job", "ns", "plain") is not None and len(store.group("Job", "ns", "b")) == 2


def test_what_a_caller_gets_is_a_copy() -> None:
    store = Store(group_label=RUN)
    store.seen("ProfileRun", obj("r", 1, status={"phase": "Running"}))
    store.get("ProfileRun", "ns", "r")["status"]["phase"] = "Failed"
    assert store.get("ProfileRun", "ns", "r")["status"] == {"phase": "Running"}


def test_priming_lists_once_per_kind_and_namespace() -> None:
    store = Store(group_label=RUN)
    calls: list[str] = []

    def listing() -> list[dict]:
        calls.append("list")
        return [obj("a-t0", 3, run="a")]

    store.prime("ModelDeployment", "ns", listing)
    store.prime("ModelDeployment", "ns", listing)
    assert calls == ["list"]
    assert [d["metadata"]["name"] for d in store.group("ModelDeployment", "ns", "a")] == ["a-t0"]
    store.clear()
    store.prime("ModelDeployment", "ns", listing)
    assert calls == ["list", "list"]


def test_the_store_keeps_what_the_operator_reads_and_not_managed_fields_or_pod_and_job_specs() -> None:
    store = Store(group_label=RUN)
    managed = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {"f:phase": {}}}}]
    pod = obj("p", 3, run="r", spec={"containers": [{"name": "locust"}]}, status={"phase": "Running"})
    pod["metadata"]["managedFields"] = managed
    store.seen("Pod", pod)
    run = obj("r", 4, spec={"sweep": {"cpu": ["1"]}}, status={"phase": "Running", "trials": [{"index": 0}]})
    run["metadata"]["managedFields"] = managed
    store.seen("ProfileRun", run)
    assert store.group("Pod", "ns", "r") == [
        {
            "metadata": {"namespace": "ns", "name": "p", "resourceVersion": "3", "labels": {RUN: "r"}},
            "status": {"phase": "Running"},
        }
    ]
    assert store.get("ProfileRun", "ns", "r") == {
        "metadata": {"namespace": "ns", "name": "r", "resourceVersion": "4", "labels": {}},
        "spec": {"sweep": {"cpu": ["1"]}},
        "status": {"phase": "Running", "trials": [{"index": 0}]},
    }
    assert pod["metadata"]["managedFields"] == managed  # the caller's object is left as it was
