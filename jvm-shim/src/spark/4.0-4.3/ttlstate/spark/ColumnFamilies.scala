package ttlstate.spark

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{KeyStateEncoderSpec, StateStore, StateStoreErrors,
  UnsafeRowDataEncoder}
import org.apache.spark.sql.types.StructType
import ttlstate.store.{KeyCodec, RowKeys, RowLayout}

/** One column family of a store: its entries' layout (keys behind the family's name, encoded by
 *  Spark's own key encoder of its `KeyStateEncoderSpec`), and whether a key holds several values
 *  (`MultiValues`: Spark's `ListState`). */
final class ColumnFamily(val name: String, val layout: RowLayout, val multiValues: Boolean, val internal: Boolean)

/** The column families of one store (transformWithState's stores have them: one per state
 *  variable, and its timers' and TTL's). A family is a key prefix in the store's one RocksDB
 *  (`KeyCodec.InFamily`), so the state server, the changelogs, both snapshot layouts, both
 *  checkpoint formats and their repair hold families as they hold any key: nothing about them is
 *  recorded besides the keys, and a family exists in a version while it holds a key. Spark names
 *  each family, with its schemas, whenever a task opens its store (`createColFamilyIfAbsent`),
 *  and those are kept here for the provider's later versions. */
final class ColumnFamilies(default: ColumnFamily) {
  private val families = new ConcurrentHashMap[String, ColumnFamily]()
  families.put(default.name, default)

  def register(family: ColumnFamily): Unit = families.putIfAbsent(family.name, family)
  def forget(name: String): Unit = if (name != default.name) families.remove(name)
  def names: Set[String] = families.keySet().asScala.toSet

  /** How many families of each kind Spark created here (the default included): (user, internal),
   *  what Spark's RocksDB provider reports of the families it created. */
  def counts: (Long, Long) = {
    val internal = families.values().asScala.count(_.internal).toLong
    (families.size.toLong - internal, internal)
  }

  /** The family `name`; one Spark never created fails as Spark's own provider fails. */
  def apply(name: String): ColumnFamily = {
    val family = families.get(name)
    if (family == null) throw StateStoreErrors.unsupportedOperationException(
      s"column family '$name' that this store has not created", "TtlStateStoreProvider")
    family
  }
}

object ColumnFamilies {
  /** The family `name` of a store with column families, its keys encoded by Spark's encoder of
   *  `spec` (which keeps range-scan keys in order). */
  def family(name: String, keySchema: StructType, valueSchema: StructType, spec: KeyStateEncoderSpec,
      multiValues: Boolean, internal: Boolean): ColumnFamily = {
    val encoder = spec.toEncoder(new UnsafeRowDataEncoder(spec, valueSchema), false)
    val keys = new RowKeys {
      def encode(key: UnsafeRow): Array[Byte] = encoder.encodeKey(key)
      def decode(encoded: Array[Byte]): UnsafeRow = encoder.decodeKey(encoded)
      def encodePrefix(prefixKey: UnsafeRow): Array[Byte] = encoder.encodePrefixKey(prefixKey)
    }
    new ColumnFamily(name, RowLayout(new KeyCodec.InFamily(name, keys), valueSchema.length), multiValues, internal)
  }

  /** A store without column families: its one family is the default, its keys as ever. */
  def single(codec: KeyCodec, valueSchema: StructType): ColumnFamilies =
    new ColumnFamilies(new ColumnFamily(StateStore.DEFAULT_COL_FAMILY_NAME, RowLayout(codec, valueSchema.length),
      multiValues = false, internal = false))
}
