#!/bin/sh
# Runs the kit's unit tests (a plain Java main, cellarena.KitTest); build first with sh build.sh.
set -e
cd "$(dirname "$0")"
MSGPACK_JAR="${MSGPACK_JAR:-/usr/share/java/msgpack-core.jar}"
exec java -cp "build/test-classes:build/classes:$MSGPACK_JAR" cellarena.KitTest
