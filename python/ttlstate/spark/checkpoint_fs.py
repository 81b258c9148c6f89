"""A checkpoint's files through the driver JVM's Hadoop FileContext (py4j), so a command run on
the driver reads and changes a checkpoint on HDFS, S3A, ABFS or GCS as on a local disk.

FileContext, not FileSystem: its rename refuses an existing target instead of moving the source
into it (FileSystem's rename onto a folder), and with OVERWRITE replaces a file atomically on
HDFS and local disks, as Spark's own checkpoint file manager does. Paths are strings, relative to
the checkpoint or absolute.
"""

from __future__ import annotations

from typing import Any


class CheckpointFs:
    def __init__(self, spark: Any, checkpoint: str) -> None:
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._gateway = spark.sparkContext._gateway
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        root = jvm.org.apache.hadoop.fs.Path(checkpoint)
        self._fs = root.getFileSystem(conf)
        self.root = str(self._fs.makeQualified(root).toString())
        self._fc = jvm.org.apache.hadoop.fs.FileContext.getFileContext(self._fs.getUri(), conf)

    def path(self, rel: str) -> Any:
        p = self._jvm.org.apache.hadoop.fs.Path
        return p(rel) if rel.startswith(self.root) else p(self.root if not rel else f"{self.root}/{rel}")

    def exists(self, rel: str) -> bool:
        return bool(self._fs.exists(self.path(rel)))

    def is_dir(self, rel: str) -> bool:
        return bool(self._fs.exists(self.path(rel)) and self._fs.getFileStatus(self.path(rel)).isDirectory())

    def list(self, rel: str) -> list[str]:
        """Names in folder `rel` (none if it does not exist), hidden `.` files left out."""
        if not self.exists(rel):
            return []
        names = [str(s.getPath().getName()) for s in self._fs.listStatus(self.path(rel))]
        return sorted(n for n in names if not n.startswith("."))

    def read(self, rel: str, limit: int | None = None) -> bytes:
        """The file's bytes, or its first `limit` bytes."""
        stream = self._fs.open(self.path(rel))
        try:
            data = stream.readNBytes(limit) if limit is not None else stream.readAllBytes()
        finally:
            stream.close()
        return bytes(data)

    def read_text(self, rel: str) -> str:
        return self.read(rel).decode("utf-8")

    def write(self, rel: str, data: bytes, overwrite: bool = False) -> None:
        """Writes a file whole, atomically: a temporary file renamed onto the name (replacing
        an existing file with `overwrite`, else failing if there is one)."""
        target = self.path(rel)
        temp = self._jvm.org.apache.hadoop.fs.Path(target.getParent(), f".{target.getName()}.ttlstate.tmp")
        self._fs.mkdirs(target.getParent())
        out = self._fs.create(temp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        self.rename(str(temp), str(target), overwrite=overwrite)

    def rename(self, src: str, dst: str, overwrite: bool = False) -> None:
        """Renames a file or folder; fails if `dst` exists (unless `overwrite`, for a file)."""
        options = self._gateway.new_array(self._jvm.org.apache.hadoop.fs.Options.Rename, 1)
        options[0] = (self._jvm.org.apache.hadoop.fs.Options.Rename.OVERWRITE if overwrite
                      else self._jvm.org.apache.hadoop.fs.Options.Rename.NONE)
        self._fc.rename(self.path(src), self.path(dst), options)

    def copy(self, src: str, dst: str) -> None:
        """Copies a file or folder (a folder with everything in it)."""
        util = self._jvm.org.apache.hadoop.fs.FileUtil
        if not util.copy(self._fs, self.path(src), self._fs, self.path(dst), False, True,
                         self._fs.getConf()):
            raise OSError(f"could not copy {src} to {dst}")

    def fetch(self, rel: str, local: str) -> None:
        """Copies file `rel` to the local path `local` (streamed, no checksum file beside it)."""
        self._fs.copyToLocalFile(False, self.path(rel), self._jvm.org.apache.hadoop.fs.Path(local), True)

    def mkdirs(self, rel: str) -> None:
        self._fs.mkdirs(self.path(rel))

    def delete(self, rel: str) -> None:
        """Deletes a file or a folder with everything in it; nothing if it does not exist."""
        self._fs.delete(self.path(rel), True)

    def size(self, rel: str) -> int:
        """Bytes of a file, or of every file under a folder."""
        return int(self._fs.getContentSummary(self.path(rel)).getLength())
