// The cellarena C++ kit (C++17, msgpack-cxx 4.1): include this one header. README.md shows how.
#pragma once
#define CELLARENA_KIT_VERSION "0.1.0"
#include "cellarena/bot.hpp"
