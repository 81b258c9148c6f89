package ttlstate.spark;

/** What every entry point of the shim does first: check that this jar is the running Spark's (its
 *  line, and the Scala it was compiled with), naming the jar to use instead. A jar serves the one
 *  Spark line it was compiled for (Spark's state store API changes between minors), and a jar of
 *  another line fails later with a bare NoSuchMethodError, or, between Scala 2.12 (Spark 3.5) and
 *  2.13, with a NoClassDefFoundError as soon as a Scala class of the shim loads.
 *
 *  Written in Java, using only the JDK and reflection, so that it loads and runs on every line
 *  before any Scala class of the shim is touched; the entry classes Spark loads by name
 *  (TtlStateExtensions, StateServerPlugin) are Java too, and delegate once it passes. */
public final class LineCheck {
  private LineCheck() {}

  private static volatile String failure;
  private static volatile boolean checked;

  /** "4.2.1" -> "4.2"; a vendor's suffix ("3.5.0-amzn-1") is ignored. */
  public static String minorOf(String version) {
    String[] parts = version.trim().split("[.-]");
    return parts.length >= 2 ? parts[0] + "." + parts[1] : version;
  }

  /** Why this jar cannot serve Spark `running` on Scala `scala` ("2.12.18" or "2.12"), or null. */
  public static String mismatch(String running, String scala) {
    String minor = minorOf(running);
    if (!minor.equals(BuiltFor.MINOR)) {
      for (String[] line : BuiltFor.JARS) {
        if (line[0].equals(minor)) {
          return "This ttlstate shim jar is built for Spark " + BuiltFor.MINOR + ", but this is Spark " + running
              + ": put " + line[1] + " on spark.jars instead (`ttlstate jar --spark " + minor
              + "` prints its path; ttlstate.configure() picks it).";
        }
      }
      StringBuilder lines = new StringBuilder();
      for (String[] line : BuiltFor.JARS) lines.append(lines.length() == 0 ? "" : ", ").append(line[0]);
      return "ttlstate has no shim for Spark " + running + ": it supports Spark " + lines + " (one jar per line).";
    }
    String binary = minorOf(scala);
    if (!binary.equals(BuiltFor.SCALA)) {
      return "This ttlstate shim jar is built for Spark " + BuiltFor.MINOR + " on Scala " + BuiltFor.SCALA
          + ", but this Spark " + running + " runs on Scala " + binary + ": ttlstate serves Spark " + BuiltFor.MINOR
          + " on Scala " + BuiltFor.SCALA + " only (the build pyspark and Spark's default download ship).";
    }
    return null;
  }

  /** The running Spark's version (`org.apache.spark.SPARK_VERSION`). */
  public static String runningSpark() {
    return (String) moduleCall("org.apache.spark.package$", "SPARK_VERSION");
  }

  /** The running Scala library's version, e.g. "2.13.16". */
  public static String runningScala() {
    return (String) moduleCall("scala.util.Properties$", "versionNumberString");
  }

  private static Object moduleCall(String objectClass, String method) {
    try {
      Class<?> c = Class.forName(objectClass, true, LineCheck.class.getClassLoader());
      Object module = c.getField("MODULE$").get(null);
      return c.getMethod(method).invoke(module);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("ttlstate: cannot read " + objectClass + "." + method + ": " + e, e);
    }
  }

  /** Fails, naming the right jar, when this jar is not the running Spark's. */
  public static void check() {
    if (!checked) {
      failure = mismatch(runningSpark(), runningScala());
      checked = true;
    }
    if (failure != null) throw new IllegalStateException("[TTLSTATE_WRONG_SPARK] " + failure);
  }

  /** A new instance of the shim's class `className` (a Scala class: load it only once checked). */
  @SuppressWarnings("unchecked")
  static <T> T instance(String className) {
    check();
    try {
      return (T) Class.forName(className, true, LineCheck.class.getClassLoader()).getConstructor().newInstance();
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("ttlstate: cannot load " + className + ": " + e, e);
    }
  }
}
