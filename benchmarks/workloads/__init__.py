"""One module per benchmark (`python -m benchmarks NAME`), with its child-process (`*_child`) and
plot (`*_plot`) modules next to it; `scala/` holds the sources of the Scala jobs some run."""
