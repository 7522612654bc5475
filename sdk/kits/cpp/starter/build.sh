#!/bin/sh
# Builds the bot into build/ (incremental: only what changed is compiled again). `cellarena tournament`
# runs this before every tournament (bot.toml's setup); run it yourself before `cellarena match`.
set -e
cd "$(dirname "$0")"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --parallel 2
