package org.apache.spark.ttlstatebridge

import org.apache.spark.util.NextIterator

/** Spark's NextIterator is private to org.apache.spark, yet SupportsFineGrainedReplay's change
 *  feed must return one: the shim's change feed extends it through this class. */
abstract class NextIteratorBridge[U] extends NextIterator[U] {
  protected final def end(): Unit = finished = true
}
