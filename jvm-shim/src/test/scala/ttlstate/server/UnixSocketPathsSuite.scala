package ttlstate.server

import java.io.File
import java.net.{StandardProtocolFamily, UnixDomainSocketAddress}
import java.nio.channels.{ServerSocketChannel, SocketChannel}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import org.apache.hadoop.fs.FileUtil
import org.scalatest.funsuite.AnyFunSuite

/** A state server's sockets are where this JVM can connect to them, whatever the length of the
 *  local dir: at and around the JVM's own limit (Java 17 refuses 107 bytes, where sun_path would
 *  hold it: every store load failed when `<local dir>/ttlstate-<random>/w1.sock` came to 107). */
class UnixSocketPathsSuite extends AnyFunSuite {
  test("the limit is the JVM's own: a path of that length connects, one byte more does not") {
    val max = UnixSocketPaths.maxBytes
    assert(UnixSocketPaths.accepted(max) && !UnixSocketPaths.accepted(max + 1), s"limit $max")
    assert(max >= 90 && max <= 4096, s"limit $max")
  }

  test("roots whose socket path is 105 to 108 bytes: every socket binds and connects") {
    val base = Files.createTempDirectory("ttls-test").toFile
    try {
      for (length <- 105 to 108) {
        val prefix = s"${base.getAbsolutePath}/"
        val root = new File(prefix + "r" * (length - prefix.length - "/w1.sock".length))
        assert(root.mkdirs())
        assert(s"${root.getAbsolutePath}/w1.sock".getBytes(UTF_8).length == length)
        val socketDir = StateServer.socketDirFor(root, 2)
        try {
          assert(socketDir.isDefined == (length > UnixSocketPaths.maxBytes), s"$length bytes: $socketDir")
          for (worker <- 0 until 2) {
            val path = s"${socketDir.getOrElse(root).getAbsolutePath}/w$worker.sock"
            bindAndConnect(path)
          }
        } finally socketDir.foreach(FileUtil.fullyDelete)
      }
    } finally FileUtil.fullyDelete(base)
  }

  private def bindAndConnect(path: String): Unit = {
    val address = UnixDomainSocketAddress.of(path)
    val server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)
    try {
      server.bind(address)
      val client = SocketChannel.open(StandardProtocolFamily.UNIX)
      try assert(client.connect(address), path) finally client.close()
    } finally {
      server.close()
      Files.deleteIfExists(address.getPath)
    }
  }
}
