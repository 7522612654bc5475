#!/bin/sh
# Builds the bot into build/ (incremental: only what changed is compiled again). `cellarena tournament`
# runs this before every tournament (bot.toml's setup); run it yourself before `cellarena match`.
set -e
cd "$(dirname "$0")"
# CELLARENA_KIT_TESTS=OFF leaves out the kit's own unit tests (what `ctest` runs): a bot's build then
# compiles the bot alone.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING="${CELLARENA_KIT_TESTS:-ON}" >/dev/null
cmake --build build --parallel 2
