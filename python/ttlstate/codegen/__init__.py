"""Emits the facts Python defines once (protocol constants, conf keys, metric names, the TtlValue
layout) as Scala objects and C++ headers, at build time (`python -m ttlstate.codegen`)."""
