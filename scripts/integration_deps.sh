#!/usr/bin/env bash
# Fetches what the integration tier (tests/integration/) runs, with Maven, from
# integration/pom.xml: Spark's Kafka connector, a Kafka broker, Hadoop's MiniDFSCluster, S3Proxy
# and Hadoop's S3A file system, each into its own folder (one classpath each), and compiles
# integration/src/HdfsCluster.java.
# The folder is named after a hash of those two files and stamped when complete, so a second
# run does nothing. Prints the folder. TTLSTATE_INTEGRATION_CACHE overrides the parent folder.
set -euo pipefail
cd "$(dirname "$0")/.."
parent=${TTLSTATE_INTEGRATION_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ttlstate-integration}
hash=$(cat integration/pom.xml integration/src/*.java scripts/integration_deps.sh | sha256sum | cut -c1-12)
out="$parent/$hash"
if [[ -f "$out/.complete" ]]; then
  echo "$out"
  exit 0
fi
scripts/ensure_maven.sh
tmp="$out.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
for profile in spark-kafka broker hdfs s3proxy s3a; do
  echo "integration_deps: fetching $profile" >&2
  mvn -q -B -Dstyle.color=never -f integration/pom.xml -P "$profile" dependency:copy-dependencies \
    -DoutputDirectory="$tmp/$profile" >&2
done
mkdir -p "$tmp/classes"
javac -nowarn -d "$tmp/classes" -cp "$tmp/hdfs/*" integration/src/HdfsCluster.java >&2
rm -rf "$out"
mv "$tmp" "$out"
touch "$out/.complete"
echo "$out"
