cmake_minimum_required(VERSION 3.20)
# The layers, checked (run by ctest as `layers`; cmake -DSOURCE_DIR=<repo> -P cmake/check_layers.cmake):
#   core (format) <- kernels <- gguf <- convert, adapter <- merge <- app <- cli (native edge), wasm (JS edge)
#   job (the step protocol, docs/jobs.md) depends on core alone; convert and every layer above it may use it.
# Each folder below may include project headers only from the folders listed for it, so the dependency arrows
# run one way and a back-arrow (core including kernels, adapter including merge...) fails the build's tests.
# The sans-I/O folders may not include a header that reaches files, sockets, processes or the terminal.
set(PB_LAYERS
  "linalg:linalg"
  "core:core"
  "job:job,core"
  "kernels:kernels,core"
  "convert:convert,job,kernels,core"
  "gguf:gguf,kernels,core"
  "adapter:adapter,gguf,kernels,core"
  "merge:merge,job,adapter,gguf,kernels,core"
  "compose:compose,job,linalg,adapter,gguf,kernels,core"
  "app:app,job,compose,linalg,merge,adapter,gguf,convert,kernels,core"
  "cli:cli,job,app,compose,linalg,merge,adapter,gguf,convert,kernels,core"
)
set(PB_WASM_ALLOWED app job compose linalg merge adapter gguf convert kernels core)
# Headers that do I/O. <cstdio> stays allowed for snprintf; its stream functions are caught by name below.
set(PB_IO_HEADERS fstream iostream istream ostream filesystem unistd.h fcntl.h dirent.h termios.h poll.h
    netdb.h signal.h csignal curl/curl.h emscripten.h emscripten/bind.h)
set(PB_IO_CALLS "fopen\\(" "fread\\(" "fwrite\\(" "fprintf\\(" "std::cout" "std::cerr" "[^sn]printf\\(" "getenv\\(" "std::system\\(")

set(problems "")
function(check_file file allowed sans_io)
  file(READ ${file} text)
  string(REGEX MATCHALL "#include \"[a-z_]+/" includes "${text}")
  foreach(inc IN LISTS includes)
    string(REGEX REPLACE "#include \"([a-z_]+)/" "\\1" folder "${inc}")
    # Only project folders count ("hwy/..." is Highway's own quoted-include convention).
    if(IS_DIRECTORY ${SOURCE_DIR}/src/${folder} AND NOT folder IN_LIST allowed)
      set(problems "${problems}\n  ${file}: includes ${folder}/ (allowed: ${allowed})")
    endif()
  endforeach()
  if(sans_io)
    foreach(h IN LISTS PB_IO_HEADERS)
      string(FIND "${text}" "#include <${h}>" at)
      if(NOT at EQUAL -1)
        set(problems "${problems}\n  ${file}: includes <${h}> in a sans-I/O folder")
      endif()
    endforeach()
    foreach(call IN LISTS PB_IO_CALLS)
      if("${text}" MATCHES "${call}")
        set(problems "${problems}\n  ${file}: calls ${call} in a sans-I/O folder")
      endif()
    endforeach()
  endif()
  set(problems "${problems}" PARENT_SCOPE)
endfunction()

foreach(layer IN LISTS PB_LAYERS)
  string(REPLACE ":" ";" parts "${layer}")
  list(GET parts 0 folder)
  list(GET parts 1 allowed)
  string(REPLACE "," ";" allowed "${allowed}")
  set(sans_io TRUE)
  if(folder STREQUAL "cli")
    set(sans_io FALSE)
  endif()
  file(GLOB files ${SOURCE_DIR}/src/${folder}/*.h ${SOURCE_DIR}/src/${folder}/*.cc)
  foreach(f IN LISTS files)
    check_file(${f} "${allowed}" ${sans_io})
  endforeach()
endforeach()
file(GLOB wasm_files ${SOURCE_DIR}/wasm/*.h ${SOURCE_DIR}/wasm/*.cc)
foreach(f IN LISTS wasm_files)
  check_file(${f} "${PB_WASM_ALLOWED};wasm" FALSE)
endforeach()
# Every source folder must be in the table, so a new one cannot slip past the check.
file(GLOB folders LIST_DIRECTORIES true RELATIVE ${SOURCE_DIR}/src ${SOURCE_DIR}/src/*)
foreach(folder IN LISTS folders)
  if(IS_DIRECTORY ${SOURCE_DIR}/src/${folder})
    string(FIND "${PB_LAYERS}" "${folder}:" known)
    if(known EQUAL -1)
      set(problems "${problems}\n  src/${folder}/ is not in the layer table of cmake/check_layers.cmake")
    endif()
  endif()
endforeach()

if(problems)
  message(FATAL_ERROR "layer violations:${problems}")
endif()
message(STATUS "layers: ok")
