"""The package's layers, read from its imports: no module imports one of a higher layer, and no circle of
imports exists, between modules or between packages. docs/architecture.md draws these layers and says
where each kind of change goes."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import get_args

from kaliper.api.modeldeployment import RuntimeType
from kaliper.api.profilerun.vocabulary import Protocol

PACKAGE = Path(__file__).resolve().parent.parent / "operator" / "kaliper"

# Lowest first. A module may import from its own layer's packages (without a circle) and from lower layers.
LAYERS: list[set[str]] = [
    {
        "__init__",
        "log",
        "netutil",
        "destination",
        "processes",
        "pareto",
        "jsonlines",
        "measure",
        "api",
    },  # leaves and the API's models
    {"report", "serving", "lifecycle", "runtimes"},  # report schemas and rendering, the model server, cleanup
    # decisions, the serving runtimes (what each server is and how it starts)
    {"loadgen", "manifests"},  # the load generator, pure builders of Kubernetes objects
    {"profiling", "metrics"},  # the decisions of a ProfileRun, metric queries and samplers
    {"local", "optimize"},  # `kaliper run`, the ModelOptimization engine
    {"controllers"},  # kopf handlers
    {"cli"},  # the command line
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at the top or inside a function)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    found: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([node.module] if node.module else [])])
                # `from kaliper.x import y` imports the module kaliper.x.y when there is one, else kaliper.x
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            found[name] |= {t for t in targets if t in modules and t != name}
    return {name: found[name] for name in modules}


def component(module: str) -> str:
    """kaliper.report.schema -> report; kaliper -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if component(module) in layer)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_package_has_a_layer() -> None:
    placed = set().union(*LAYERS)
    assert sorted({component(m) for m in imports()} - placed) == []


def test_no_module_imports_a_higher_layer() -> None:
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in imports().items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )
    assert upward == []


def test_no_circle_of_imports_between_modules_or_packages() -> None:
    graph = imports()
    assert circles(graph) == []
    packages: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        packages[component(module)] |= {component(t) for t in targets} - {component(module)}
    assert circles(packages) == []


def test_the_checks_see_a_circle_and_its_members() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    assert component("kaliper.report.schema") == "report" and layer_of("kaliper.cli") == len(LAYERS) - 1


def test_no_class_over_250_lines_and_the_profilerun_controller_under_350() -> None:
    # A newcomer reads a class in one sitting; the ProfileRun controller carries out actions and decides
    # nothing that a pure module (trial_moves, schedule, decisions) could.
    long_classes = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 250:
                long_classes.append(f"{module_name(path)}.{node.name}")
    assert long_classes == []
    assert len((PACKAGE / "controllers" / "profilerun.py").read_text().splitlines()) < 350


# The report's modules that write words or pages; the decisions (profiling) return data with their reasons, and
# these print what the data says.
RENDERERS = {
    f"kaliper.report.{name}"
    for name in ("comparison_text", "optimization_html", "optimization_plots", "optimization_terminal",
                 "optimization_text", "page", "profile_answer", "profile_html", "profile_plots", "profile_terminal",
                 "profile_text", "ramp_text", "replay_text", "token_text")
}  # fmt: skip


def test_no_decision_module_imports_a_renderer() -> None:
    assert set(imports()) >= RENDERERS  # every name above is a module
    found = sorted(
        f"{m} imports {t}" for m, ts in imports().items() if component(m) == "profiling" for t in ts & RENDERERS
    )
    assert found == []


def test_both_executors_carry_out_the_same_run_plan_and_decide_nothing_of_it() -> None:
    """`kaliper run` and the operator's step call the plan (profiling.run_plan) for admission, what to run next,
    a trial's end and the conclusion, and import none of the search, the schedule or the tie-break."""
    calls = {"admit", "listed", "next", "ended", "conclusion"}
    deciders = {"kaliper.profiling.schedule", "kaliper.profiling.search", "kaliper.profiling.tiebreak"}
    for executor in ("kaliper.local.executor", "kaliper.controllers.profilerun"):
        tree = ast.parse((PACKAGE.parent / (executor.replace(".", "/") + ".py")).read_text())
        called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert calls - called == set(), executor
        imported = {
            f"{n.module}.{a.name}"
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module
            for a in n.names
        }
        uses = sorted(name for name in imported if name.rpartition(".")[0] in deciders)
        assert uses == ["kaliper.profiling.schedule.PlannedTrial"], executor  # the type of a trial to start


def test_no_two_classes_share_a_name() -> None:
    """A type's name says one thing: two `Window`s or two `Outcome`s in one package make a reader (and an import)
    guess which is meant."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(module_name(path))
    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}


def test_a_test_module_imports_no_other_test_module() -> None:
    # Shared helpers live in tests/support; fixtures in a conftest.py, which pytest hands over by name.
    tests = Path(__file__).resolve().parent
    borrowed = []
    for path in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                last = node.module.rpartition(".")[2]
                if node.module.startswith("tests.") and (last.startswith("test_") or last == "conftest"):
                    borrowed.append(f"{path.relative_to(tests)}: {node.module}")
    assert borrowed == []


def _string_constants(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _branches_on(path: Path, names: set[str], attributes: set[str] = frozenset()) -> list[str]:
    """Lines of a module whose if, conditional expression or comparison tests one of `names` (string
    constants) or reads one of `attributes`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        tests = [node.test] if isinstance(node, ast.If | ast.IfExp | ast.While) else []
        tests += [node] if isinstance(node, ast.Compare) else []
        for test in tests:
            read = {n.attr for n in ast.walk(test) if isinstance(n, ast.Attribute)}
            if _string_constants(test) & names or read & attributes:
                found.append(f"{path.name}:{test.lineno}")
    return sorted(set(found))


def test_no_module_asks_for_a_runtime_by_name_outside_runtimes_and_the_api() -> None:
    # A runtime is asked what it does (kaliper.runtimes); only the API's own rules name runtimes.
    runtimes = set(get_args(RuntimeType))  # a runtime added to the API is guarded without a change here
    outside = [p for p in PACKAGE.rglob("*.py") if component(module_name(p)) not in ("runtimes", "api")]
    assert [line for path in outside for line in _branches_on(path, runtimes)] == []


def test_the_load_generators_stages_and_runners_never_branch_on_the_protocol() -> None:
    # The protocol's user class is chosen once (kaliper.loadgen.users); the rest never asks which it is.
    protocols = set(get_args(Protocol))
    modules = ("controller", "topology", "generator", "pacing", "recorder", "stopping", "results")
    paths = [PACKAGE / "loadgen" / f"{name}.py" for name in modules]
    assert [line for p in paths for line in _branches_on(p, protocols, {"grpc", "streaming", "protocol"})] == []


def test_the_branch_finder_sees_a_branch_on_a_name_and_on_an_attribute(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('if spec.type == "vllm":\n    pass\nx = 1 if config.grpc else 2\ny = config.grpc\n')
    found = _branches_on(module, {"vllm"}, {"grpc"})
    assert [line.rpartition(":")[2] for line in found] == ["1", "3"]


def test_every_protocol_the_api_accepts_has_its_user_class() -> None:
    names = sorted(get_args(Protocol))
    assert names == ["http-json", "oip-v2", "oip-v2-grpc", "openai-chat", "openai-completions"]
    # Read in a process of its own: importing the user classes imports Locust, which monkey-patches this one.
    listed = subprocess.run(
        [sys.executable, "-c", "from kaliper.loadgen.users import USER_CLASSES; print(' '.join(sorted(USER_CLASSES)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.split() == names
