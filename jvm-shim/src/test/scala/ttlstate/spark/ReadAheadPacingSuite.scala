package ttlstate.spark

import org.scalatest.funsuite.AnyFunSuite

/** When a task reads ahead: each chunk while chunks find keys to fetch, one chunk in
 *  `Probe` while they find (almost) none, never once the store reads none ahead. */
class ReadAheadPacingSuite extends AnyFunSuite {
  private val Chunk = 1024

  /** Of `rows` rows, which start a chunk that is read ahead, each fetching `keys(chunkIndex)`. */
  private def chunkStarts(rows: Int, keys: Int => Int): Seq[Int] = {
    val pacing = new ReadAheadPacing(Chunk)
    var row = 0
    var chunks = 0
    val starts = Seq.newBuilder[Int]
    while (row < rows) {
      if (pacing.readAhead) {
        starts += row
        pacing.fetched(keys(chunks))
        chunks += 1
        row += Chunk
      } else {
        pacing.passed()
        row += 1
      }
    }
    starts.result()
  }

  test("cold chunks: every chunk is read ahead") {
    assert(chunkStarts(10 * Chunk, _ => Chunk / ReadAheadPacing.Sparse) == (0 until 10).map(_ * Chunk))
  }

  test("hot chunks: one chunk in Probe is read ahead, the rows between pass through") {
    val period = ReadAheadPacing.Probe * Chunk
    assert(chunkStarts(3 * period, _ => Chunk / ReadAheadPacing.Sparse - 1) == Seq(0, period, 2 * period))
  }

  test("a probe that finds cold keys again reads every chunk from then on") {
    val period = ReadAheadPacing.Probe * Chunk
    val starts = chunkStarts(period + 3 * Chunk, i => if (i == 0) 0 else Chunk)
    assert(starts == Seq(0, period, period + Chunk, period + 2 * Chunk))
  }

  test("a store that reads none ahead is never asked again") {
    assert(chunkStarts(100 * Chunk, _ => -1) == Seq(0))
  }
}
