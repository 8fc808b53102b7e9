# Run by CMake right after llama.cpp's project() inside llama-cpp-python's build (the Makefile
# passes -DCMAKE_PROJECT_llama.cpp_INCLUDE=<this file>). llama-cpp-python forces
# LLAMA_BUILD_COMMON ON (a cache FORCE before it adds llama.cpp), so a -D cannot turn it off;
# this runs after that and before llama.cpp reads it. libllama-common (with cpp-httplib) is
# installed into the wheel's lib/, but the Python package never loads it (only libllama,
# libggml* and, for images, libmtmd): 53 of the build's 178 objects, cpp-httplib's the costliest
# file of all (39 s of CPU).
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
