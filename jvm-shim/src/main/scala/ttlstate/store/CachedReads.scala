package ttlstate.store

import java.util.concurrent.{Executors, Future}

import ttlstate.cache.{CacheView, Expiry, HotCache, KeyBytes, KeyFilter, TaskRecord}
import ttlstate.client.Protocol

/** The store's TTL as the server applies it, fixed for one loaded version. `ttlMs` -1: off.
 *  `cacheable`: reads may be answered in the JVM (expired values are never returned). */
final case class TtlRules(ttlMs: Long, updateOnRead: Boolean, cacheable: Boolean)

/** The time TTL uses for one loaded version: the batch time, advanced in Real-time Mode. */
final class VersionClock(var now: Long)

/** What a store's last committed task learned, for the next task of the store: the size its
 *  task record reached (entries, bytes), and whether its reads found almost nothing. */
final case class TaskHint(entries: Int, bytes: Long, foundLittle: Boolean)

object TaskHint {
  val None: TaskHint = TaskHint(0, 0L, foundLittle = false)
}

/** The reads of one task's store that the JVM answers without a round trip, and what decides it.
 *
 *  Three sources, asked in order: the task's own record (`TaskRecord`: keys this task read or
 *  wrote in this version, exact because every write of the version goes through this task), the
 *  executor's cross-batch cache (`HotCache`, through the store's `CacheView`, when the provider
 *  attached one: committed entries, with TTL applied here as the server would) and the key
 *  filter (`KeyFilter`: "not in the filter" is "absent"). What a read returns from the server is
 *  remembered; at commit the record is what the cross-batch cache learns.
 *
 *  Admission: a store that only grows (a deduplication of new ids: reads find almost nothing,
 *  this task's and the previous one's) neither keeps the new keys it writes nor lets the cache
 *  learn them; they are not read back and would only fill the heap.
 *
 *  `queueWrite` sends a write the cache's TTL rules owe the server (an expired entry's removal,
 *  an OnReadAndWrite refresh). */
final class CachedReads(version: Long, rules: TtlRules, clock: VersionClock, hint: TaskHint,
    queueWrite: (Int, KeyBytes, Array[Byte]) => Unit) {
  import CachedReads._

  var readOnly = false
  // Set by the provider after the load (and on upgrade); null: every read asks the server.
  var keyFilter: KeyFilter = null
  // The executor's cross-batch cache of this store's committed entries when attached, else null.
  var cache: CacheView = null
  var cacheEpoch = 0L

  // Given back when the task ends (`end`), after which this is null, so a use after the end fails
  // loudly instead of touching another task's record.
  private var known = TaskRecord.acquire(TaskRecord.defaultLimit, hint.entries, hint.bytes)
  // The cross-batch cache learning `known` on another thread (commit), if it may still run.
  private var publishing: Future[_] = null
  private var writesForgotten = false // a write `known` had no room for
  private var reads = 0L
  private var readsFound = 0L
  private var aheadFull = false
  private var prefixRemoved = false // a column family's keys were removed (`removedPrefix`)

  var readsSkipped = 0L
  var cacheHits = 0L
  var cacheMisses = 0L
  var readAheadKeys = 0L
  var expiredInCacheReadOnly = 0L // a writable store's are counted by the server

  /** A `get` of `k`: the value (null: absent) when this JVM knows it, else `Ask`. */
  def read(k: KeyBytes): Array[Byte] = {
    val i = known.find(k)
    if (i >= 0) {
      if (stillKnown(i)) return known.value(i)
    } else {
      if (usableCache) {
        val e = HotCache.get(cache.owner, cacheEpoch, k)
        if (e != null) { cacheHits += 1; return fromCache(k, e) }
        cacheMisses += 1
      }
      if (keyFilter != null && !keyFilter.mightContain(k)) { readsSkipped += 1; return null }
    }
    Ask
  }

  /** What the server answered for `k` (a `get`). */
  def learned(k: KeyBytes, value: Array[Byte], ts: Long): Unit = remember(k, value, ts, found = value != null)

  /** Counts a `get` and whether it found a value (the admission rules read these). */
  def counted(found: Boolean): Unit = {
    reads += 1
    if (found) readsFound += 1
  }

  // -- read-ahead --------------------------------------------------------------------------

  /** Whether reads ahead may be remembered (none once the record refused one: what it fetched
   *  would be fetched again). */
  def aheadAllowed: Boolean = rules.cacheable && !aheadFull

  /** Whether a read ahead should fetch `k`: not known here (this task's own write must win),
   *  not ruled out by the filter, not in the cross-batch cache. */
  def wantedAhead(k: KeyBytes): Boolean =
    known.find(k) < 0 && (keyFilter == null || keyFilter.mightContain(k)) &&
      !(usableCache && HotCache.get(cache.owner, cacheEpoch, k) != null)

  def fetchedAhead(k: KeyBytes, value: Array[Byte], ts: Long): Unit =
    if (!remember(k, value, ts, found = value != null)) aheadFull = true

  // -- writes -----------------------------------------------------------------------------

  /** How a put of `k` is sent: PUT_NEW when the filter has never seen it (not in the committed
   *  store: the server counts it as new without reading it), PUT_PRESENT when this task knows
   *  it is in the committed store, else PUT. The filter learns the key. */
  def putKind(k: KeyBytes): Int = {
    val kind =
      if (isNew(k)) Protocol.WRITE_PUT_NEW
      else if ({ val i = known.find(k); i >= 0 && known.inCommitted(i) }) Protocol.WRITE_PUT_PRESENT
      else Protocol.WRITE_PUT
    if (keyFilter != null) keyFilter.add(k)
    kind
  }

  private def isNew(k: KeyBytes): Boolean = keyFilter != null && !keyFilter.mightContain(k)

  /** After a put of `k` sent as `kind`. A new key of a task whose reads found almost nothing is
   *  not remembered: this task will not read it back, and the record would hold every key it
   *  writes. Exact: the record has no entry of it (checked: a remove may have left one), the
   *  cache none (it never held it), and a repeat reads through the server, which has the write. */
  def wrote(k: KeyBytes, value: Array[Byte], kind: Int): Unit =
    if (!(kind == Protocol.WRITE_PUT_NEW && admitOnlyFound && known.find(k) < 0) && !remember(k, value, clock.now)) forget(k)

  def removed(k: KeyBytes): Unit = if (!remember(k, null, 0L)) forget(k)

  /** Whether the server may append to `k` (WRITE_APPEND) for a read that answered `Ask`: this
   *  task's record holds nothing of it (an entry it holds but could not answer with, an expired
   *  one, would answer later reads wrongly). */
  def appendable(k: KeyBytes): Boolean = known.find(k) < 0

  /** After the server removed every key starting with `prefix` (a column family's): the record
   *  says so for the keys it holds; the executor's cache, which cannot find a family's keys, no
   *  longer answers this version's reads and is renewed at commit. */
  def removedPrefix(prefix: Array[Byte]): Unit = {
    val k = new KeyBytes
    (0 until known.size).map(i => known.key(i)).filter(startsWith(_, prefix)).foreach(key => removed(k.set(key)))
    prefixRemoved = true
    writesForgotten = true
  }

  private def startsWith(key: Array[Byte], prefix: Array[Byte]): Boolean =
    key.length >= prefix.length && java.util.Arrays.equals(key, 0, prefix.length, prefix, 0, prefix.length)

  // -- life of the version -----------------------------------------------------------------

  /** A read store becomes a write store: what it read goes to the cache (committed entries of
   *  this version) and is forgotten (read-only reads neither refresh nor delete). */
  def upgrade(): Unit = {
    if (usableCache) publishKnown()
    known.reset()
    readOnly = false
  }

  /** Before the commit call: the cross-batch cache learns this task's entries on another thread
   *  while the server commits. Exact: until commit returns nothing reads this store's entries,
   *  the entries are tagged with the epoch they were published under, and a commit that fails
   *  renews the epoch (they become misses); the commit returns only once they are all in. */
  def commitStarts(): Unit =
    publishing =
      if (cache != null && !writesForgotten && usableCache && HotCache.fits(known.cacheBytes)) {
        val (owner, epoch, entries, onlyFound, dropRest) = (cache.owner, cacheEpoch, known, admitOnlyFound, dropCached)
        inBackground(() => HotCache.putAll(owner, epoch, entries, onlyFound, dropRest))
      } else null

  def commitFailed(): Unit = if (publishing != null) {
    awaitQuietly(publishing)
    cache.invalidate()
  }

  /** After a commit of this version (as loaded: `generation`, `handle`, `lineage`) to
   *  `committed`: the cache's entries describe the new version. The hint for the store's next task. */
  def committed(generation: Long, handle: Int, lineage: Long, committed: Long): TaskHint = {
    if (cache != null) {
      // A write this task could not remember leaves the cache unsure of that key: start afresh.
      if (writesForgotten) cache.invalidate()
      else if (publishing != null) { if (!awaitQuietly(publishing)) cache.invalidate() }
      else if (usableCache) publishKnown()
      cache.committed(generation, handle, lineage, version, committed)
    }
    TaskHint(known.size, known.dataBytes, foundLittle)
  }

  /** The record goes back for another task, unless an interrupt ended the wait for its
   *  publishing while the cache may still read it (then it is left to the collector). */
  def end(): Unit = if (known != null && (publishing == null || publishing.isDone)) {
    val record = known
    known = null
    TaskRecord.release(record)
  }

  def cacheBytes: Long = if (cache == null) 0L else HotCache.ownerBytes(cache.owner)

  // -- rules -------------------------------------------------------------------------------

  /** Whether what this task remembers of a key still answers a read: an absent key stays
   *  absent; a value must not have expired since, and with OnReadAndWrite a write store must not
   *  owe it a refresh (the server then answers, deleting or refreshing the entry). */
  private def stillKnown(i: Int): Boolean = {
    val ts = known.ts(i)
    !known.hasValue(i) || rules.ttlMs < 0 ||
      (!Expiry.isExpired(ts, rules.ttlMs, clock.now) && !(rules.updateOnRead && !readOnly && ts != clock.now))
  }

  /** Remembers what a read of `key` returns from now on; false if it could not (full). A key
   *  remembered before that the record had to drop is forgotten: it may have been this task's
   *  write. Copies the bytes. */
  private def remember(key: KeyBytes, value: Array[Byte], ts: Long, inCommitted: Boolean = false,
      found: Boolean = false): Boolean = rules.cacheable && {
    val drops = known.drops
    known.put(key, value, ts, inCommitted, found) || { if (known.drops != drops) forget(key); false }
  }

  /** A write `known` has no room for: the cache's committed entry of the key must no longer
   *  answer this task's reads (the server does, with the pending write), and at commit the cache
   *  starts afresh. */
  private def forget(key: KeyBytes): Unit = {
    writesForgotten = true
    if (cache != null) HotCache.remove(cache.owner, key)
  }

  /** Whether this task's reads found almost nothing: under 1/64 of at least 64 reads. */
  private def foundLittle: Boolean = reads >= 64 && readsFound * 64 < reads

  /** Whether the cache should learn only the keys this task's reads found: this task's and the
   *  previous committed task's reads found almost nothing (one such task is not enough: the first
   *  batch of any store finds nothing, and a hot set's next batch reads its keys back). */
  private def admitOnlyFound: Boolean = foundLittle && hint.foundLittle

  /** Whether the store's entries in the cache should go: a store that only grows whose reads hit
   *  none of them (its first batch left its keys there; they would hold the heap for good). */
  private def dropCached: Boolean = admitOnlyFound && cacheHits == 0

  private def usableCache: Boolean =
    !prefixRemoved && cache != null && cache.epoch == cacheEpoch && cache.describes(version)

  /** Hands what this task learned to the cross-batch cache. A task whose entries alone exceed the
   *  whole cache would evict everything else and then part of its own: the store forgets its
   *  entries instead, at the cost of one epoch renewal. */
  private def publishKnown(): Unit = if (cache != null) {
    if (HotCache.fits(known.cacheBytes)) HotCache.putAll(cache.owner, cacheEpoch, known, admitOnlyFound, dropCached)
    else cache.invalidate()
  }

  /** A cache hit, with TTL applied as the server would: an expired entry is hidden (and, in a
   *  write store, deleted by the server, which counts it); OnReadAndWrite refreshes a live one. */
  private def fromCache(key: KeyBytes, e: HotCache.Entry): Array[Byte] = {
    if (rules.ttlMs >= 0 && Expiry.isExpired(e.ts, rules.ttlMs, clock.now)) {
      HotCache.remove(cache.owner, key)
      if (readOnly) expiredInCacheReadOnly += 1 else queueWrite(Protocol.WRITE_REMOVE_EXPIRED, key, null)
      if (!remember(key, null, 0L) && !readOnly) forget(key)
      null
    } else {
      if (!readOnly && rules.updateOnRead && e.ts != clock.now) {
        queueWrite(Protocol.WRITE_PUT_PRESENT, key, e.value) // the server stamps it with its time
        if (!remember(key, e.value, clock.now, inCommitted = true, found = true)) forget(key)
      } else remember(key, e.value, e.ts, inCommitted = true, found = true)
      e.value
    }
  }
}

object CachedReads {
  /** `read`'s answer when the server must be asked. */
  val Ask: Array[Byte] = new Array[Byte](0)

  private val publisher = Executors.newCachedThreadPool { (r: Runnable) =>
    val t = new Thread(r, "ttlstate-cache-publish")
    t.setDaemon(true)
    t
  }

  private def inBackground(work: () => Unit): Future[_] = publisher.submit(new Runnable {
    override def run(): Unit = work()
  })

  /** Waits for `work` to end; whether it succeeded. An interrupt ends the wait (the task is
   *  being killed) and stays set. */
  private def awaitQuietly(work: Future[_]): Boolean =
    try { work.get(); true }
    catch {
      case _: InterruptedException =>
        Thread.currentThread().interrupt()
        false
      case _: Exception => false
    }
}
