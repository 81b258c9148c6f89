#!/usr/bin/env bash
# Fetches what the cluster tier (tests/cluster/) runs besides the integration tier's components
# (scripts/integration_deps.sh, run first: the Kafka broker and Spark's Kafka connector), with
# Maven, from integration/cluster/pom.xml: Hadoop's MiniDFSCluster + MiniYARNCluster and the
# Kafka client, each into its own folder, and compiles integration/cluster/*.java.
# The folder is named after a hash of these files and stamped when complete, so a second run does
# nothing. Prints the folder. TTLSTATE_CLUSTER_CACHE overrides the parent folder.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/integration_deps.sh >/dev/null
parent=${TTLSTATE_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ttlstate-cluster}
hash=$(cat integration/cluster/pom.xml integration/cluster/*.java scripts/cluster_deps.sh | sha256sum | cut -c1-12)
out="$parent/$hash"
if [[ -f "$out/.complete" ]]; then
  echo "$out"
  exit 0
fi
scripts/ensure_maven.sh
tmp="$out.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
for profile in yarn kafka-io; do
  echo "cluster_deps: fetching $profile" >&2
  mvn -q -B -Dstyle.color=never -f integration/cluster/pom.xml -P "$profile" dependency:copy-dependencies \
    -DoutputDirectory="$tmp/$profile" >&2
done
mkdir -p "$tmp/classes"
javac -nowarn -d "$tmp/classes" -cp "$tmp/yarn/*" integration/cluster/YarnCluster.java >&2
javac -nowarn -d "$tmp/classes" -cp "$tmp/kafka-io/*" integration/cluster/KafkaIO.java >&2
rm -rf "$out"
mv "$tmp" "$out"
touch "$out/.complete"
echo "$out"
