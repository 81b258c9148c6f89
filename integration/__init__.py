"""The integration tier's real components (Kafka, HDFS, S3), shared by tests/integration and the
benchmarks that put their checkpoints on HDFS: pom.xml says what Maven fetches, src/ holds the
Java that drives MiniDFSCluster, components.py starts them."""
