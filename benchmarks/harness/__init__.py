"""The benchmarks' shared machinery: child processes and their RSS, provider variants, an older
commit as baseline, checkpoints on HDFS, the Scala jobs' jar, result files, plots and reports,
and `run_all` (`make bench`)."""
