cmake_minimum_required(VERSION 3.20)
# The layers, checked (run by ctest as `layers`; cmake -DSOURCE_DIR=<repo> -P cmake/check_layers.cmake):
#   core <- kernels <- gguf <- convert, adapter <- merge <- app <- cli (native edge), wasm (JS edge);
#   text (Python's regex and json.dumps, the size format) on core alone, under adapter;
#   linalg beside them, under compose; net (HTTP, URLs, Hub protocol) on core alone, under app.
#   job (the step protocol, docs/jobs.md) depends on core alone; convert and every layer above it may use it.
# Each folder below may include project headers only from the folders listed for it, so the dependency arrows
# run one way and a back-arrow (core including kernels, adapter including merge...) fails the build's tests.
# The sans-I/O folders may not include a header that reaches files, sockets, processes or the terminal.
set(PB_LAYERS
  "linalg:linalg"
  "core:core"
  "job:job,core"
  "text:text,core"
  "kernels:kernels,core"
  "convert:convert,job,kernels,core"
  "gguf:gguf,kernels,core"
  "adapter:adapter,text,gguf,kernels,core"
  "merge:merge,job,adapter,text,gguf,kernels,core"
  "compose:compose,job,linalg,adapter,text,gguf,kernels,core"
  "net:net,core"
  "app:app,job,net,compose,linalg,merge,adapter,text,gguf,convert,kernels,core"
  "cli:cli,job,app,net,compose,linalg,merge,adapter,text,gguf,convert,kernels,core"
)
set(PB_WASM_ALLOWED app job net compose linalg merge adapter text gguf convert kernels core)
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

# The README's layer list (between `<!-- layers -->` and `<!-- /layers -->`: "- `src/FOLDER/`...: USED, USED" or
# "- `wasm/`...: app", `—` for none) must say what the table above says: every layer once, and what each may
# include is exactly the layers its line names and everything those may include.
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "<!-- layers -->" list_begin)
string(FIND "${readme}" "<!-- /layers -->" list_end)
if(list_begin EQUAL -1 OR list_end LESS list_begin)
  set(problems "${problems}\n  README.md has no layer list between <!-- layers --> and <!-- /layers -->")
else()
  math(EXPR list_length "${list_end} - ${list_begin}")
  string(SUBSTRING "${readme}" ${list_begin} ${list_length} readme_list)
  string(REGEX MATCHALL "\n- `(src/[a-z_]+|wasm)/`[^:\n]*:[^\n]*" readme_lines "${readme_list}")
  set(readme_layers "")
  foreach(line IN LISTS readme_lines)
    string(REGEX REPLACE "^\n- `(src/)?([a-z_]+)/`.*$" "\\2" folder "${line}")
    string(REGEX REPLACE "^[^:]*:(.*)$" "\\1" used "${line}")
    string(REGEX MATCHALL "[a-z_]+" used "${used}")
    list(APPEND readme_layers ${folder})
    set(readme_uses_${folder} ${used})
  endforeach()
  # What the README says each layer may include: the transitive closure of its line.
  function(readme_closure folder out)
    set(seen "")
    set(todo ${readme_uses_${folder}})
    while(todo)
      list(POP_FRONT todo next)
      if(NOT next IN_LIST seen)
        list(APPEND seen ${next})
        list(APPEND todo ${readme_uses_${next}})
      endif()
    endwhile()
    list(SORT seen)
    set(${out} "${seen}" PARENT_SCOPE)
  endfunction()
  set(table_layers "")
  string(REPLACE ";" "," wasm_allowed "wasm;${PB_WASM_ALLOWED}")
  foreach(layer IN LISTS PB_LAYERS ITEMS "wasm:${wasm_allowed}")
    string(REPLACE ":" ";" parts "${layer}")
    list(GET parts 0 folder)
    list(GET parts 1 allowed)
    string(REPLACE "," ";" allowed "${allowed}")
    list(REMOVE_ITEM allowed ${folder})
    list(SORT allowed)
    list(APPEND table_layers ${folder})
    if(NOT folder IN_LIST readme_layers)
      set(problems "${problems}\n  README.md's layer list has no line for ${folder}/")
      continue()
    endif()
    readme_closure(${folder} said)
    if(NOT "${said}" STREQUAL "${allowed}")
      set(problems "${problems}\n  README.md's layer list lets ${folder}/ use (${said}); the layer table: (${allowed})")
    endif()
  endforeach()
  foreach(folder IN LISTS readme_layers)
    if(NOT folder IN_LIST table_layers)
      set(problems "${problems}\n  README.md's layer list names ${folder}/, which is not in the layer table")
    endif()
  endforeach()
endif()

if(problems)
  message(FATAL_ERROR "layer violations:${problems}")
endif()
message(STATUS "layers: ok")
