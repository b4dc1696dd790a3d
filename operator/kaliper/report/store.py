"""Documents (results, reports) kept in ConfigMaps, within Kubernetes' 1 MiB object limit.

A document that fits is stored as plain text under `data` (readable with kubectl); a larger one is gzipped
under `binaryData` as KEY.gz. Both sides (the load-generator pod that writes results, the operator that
reads them and writes the report) go through these two functions.
"""

from __future__ import annotations

import base64
import gzip
from typing import Any

# etcd's limit is 1.5 MiB per object and the API server's request limit larger; ConfigMaps are refused above
# 1 MiB of data. Leave room for metadata.
PLAIN_LIMIT = 900 * 1024
MAX_BYTES = 1000 * 1024


class DocumentTooLarge(ValueError):
    pass


def configmap_content(key: str, text: str) -> dict[str, Any]:
    """The data/binaryData part of a ConfigMap that holds `text` under `key`."""
    raw = text.encode()
    if len(raw) <= PLAIN_LIMIT:
        return {"data": {key: text}}
    packed = gzip.compress(raw, mtime=0)
    if len(packed) * 4 / 3 > MAX_BYTES:
        raise DocumentTooLarge(
            f"{key} is {len(raw)} bytes ({len(packed)} gzipped), more than a ConfigMap holds; "
            "set report.includeTimeSeries to false or shorten the run"
        )
    return {"binaryData": {f"{key}.gz": base64.b64encode(packed).decode()}}


def read_document(configmap: dict[str, Any], key: str) -> str | None:
    """The text stored under `key` by configmap_content, or None when it is absent."""
    data = configmap.get("data") or {}
    if key in data:
        return str(data[key])
    packed = (configmap.get("binaryData") or {}).get(f"{key}.gz")
    if packed is None:
        return None
    return gzip.decompress(base64.b64decode(packed)).decode()
