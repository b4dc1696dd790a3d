"""Read manifests from files and check them against the models, with errors a person can act on.

Every problem names the file, the document's position in it, the object, and the field path — the same path
the API server would print — and says how to fix it.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from kaliper.api.cleanup import CRON_PATTERN
from kaliper.api.common import (
    API_VERSION,
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    GROUP,
    HTTP_URL_PATTERN,
    KEY_PATTERN,
    RESOURCE_NAME_PATTERN,
)
from kaliper.api.resources import KINDS_BY_NAME

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# What a pattern means, for people: shown instead of the regular expression.
PATTERN_HINTS = {
    DNS_LABEL_PATTERN: "is not a valid name: use lowercase letters, digits and '-', starting and ending with a "
    "letter or digit",
    DNS_SUBDOMAIN_PATTERN: "is not a valid object name: use lowercase letters, digits, '-' and '.', starting "
    "and ending with a letter or digit",
    KEY_PATTERN: "is not a valid key: use letters, digits, '-', '_' and '.'",
    HTTP_URL_PATTERN: "is not an http:// or https:// URL",
    RESOURCE_NAME_PATTERN: "is not an extended resource name: write a domain and a name, such as nvidia.com/gpu "
    "or nvidia.com/mig-1g.5gb",
    CRON_PATTERN: 'is not a cron schedule: write five fields, such as "0 3 * * *", or a macro such as @daily',
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a document: where (a field path such as spec.load.rate) and what to do."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass
class Document:
    """One YAML document of a file, and what checking it found."""

    source: str
    index: int  # 1-based position of the document in its file
    data: Any
    problems: list[Problem] = field(default_factory=list)
    resource: BaseModel | None = None
    skipped: str | None = None  # why the document was not checked (not a Kaliper object)

    @property
    def object_ref(self) -> str | None:
        """Kind/name of the object, as far as the document says."""
        if not isinstance(self.data, dict):
            return None
        metadata = self.data.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        return f"{self.data.get('kind') or '?'}/{name or '?'}"

    @property
    def label(self) -> str:
        where = f"{self.source} (document {self.index})"
        return f"{where} {self.object_ref}" if self.object_ref else where

    @property
    def ok(self) -> bool:
        return not self.problems


class ManifestError(ValueError):
    """A manifest that does not validate; `problems` lists every reason."""

    def __init__(self, label: str, problems: list[Problem]) -> None:
        self.label = label
        self.problems = problems
        super().__init__(f"{label}:\n" + "\n".join(f"  {p}" for p in problems))


def manifest_files(paths: list[Path]) -> list[Path]:
    """The files named, and the manifest files under the directories named (sorted, recursive)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        else:
            files.append(path)
    return files


def read_documents(path: Path) -> list[Document]:
    """The documents of one file. A file that cannot be read or parsed yields one document with the problem."""
    source = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        return [Document(source, 1, None, [Problem("", f"cannot read the file: {exc.strerror or exc}")])]
    try:
        loaded = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        return [Document(source, 1, None, [Problem("", f"not valid YAML: {where}{problem}")])]
    return [Document(source, i, data) for i, data in enumerate(loaded, start=1)]


def check_document(document: Document) -> Document:
    """Validate one document in place: fills `resource`, `problems` or `skipped`."""
    data = document.data
    if not isinstance(data, dict):
        document.problems.append(Problem("", "a manifest must be a mapping with apiVersion, kind, metadata and spec"))
        return document
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not api_version.startswith(f"{GROUP}/"):
        document.skipped = f"not a Kaliper object (apiVersion {api_version!r})"
        return document
    if api_version != API_VERSION:
        document.problems.append(Problem("apiVersion", f"{api_version!r} is not served; use {API_VERSION}"))
        return document
    if kind not in KINDS_BY_NAME:
        known = ", ".join(KINDS_BY_NAME)
        document.problems.append(Problem("kind", f"{kind!r} is not a Kaliper kind; use one of {known}"))
        return document
    model = KINDS_BY_NAME[kind].model
    try:
        document.resource = model.model_validate(data)
    except ValidationError as exc:
        document.problems += problems_from(exc, model)
    return document


def parse_resource(data: dict[str, Any], source: str = "<manifest>") -> BaseModel:
    """The model of one manifest, or ManifestError listing every problem."""
    document = check_document(Document(source, 1, data))
    if document.skipped:
        raise ManifestError(document.label, [Problem("apiVersion", document.skipped)])
    if document.problems or document.resource is None:
        raise ManifestError(document.label, document.problems)
    return document.resource


def problems_from(error: ValidationError, model: type[BaseModel]) -> list[Problem]:
    """pydantic's errors as field paths and fixes."""
    problems = []
    for item in error.errors(include_url=False):
        loc = [part for part in item["loc"] if isinstance(part, int) or "[" not in str(part)]
        path = _format_path(loc)
        if item["type"] == "cross_field_rule":
            path = (path + item.get("ctx", {}).get("field_path", "")).lstrip(".")
        problems.append(Problem(path, _message(item, model, loc)))
    return problems


def _format_path(loc: list[Any]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _message(item: dict[str, Any], model: type[BaseModel], loc: list[Any]) -> str:
    kind, message = item["type"], item["msg"]
    if kind == "extra_forbidden":
        known = _field_aliases_at(model, loc[:-1])
        guess = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {guess[0]!r}?" if guess else "remove it"
        return f"unknown field; {hint} (known fields here: {', '.join(sorted(known))})"
    if kind == "missing":
        return "required field is missing; add it"
    if kind == "cross_field_rule":
        return message
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        pattern = item.get("ctx", {}).get("pattern", "")
        return f"{item.get('input')!r} {PATTERN_HINTS.get(pattern, f'does not match the pattern {pattern}')}"
    if kind == "literal_error":
        return f"{message} (got {item.get('input')!r})"
    return message


def _field_aliases_at(model: type[BaseModel], loc: list[Any]) -> list[str]:
    """The wire names of the fields of the model found by walking `loc` from `model`."""
    current: Any = model
    for part in loc:
        current = _unwrap(current, item=isinstance(part, int))
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        by_alias = {(f.alias or name): f for name, f in current.model_fields.items()}
        if part not in by_alias:
            return []
        current = by_alias[part].annotation
    current = _unwrap(current, item=False)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [(f.alias or name) for name, f in current.model_fields.items()]
    return []


def _unwrap(annotation: Any, item: bool) -> Any:
    """Strip Optional, Annotated and (for list positions) list[] to reach a model class."""
    for _ in range(8):
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        elif origin is list and item:
            annotation, item = typing.get_args(annotation)[0], False
        else:
            return annotation
    return annotation
