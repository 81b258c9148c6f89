package ttlstate.server

import java.io.IOException
import java.net.{SocketException, StandardProtocolFamily, UnixDomainSocketAddress}
import java.nio.channels.SocketChannel
import java.nio.charset.StandardCharsets.UTF_8

/** How long a Unix socket path this JVM can connect to. Linux's sun_path holds 108 bytes with
 *  the terminating NUL, but Java 17 already refuses a path of 107 ("Unix domain path too long"),
 *  and another JVM or platform may draw the line elsewhere: so the limit is found by asking the
 *  JVM once (a connect to a path that does not exist fails either as too long or as not found),
 *  never assumed. The state server's Python binds whatever path the JVM accepts. */
object UnixSocketPaths {
  /** The longest path, in bytes, that a connect accepts. */
  lazy val maxBytes: Int = {
    // The largest length accepted, by bisection: lengths up to `lo` are accepted, `hi` is not.
    var (lo, hi) = (1, 4097)
    while (hi - lo > 1) {
      val mid = (lo + hi) / 2
      if (accepted(mid)) lo = mid else hi = mid
    }
    lo
  }

  def fits(path: String): Boolean = path.getBytes(UTF_8).length <= maxBytes

  /** Whether the JVM takes a path of `length` bytes (one that does not exist). */
  private[server] def accepted(length: Int): Boolean = {
    val channel = SocketChannel.open(StandardProtocolFamily.UNIX)
    try {
      channel.connect(UnixDomainSocketAddress.of("/" + "t" * (length - 1)))
      true
    } catch {
      case e: SocketException if Option(e.getMessage).exists(_.contains("too long")) => false
      case _: IOException => true // not found: the path itself was taken
    } finally channel.close()
  }
}
