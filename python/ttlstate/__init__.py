"""ttlstate: Flink-grade state TTL for any Spark Structured Streaming stateful query."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["configure", "jar_path", "__version__"]


def configure(builder: Any, **options: Any) -> Any:
    """See `ttlstate.spark.configure.configure` (imported lazily: no pyspark import otherwise)."""
    from ttlstate.spark.configure import configure as _configure

    return _configure(builder, **options)


def jar_path() -> str:
    from ttlstate.spark.configure import jar_path as _jar_path

    return _jar_path()
