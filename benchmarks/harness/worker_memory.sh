#!/bin/bash
# What each state server worker's memory holds, sampled from outside while a benchmark runs:
#   benchmarks/harness/worker_memory.sh OUT_FILE      (once; loop it for a run)
# One line per state server worker: its RSS, PSS and anonymous memory (MiB, smaps_rollup);
# RocksDB's budget, block cache usage (memtables, filters under construction and table readers
# are charged to it) and write buffers (ttl_memory_usage); and glibc's malloc_info totals: free
# chunks kept ("rest"), mmapped chunks and the arena's size from the system ("current").
# It attaches gdb to each worker for about a second per sample: its batch times are not figures.
set -euo pipefail
out=${1:?usage: worker_memory.sh OUT_FILE}
for pid in $(pgrep -x ttlstate-worker || true); do  # the name a worker gives its process
  roll=$(grep -E "^(Rss|Pss|Anonymous):" "/proc/$pid/smaps_rollup" | awk '{printf "%s%d ", $1, $2/1024}')
  xml=$(mktemp)
  mem=$(gdb -p "$pid" -batch -nx \
    -ex "set \$f = (void*)fopen(\"$xml\", \"w\")" \
    -ex 'call (int)malloc_info(0, $f)' -ex 'call (int)fclose($f)' \
    -ex 'set $p = (unsigned long*)malloc(32)' \
    -ex 'call (void)ttl_memory_usage($p, (double*)($p+1), $p+2, $p+3)' \
    -ex 'printf "BUDGET %lu CACHE %lu WBUF %lu\n", $p[0], $p[2], $p[3]' \
    -ex 'call (void)free($p)' 2>/dev/null | grep BUDGET || true)
  totals=$(grep -o '<total type="[a-z]*" count="[0-9]*" size="[0-9]*"/>\|<system type="current" size="[0-9]*"/>' "$xml" \
           | tail -4 | tr '\n' ' ')
  rm -f "$xml"
  echo "$(date +%T) pid=$pid $roll | $mem | $totals" >> "$out"
done
