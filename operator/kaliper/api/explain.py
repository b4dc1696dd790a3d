"""`kaliper explain`: a kind or one of its fields described from the same OpenAPI schema the CRDs carry,
like `kubectl explain`."""

from __future__ import annotations

import textwrap
from typing import Any

from kaliper.api.crd import openapi_schema
from kaliper.api.resources import KINDS


class NoSuchField(ValueError):
    """The path names no kind or no field; the message lists what exists."""


def type_of(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    if node.get("type") == "array":
        return f"[]{type_of(node.get('items', {}))}"
    if "enum" in node:
        return " | ".join(map(str, node["enum"]))
    return node.get("type", "any")


def explain(field_path: str) -> str:
    """The description of `kind[.field...]` (kind by name, plural or short name, any case) and its fields."""
    kind_name, *parts = field_path.split(".")
    info = next((k for k in KINDS if kind_name.lower() in (k.kind.lower(), k.plural, *k.short_names)), None)
    if info is None:
        raise NoSuchField(f"{kind_name!r} is not a Kaliper kind; use one of {', '.join(k.kind for k in KINDS)}")
    node: dict[str, Any] = {
        "description": " ".join((info.model.__doc__ or "").split()),
        "type": "object",
        "properties": {"spec": openapi_schema(info.spec_model), "status": openapi_schema(info.status_model)},
    }
    for i, part in enumerate(parts):
        node = node.get("items", node)
        properties = node.get("properties", {})
        if part not in properties:
            where = ".".join([info.kind, *parts[:i]])
            raise NoSuchField(f"{where} has no field {part!r}; fields: {', '.join(properties) or 'none'}")
        node = properties[part]
    lines = [
        f"{'.'.join([info.kind, *parts])}  ({type_of(node)})",
        "",
        textwrap.fill(node.get("description", ""), 100),
        "",
    ]
    properties = node.get("items", node).get("properties", {})
    required = set(node.get("items", node).get("required", []))
    if properties:
        lines.append("FIELDS:")
        for name, sub in properties.items():
            lines.append(f"  {name}  <{type_of(sub)}>{' (required)' if name in required else ''}")
            description = sub.get("description", "")
            if description:
                lines.append(textwrap.fill(description, 96, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(lines)
