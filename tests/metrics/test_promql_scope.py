"""A namespace's PromQL confined to its namespace on the parsed query (kaliper.metrics.promql_scope): the
matcher added to every selector, other namespaces refused unless allowed, and nothing the rewritten text could
read differently sent at all."""

from __future__ import annotations

import promql_parser
import pytest

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.metrics.prometheus import QueryWindow, container_queries, gpu_queries
from kaliper.metrics.promql_scope import QueryRefused, QueryScope, terms
from kaliper.metrics.written_queries import written_queries_problem

TEAM_A = QueryScope("team-a")
RUN_A = QueryScope("a")


def test_every_selector_gets_the_runs_namespace_wherever_it_sits() -> None:
    assert TEAM_A.confine("up") == 'up{namespace="team-a"}'
    assert TEAM_A.confine(
        'histogram_quantile(0.9, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{model_name="m"}[1m])))'
    ) == (
        "histogram_quantile(0.9, sum by (le)(rate(vllm:e2e_request_latency_seconds_bucket"
        '{model_name="m",namespace="team-a"}[1m])))'
    )
    # A subquery, an offset, the other side of an operator, a selector by name alone, a comment.
    assert TEAM_A.confine("avg_over_time((sum(foo))[30s:5s]) / bar offset 5m # a comment") == (
        'avg_over_time((sum(foo{namespace="team-a"}))[30s:5s]) / bar{namespace="team-a"} offset 5m'
    )
    assert TEAM_A.confine('count({__name__=~"vllm:.+"})') == 'count({__name__=~"vllm:.+",namespace="team-a"})'
    assert TEAM_A.confine('sum(x{namespace="team-a"})') == 'sum(x{namespace="team-a"})'  # already held: kept
    assert TEAM_A.confine("1 + 2") == "1 + 2"


def test_another_namespace_is_refused_unless_the_admin_allows_it() -> None:
    with pytest.raises(QueryRefused) as refused:
        TEAM_A.confine('sum(x{namespace="team-b"}) + y')
    assert str(refused.value) == (
        'x{namespace="team-b"} reads namespace team-b; a run of namespace team-a reads only its own series, '
        "unless the cluster admin allows more (the chart's tenancy.queries.namespaces)"
    )
    with pytest.raises(QueryRefused) as refused:
        TEAM_A.confine('x{namespace=~"team-.*"}')
    assert str(refused.value) == (
        'x{namespace=~"team-.*"} matches namespaces with namespace=~"team-.*", which reaches past team-a; name the '
        'namespace with namespace="team-a", or leave it out and it is added'
    )
    with pytest.raises(QueryRefused, match='matches namespaces with namespace!="team-b"'):
        TEAM_A.confine('x{namespace!="team-b"}')
    shared = QueryScope("team-a", ("shared",))
    assert shared.confine('x{namespace="shared"} / y') == 'x{namespace="shared"} / y{namespace="team-a"}'
    assert QueryScope("team-a", ("*",)).confine('x{namespace=~".*"}') == 'x{namespace=~".*"}'  # not confined


def test_what_the_rewritten_text_could_not_hold_is_refused_not_sent() -> None:
    # The parser reads escapes but writes values back unescaped: a quote in a value would end the string early,
    # and this one would then read team-b's series. Refused before anything is written.
    smuggled = r'x{a="\"} or y{namespace=\"team-b\"} or x{a=\""}'
    with pytest.raises(QueryRefused) as refused:
        TEAM_A.confine(smuggled)
    assert "a label value with a quote, a backslash or a line break cannot be confined" in str(refused.value)
    with pytest.raises(QueryRefused) as refused:
        TEAM_A.confine(r'label_replace(up, "who", "te\"am", "", "")')  # a string argument, not a selector
    assert str(refused.value) == (
        '\'label_replace(up{namespace="team-a"}, "who", "te"am", "", "")\' does not read back as itself once '
        'confined (unterminated quoted string ")'
    )
    with pytest.raises(QueryRefused) as refused:
        TEAM_A.confine("sum(rate(x[{window}]")
    assert str(refused.value).startswith(
        "'sum(rate(x[{window}]' could not be parsed to confine it to namespace team-a ("
    )


def run(**sections: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(
        {
            "target": {"url": "http://scorer"},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
            "metrics": {"prometheus": {"url": "http://prometheus.monitoring:9090"}},
            **sections,
        }
    )


def test_a_runs_promql_naming_another_namespace_is_refused_before_it_starts_naming_the_field() -> None:
    def queries(*written: str, scope: QueryScope = RUN_A) -> str | None:
        custom = [{"name": f"q{i}", "query": q} for i, q in enumerate(written)]
        metrics = {"prometheus": {"url": "http://prometheus.monitoring:9090"}, "customQueries": custom}
        return written_queries_problem(run(metrics=metrics), scope)

    # The placeholders are filled as a trial fills them; a selector without a namespace gets the run's.
    assert queries('sum(container_memory_working_set_bytes{namespace="{namespace}",pod=~"{pod}"})', "sum(up)") is None
    assert queries("sum(up)", 'sum(kube_pod_info{namespace="kube-system"})') == (
        'spec.metrics.customQueries[1].query: kube_pod_info{namespace="kube-system"} reads namespace kube-system; a '
        "run of namespace a reads only its own series, unless the cluster admin allows more (the chart's "
        "tenancy.queries.namespaces)"
    )
    assert queries('sum(kube_pod_info{namespace="kube-system"})', scope=QueryScope("a", ("*",))) is None

    def fitted(selector: str, scope: QueryScope = RUN_A) -> str | None:
        prompts = {"fromPrometheus": {"selector": selector}, "tokenizer": {"file": "/t.json"}}
        chat = {"protocol": "openai-chat", "modelName": "m"}
        return written_queries_problem(run(payload={"prompts": prompts}, request=chat), scope)

    assert fitted('model_name="m"') is None
    assert fitted('namespace=~".+"') == (
        'spec.payload.prompts.fromPrometheus.selector: vllm:request_success_total{namespace=~".+"} matches '
        'namespaces with namespace=~".+", which reaches past a; name the namespace with namespace="a", or leave it '
        "out and it is added"
    )
    assert fitted('namespace="serving"', QueryScope("a", ("serving",))) is None


def test_the_queries_the_operator_builds_name_the_trials_namespace_already() -> None:
    """A trial's resource figures need no confining: every selector of them names the trial's namespace."""
    window = QueryWindow("ml", "iris-t0-[a-z0-9]{5}", end=0, seconds=60)
    built = [*container_queries(window).values(), *gpu_queries(window, "pod", "DCGM_FI_DEV_GPU_UTIL").values()]
    assert len(built) == 6
    for query in built:
        assert QueryScope("ml").confine(query) == str(promql_parser.parse(query))  # nothing added


def test_terms_are_counted_on_the_text_before_anything_parses_it() -> None:
    assert terms("up") == 1
    assert terms('sum by (le) (rate(x{a="b",c=~"d.+"}[5m])) # a comment (with brackets') == 13
    assert terms('x{a="}"} + y[1m] / "a string with ( and {"') == 7  # brackets inside strings hold nothing
    assert terms("(" * 2000 + "up" + ")" * 2000) == 4001


def test_a_query_too_large_to_check_quickly_is_refused_naming_the_bound_before_it_is_parsed() -> None:
    """A chain of 65 selectors (129 terms) is refused; 64 (127) are confined. Unbounded, the parser's walk of a
    4 KiB query of nested brackets held a core for minutes."""
    assert TEAM_A.confine("+".join(["up"] * 64)).count('namespace="team-a"') == 64
    for worst in ("+".join(["up"] * 65), "(" * 2000 + "up" + ")" * 2000, "abs(" * 1000 + "up" + ")" * 1000):
        with pytest.raises(QueryRefused) as refused:
            TEAM_A.confine(worst)
        assert str(refused.value) == (
            f"the query has {terms(worst)} terms, more than the 128 a run's query may have (checking it would hold "
            "the operator); split it into several customQueries"
        )
    run = ProfileRunSpec.model_validate(
        {
            "target": {"deploymentRef": {"name": "m"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
            "metrics": {
                "prometheus": {"url": "http://prometheus.monitoring:9090"},
                "customQueries": [{"name": "deep", "query": "(" * 2000 + "up" + ")" * 2000}],
            },
        }
    )
    assert written_queries_problem(run, TEAM_A) == (
        "spec.metrics.customQueries[0].query: the query has 4001 terms, more than the 128 a run's query may have "
        "(checking it would hold the operator); split it into several customQueries"
    )
