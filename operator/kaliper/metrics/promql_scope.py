"""PromQL a namespace's user wrote, confined to the namespace (pure): what prom-label-proxy does for
kube-prometheus and OpenShift's Thanos querier, done on the parsed query, not on its text.

Every series selector of the query (in a range, a subquery, a function's argument, either side of an
operator) gets the matcher `namespace="<the run's namespace>"`; a selector that already names a namespace
keeps it only where the cluster admin allowed that namespace, and one that matches namespaces by a regex or a
negation is refused, since it would reach past the run's own. The query is rewritten from its syntax tree
(promql-parser, the Rust parser GreptimeDB keeps, with Python bindings), so no quoting, comment or nesting
can slip a selector past it; what the parser cannot read is refused, never sent as it was.

Series without a `namespace` label (a node's, Prometheus's own) are out of a confined query's reach, as they
are behind prom-label-proxy."""

from __future__ import annotations

from dataclasses import dataclass

import promql_parser

NAMESPACE_LABEL = "namespace"
ANY = "*"
ALLOWANCE = "the chart's tenancy.queries.namespaces"
UNWRITABLE = ('"', "\\", "\n", "\r")
# The most terms (names, numbers, operators, brackets; a selector's braces and a range's brackets one each) a
# query may have. The parser's tree walk grows with about the cube of a chain's length: the worst shape at this
# bound takes about 50 ms here, twice it 0.4 s, and a 4 KiB query of nested brackets minutes
# (bench/promql_bound.py). The operator checks every run's queries in its own process: one tenant's query must
# not hold it.
MAX_TERMS = 128  # the parser writes label values unescaped: these would not read back


class QueryRefused(Exception):
    """The query reads what its run's namespace may not, or cannot be parsed to be confined."""


@dataclass(frozen=True)
class QueryScope:
    namespace: str
    """The run's namespace: every selector reads it."""
    also: tuple[str, ...] = ()
    """Other namespaces a selector may name (tenancy.queries.namespaces); "*": any, nothing confined."""

    @property
    def confines(self) -> bool:
        return ANY not in self.also

    def confine(self, promql: str) -> str:
        """The query with every selector held to the namespace, as PromQL text; QueryRefused says why not."""
        if not self.confines:
            return promql
        if (count := terms(promql)) > MAX_TERMS:
            raise QueryRefused(
                f"the query has {count} terms, more than the {MAX_TERMS} a run's query may have (checking it would "
                "hold the operator); split it into several customQueries"
            )
        expression = _parsed(promql, f"could not be parsed to confine it to namespace {self.namespace}")
        promql_parser.walk(expression, pre_visit=self._check)

        def held(node: object) -> object | None:
            if not isinstance(node, promql_parser.VectorSelector):
                return None
            if not any(m.name == NAMESPACE_LABEL for m in node.matchers.matchers):
                own = promql_parser.Matcher(promql_parser.MatchOp.Equal, NAMESPACE_LABEL, self.namespace)
                node.matchers = promql_parser.Matchers([*node.matchers.matchers, own])
            # A node handed back as it came counts as unchanged: a fresh one, parsed from the text, replaces it.
            return promql_parser.parse(str(node))

        confined = str(promql_parser.transform(expression, post_visit=held))
        # What Prometheus will run is this text: it must read back as itself, every selector held. (The parser
        # writes a label value without escaping it, which is why values that need escapes are refused above.)
        again = _parsed(confined, "does not read back as itself once confined")
        if str(again) != confined:
            raise QueryRefused(f"{promql!r} does not read back as itself once confined: {confined!r}")
        promql_parser.walk(again, pre_visit=self._check_held)
        return confined

    def _check(self, node: object) -> None:
        """Refuses a selector that reaches past the namespace, or that the confined text could not hold."""
        if not isinstance(node, promql_parser.VectorSelector):
            return
        if node.matchers.or_matchers:  # alternatives would each need the namespace: not written here
            raise QueryRefused(f"{node} has `or` alternatives inside its braces; write them as separate selectors")
        for matcher in node.matchers.matchers:
            if any(c in matcher.value for c in UNWRITABLE):
                raise QueryRefused(
                    f"{node}: a label value with a quote, a backslash or a line break cannot be confined to the "
                    "namespace (the rewritten query could not hold it); match it with a regex of other characters"
                )
            if matcher.name != NAMESPACE_LABEL:
                continue
            if matcher.op != promql_parser.MatchOp.Equal:
                raise QueryRefused(
                    f"{node} matches namespaces with {matcher}, which reaches past {self.namespace}; name the "
                    f'namespace with {NAMESPACE_LABEL}="{self.namespace}", or leave it out and it is added'
                )
            if matcher.value != self.namespace and matcher.value not in self.also:
                raise QueryRefused(
                    f"{node} reads namespace {matcher.value}; a run of namespace {self.namespace} reads only its "
                    f"own series, unless the cluster admin allows more ({ALLOWANCE})"
                )

    def _check_held(self, node: object) -> None:
        self._check(node)
        if isinstance(node, promql_parser.VectorSelector) and not any(
            m.name == NAMESPACE_LABEL for m in node.matchers.matchers
        ):
            raise QueryRefused(f"{node} is not held to namespace {self.namespace} once confined")


def terms(promql: str) -> int:
    """How many terms a query has, counted on its text in one pass, before anything parses it: a name or a
    number, an operator or a bracket, a string, and a selector's braces or a range's brackets with all they
    hold, one each; comments none. At least as many as the nodes of its tree."""
    count, at, length = 0, 0, len(promql)
    closing = {"{": "}", "[": "]"}
    while at < length:
        char = promql[at]
        if char.isspace():
            at += 1
        elif char == "#":
            at = _after(promql, at, "\n")
        elif char in "\"'`":
            count, at = count + 1, _after_string(promql, at)
        elif char in closing:
            depth, at = 1, at + 1
            while at < length and depth:
                if promql[at] in "\"'`":
                    at = _after_string(promql, at)
                    continue
                depth += promql[at] == char
                depth -= promql[at] == closing[char]
                at += 1
            count += 1
        elif char.isalnum() or char in "_:.":
            while at < length and (promql[at].isalnum() or promql[at] in "_:."):
                at += 1
            count += 1
        else:
            count, at = count + 1, at + 1
    return count


def _after(text: str, at: int, end: str) -> int:
    found = text.find(end, at + 1)
    return len(text) if found < 0 else found + 1


def _after_string(text: str, at: int) -> int:
    """Past the string that starts at `at` (a backslash escapes in quotes, not in backticks)."""
    quote, at = text[at], at + 1
    while at < len(text) and text[at] != quote:
        at += 2 if text[at] == "\\" and quote != "`" else 1
    return at + 1


def _parsed(promql: str, failure: str) -> promql_parser.Expr:
    try:
        return promql_parser.parse(promql)
    except Exception as exc:  # the parser raises ValueError or its own errors, each with the reason
        raise QueryRefused(f"{promql!r} {failure} ({exc})") from None
