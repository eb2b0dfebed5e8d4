// Merges jars into one, moving the given packages under Iceberg's shaded
// prefix. The iceberg-spark-runtime jar on PyPI (local-dev/java.sh) was built
// without its relocated Jackson and HttpClient 5, and Maven Central, where the
// complete jar lives, is out of reach offline: this rebuilds the missing
// classes from jars that are at hand (pyspark's, Debian's).
//
// Usage: java -cp asm.jar:asm-commons.jar Relocate.java OUT.jar PKG[,PKG...] IN.jar...
// e.g. PKG = com.fasterxml.jackson becomes org.apache.iceberg.shaded.com.fasterxml.jackson.
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipOutputStream;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.commons.ClassRemapper;
import org.objectweb.asm.commons.Remapper;

public class Relocate {
  static final String SHADED = "org/apache/iceberg/shaded/";
  static final List<String> packages = new ArrayList<>(); // "com/fasterxml/jackson/"

  // A class or resource path ("a/b/C"), or a class name in a string
  // constant ("a.b.C": Jackson loads some of its classes by name).
  static String move(String name) {
    for (String p : packages) {
      if (name.startsWith(p)) return SHADED + name;
      if (name.startsWith(p.replace('/', '.'))) return SHADED.replace('/', '.') + name;
    }
    return name;
  }

  static final Remapper REMAPPER = new Remapper() {
    @Override
    public String map(String internalName) {
      return move(internalName);
    }

    @Override
    public Object mapValue(Object value) {
      return value instanceof String ? move((String) value) : super.mapValue(value);
    }
  };

  // Module descriptors and multi-release variants name the old packages and
  // are not needed on a plain classpath (the base classes run on any JVM);
  // the manifests and signatures belong to the jars being taken apart.
  static boolean dropped(String name) {
    return name.endsWith("module-info.class")
        || name.startsWith("META-INF/versions/")
        || name.equals("META-INF/MANIFEST.MF")
        || name.matches("META-INF/[^/]*\\.(SF|RSA|DSA)");
  }

  public static void main(String[] args) throws IOException {
    for (String p : args[1].split(",")) packages.add(p.replace('.', '/') + "/");
    Set<String> written = new HashSet<>();
    try (ZipOutputStream out = new ZipOutputStream(Files.newOutputStream(Path.of(args[0])))) {
      for (int i = 2; i < args.length; i++) {
        try (ZipFile in = new ZipFile(args[i])) {
          for (ZipEntry entry : Collections.list(in.entries())) {
            String name = entry.getName();
            if (entry.isDirectory() || dropped(name)) continue;
            byte[] data = in.getInputStream(entry).readAllBytes();
            if (name.endsWith(".class")) {
              ClassWriter writer = new ClassWriter(0);
              new ClassReader(data).accept(new ClassRemapper(writer, REMAPPER), 0);
              data = writer.toByteArray();
            } else if (name.startsWith("META-INF/services/")) {
              // ServiceLoader files: both the interface (file name) and the
              // implementations (lines) are class names.
              name = "META-INF/services/" + move(name.substring("META-INF/services/".length()));
              data = new String(data, StandardCharsets.UTF_8).lines()
                  .map(Relocate::move)
                  .collect(Collectors.joining("\n", "", "\n"))
                  .getBytes(StandardCharsets.UTF_8);
            }
            name = move(name);
            // Licence and notice files repeat across jars: the first one stays.
            if (!written.add(name)) continue;
            out.putNextEntry(new ZipEntry(name));
            out.write(data);
            out.closeEntry();
          }
        }
      }
    }
  }
}
