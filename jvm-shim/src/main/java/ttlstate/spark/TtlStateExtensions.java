package ttlstate.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import scala.Function1;
import scala.runtime.BoxedUnit;

/** `spark.sql.extensions=ttlstate.spark.TtlStateExtensions`: checks the Spark line when the session
 *  starts (LineCheck), then installs ttlstate's start checks and planning rules
 *  (TtlStateSessionExtensions, Scala). Java, so that a jar of another line fails here naming the
 *  right jar on Scala 2.12 and 2.13 alike; Spark would log and skip an extension whose class does
 *  not load. */
public final class TtlStateExtensions implements Function1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    Function1<SparkSessionExtensions, BoxedUnit> rules = LineCheck.instance("ttlstate.spark.TtlStateSessionExtensions");
    rules.apply(extensions);
    return BoxedUnit.UNIT;
  }
}
