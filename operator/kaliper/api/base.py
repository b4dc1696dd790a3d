"""The base every Kaliper API model builds on, and cross-field rules that validate twice.

A `Rule` is written once beside the model it constrains. Its CEL expression goes into the generated CRD
(`x-kubernetes-validations`), so the API server enforces it; its Python check runs in the model's own
validation, so `kaliper validate`, `kaliper run` and the operator enforce it too — with the same message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError


@dataclass(frozen=True)
class Rule:
    """A cross-field rule: `check(model)` must hold; `cel` is the same rule for the API server."""

    cel: str
    message: str
    check: Callable[[Any], bool]
    # Where the server should point its error, relative to the object (CEL `fieldPath`), e.g. ".limits".
    field_path: str | None = None

    def as_validation(self) -> dict[str, str]:
        validation = {"rule": self.cel, "message": self.message}
        if self.field_path:
            validation["fieldPath"] = self.field_path
        return validation


def _value_at(model: Any, path: str) -> Any:
    """The value at a dotted path of snake_case names; None where any step on the way is unset."""
    for name in path.split("."):
        model = None if model is None else getattr(model, name)
    return model


def _camel_path(path: str) -> str:
    return ".".join(_alias(name) for name in path.split("."))


def _has_steps(path: str) -> list[str]:
    """CEL's has() of each step of a dotted path, outermost first: all true when the path is set."""
    names = _camel_path(path).split(".")
    return [f"has(self.{'.'.join(names[: depth + 1])})" for depth in range(len(names))]


def only_with(
    field: str, needs: str, value: str | None = None, *, message: str, at: str | None = None, flag: bool = False
) -> Rule:
    """`field` may be set (a `flag`: true) only when `needs` is set (and, given `value`, equals it): both dotted
    paths of snake_case names in the model the rule sits on. The CEL and the check come from the same two
    paths, so they cannot disagree; the server points its error at `at` (default: `field`), where the fix goes."""
    wanted = _has_steps(needs) + ([f"self.{_camel_path(needs)} == '{value}'"] if value is not None else [])
    unset = [f"!{has}" for has in _has_steps(field)] + ([f"!self.{_camel_path(field)}"] if flag else [])

    def check(model: Any) -> bool:
        found, given = _value_at(model, needs), _value_at(model, field)
        return (given is None or (flag and not given)) or (found is not None if value is None else found == value)

    return Rule(
        cel=" || ".join(unset) + (f" || ({' && '.join(wanted)})" if len(wanted) > 1 else f" || {wanted[0]}"),
        message=message,
        check=check,
        field_path="." + _camel_path(at or field),
    )


def _is_set(model: BaseModel, name: str) -> bool:
    value = getattr(model, name)
    return value is not None


def _alias(name: str) -> str:
    return to_camel(name)


def exactly_one_of(*names: str) -> Rule:
    """Exactly one of the (optional) fields is set: `url` or `deploymentRef`, not both, not neither."""
    return _how_many_of(names, "or", "set exactly one of {}", ".exists_one(x, x)", lambda count: count == 1)


def at_most_one_of(*names: str) -> Rule:
    """At most one of the (optional) fields is set."""
    message = "{} are mutually exclusive; set at most one"
    return _how_many_of(names, "and", message, ".filter(x, x).size() <= 1", lambda count: count <= 1)


def _how_many_of(
    names: tuple[str, ...], last_joined_by: str, message: str, cel_count: str, holds: Callable[[int], bool]
) -> Rule:
    aliases = [_alias(n) for n in names]
    listed = ", ".join(aliases[:-1]) + f" {last_joined_by} {aliases[-1]}"
    return Rule(
        cel="[" + ", ".join(f"has(self.{a})" for a in aliases) + "]" + cel_count,
        message=message.format(listed),
        check=lambda m: holds(sum(_is_set(m, n) for n in names)),
    )


class KaliperModel(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields rejected, docstrings as descriptions."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
        json_schema_extra=lambda schema, cls: _add_rules_to_schema(schema, cls),
    )

    cross_field_rules: ClassVar[tuple[Rule, ...]] = ()
    # CEL rules only the API server can check, such as transition rules that compare with oldSelf.
    server_only_validations: ClassVar[tuple[dict[str, str], ...]] = ()

    @model_validator(mode="after")
    def _check_rules(self) -> KaliperModel:
        for rule in type(self).cross_field_rules:
            if not rule.check(self):
                # The field path travels in the context so errors point where the API server's do.
                raise PydanticCustomError(
                    "cross_field_rule", "{message}", {"message": rule.message, "field_path": rule.field_path or ""}
                )
        return self

    def to_manifest(self) -> dict[str, Any]:
        """The object as it is written in YAML: camelCase keys, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def _add_rules_to_schema(schema: dict[str, Any], cls: type) -> None:
    validations = [rule.as_validation() for rule in getattr(cls, "cross_field_rules", ())]
    validations += [dict(v) for v in getattr(cls, "server_only_validations", ())]
    if validations:
        schema["x-kubernetes-validations"] = validations
