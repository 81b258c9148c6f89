package ttlstate.spark

import java.util.concurrent.ConcurrentHashMap

import org.apache.spark.TaskContext
import ttlstate.store.StoreVersion

/** The open store of each running task of one provider, on Spark lines without
 *  `upgradeReadStoreToWriteStore` (3.5, 4.0). There a task of an aggregation or a session window
 *  loads a write store and a read store of the same version (the save and the restore step of
 *  one stage), and two loads of one version cannot both stay open on the state server: the
 *  second would supersede the first. So the second load is served by the first: a read store
 *  while the task holds the write store reads through it (as Spark's RocksDB provider shares
 *  one instance), and a write store while the task holds a read store is that store, upgraded
 *  (as Spark 4.1 and later ask for themselves). A read store nothing upgraded is released when
 *  the task ends, as Spark 4.1 releases it. */
final class TaskStores[S](session: S => StoreVersion) {
  private val ofTask = new ConcurrentHashMap[Long, S]()

  /** The calling task's open store of `version`, if it has one. */
  def current(version: Long): Option[S] =
    Option(TaskContext.get()).flatMap(t => Option(ofTask.get(t.taskAttemptId())))
      .filter { s => val v = session(s); v.version == version && v.isOpen }

  /** Records `store` as the calling task's (outside a task, nothing to record). */
  def opened(store: S): S = {
    Option(TaskContext.get()).foreach { task =>
      val attempt = task.taskAttemptId()
      if (ofTask.put(attempt, store) == null) {
        task.addTaskCompletionListener[Unit] { _ =>
          Option(ofTask.remove(attempt)).map(session).filter(_.isOpen).foreach(_.release())
        }
      }
    }
    store
  }
}
