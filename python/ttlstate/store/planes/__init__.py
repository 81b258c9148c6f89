"""The data planes: where a store version's per-entry work runs.

`base` is the interface the control plane calls; `native` runs it in C++ (native/, the
default), `portable` in Python (the reference implementation, and the only one with the
rocksdict engine). `select.for_engine` picks the one that fits an opened engine.
"""
