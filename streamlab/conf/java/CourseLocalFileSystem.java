// Hadoop's local file system ("file:"), as the course's Spark driver uses it in local mode (streamlab/stack/local_files.py).
//
// Hadoop sets the permissions of every file and folder it makes. With its native library it does that in the JVM;
// pyspark does not ship that library, so Hadoop starts a `chmod` process instead: two per file (the file and its .crc),
// about nine per micro-batch of a stateful query (its offsets, its commit, a state file per partition). This class sets
// the same permissions through Java's own file API. Everything else is Hadoop's LocalFileSystem, unchanged.
package streamlab;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

public class CourseLocalFileSystem extends LocalFileSystem {
  public CourseLocalFileSystem() {
    super(new Raw());
  }

  /** The files themselves: Hadoop's RawLocalFileSystem, permissions set in-process. */
  public static class Raw extends RawLocalFileSystem {
    // Bit i of a POSIX mode (0 = others' execute ... 8 = owner's read).
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
      for (int bit = 0; bit < BITS.length; bit++) {
        if ((mode & (1 << bit)) != 0) {
          set.add(BITS[bit]);
        }
      }
      Files.setPosixFilePermissions(pathToFile(path).toPath(), set);
    }
  }
}
