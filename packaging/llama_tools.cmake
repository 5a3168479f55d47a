# llama.cpp's tools (llama-server, ggml-rpc-server; llama-quantize, llama-perplexity, llama-bench) built by
# llama-cpp-python's own wheel build, so that llama.cpp is compiled once.
#
# packaging/llama_tools.py (wheel_cmake_args) adds to the wheel's CMAKE_ARGS
#     -DCMAKE_PROJECT_INCLUDE=<this file> -DGLASSBOX_LLAMA_TOOLS=llama-server;ggml-rpc-server;...
# CMake includes this file after every project() call (CMake's documented way to inject code into a
# project one does not own). It acts at two of them:
#
# - llama-cpp-python's project(llama_cpp): LLAVA_BUILD off. The sdist adds llama.cpp's tools/mtmd
#   itself when it is on, and llama.cpp's tools/ folder (below) adds it too: a target may exist once.
#   libmtmd is then built by llama.cpp's tools/ and installed into llama_cpp/lib here instead.
# - llama.cpp's project("llama.cpp"): LLAMA_BUILD_TOOLS and LLAMA_BUILD_SERVER on (llama.cpp's own
#   options: the tools compile against the ggml, libllama and libllama-common this build makes for the
#   Python binding, so llama.cpp is compiled once), no web UI (neither an npm build nor a download of
#   the prebuilt one: the server serves its API only), and, at the end of llama.cpp's CMakeLists.txt
#   (a deferred call: by then every target exists), every tool not in GLASSBOX_LLAMA_TOOLS taken out
#   of the default build, and the wanted ones and the libraries they load installed beside libllama.so
#   (llama_cpp/lib) with an RPATH of $ORIGIN, as the sdist installs its own libraries.
#
# Normal variables set before option() win over the option's default (policy CMP0077, NEW in both
# projects). A deferred call may not add folders, only change targets and add install rules.

if(PROJECT_NAME STREQUAL "llama_cpp")
    set(LLAVA_BUILD OFF)
    return()
endif()
if(NOT PROJECT_NAME STREQUAL "llama.cpp")
    return()
endif()
if(NOT DEFINED SKBUILD_PLATLIB_DIR)
    message(FATAL_ERROR "glassbox: packaging/llama_tools.cmake is for llama-cpp-python's wheel build (scikit-build-core)")
endif()
if(NOT GLASSBOX_LLAMA_TOOLS)
    message(FATAL_ERROR "glassbox: set GLASSBOX_LLAMA_TOOLS to the tools' targets (e.g. llama-server;ggml-rpc-server)")
endif()

set(LLAMA_BUILD_TOOLS ON)
set(LLAMA_BUILD_SERVER ON)
set(LLAMA_BUILD_UI OFF)
set(LLAMA_USE_PREBUILT_UI OFF)
# tools/server installs llama-server to ${CMAKE_INSTALL_BINDIR}: beside the libraries, in this folder only.
set(GLASSBOX_LLAMA_LIB "${SKBUILD_PLATLIB_DIR}/llama_cpp/lib")
set(CMAKE_INSTALL_BINDIR "${GLASSBOX_LLAMA_LIB}")

function(glassbox_targets_under dir out)
    get_property(found DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    foreach(sub IN LISTS subdirs)
        glassbox_targets_under("${sub}" more)
        list(APPEND found ${more})
    endforeach()
    set(${out} ${found} PARENT_SCOPE)
endfunction()

function(glassbox_llama_tools)
    set(wanted ${GLASSBOX_LLAMA_TOOLS})
    set(missing "")
    foreach(tool IN LISTS wanted)
        if(NOT TARGET ${tool})
            list(APPEND missing ${tool})
        endif()
    endforeach()
    list(REMOVE_ITEM wanted ${missing})
    set(tools ${wanted})
    if(missing)  # e.g. ggml-rpc-server without GGML_RPC: packaging/llama_tools.py notices its absence
        message(WARNING "glassbox: llama.cpp defines no target ${missing}; not built")
    endif()

    # Out of the default build: every tool but the wanted ones (what they link is built as their dependency).
    glassbox_targets_under("${CMAKE_CURRENT_SOURCE_DIR}/tools" all_tools)
    foreach(target IN LISTS all_tools)
        if(NOT target IN_LIST wanted AND NOT target STREQUAL "mtmd")
            set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
        endif()
    endforeach()

    # Installed beside libllama.so: the tools and the shared libraries of llama.cpp's they load that the
    # sdist does not ship there (libllama-common, the tools' own *-impl libraries; it ships libllama and
    # libggml*), and libmtmd, which the sdist ships but, with LLAVA_BUILD off, does not install itself.
    set(libs mtmd)
    set(queue ${tools})
    set(seen "")
    while(queue)
        list(POP_FRONT queue target)
        if(target IN_LIST seen OR NOT TARGET ${target})
            continue()
        endif()
        list(APPEND seen ${target})
        get_target_property(kind ${target} TYPE)
        get_target_property(imported ${target} IMPORTED)
        if(imported OR kind STREQUAL "INTERFACE_LIBRARY")
            continue()
        endif()
        if(kind STREQUAL "SHARED_LIBRARY" AND NOT target MATCHES "^(llama|ggml|ggml-.*)$")
            list(APPEND libs ${target})
        endif()
        get_target_property(deps ${target} LINK_LIBRARIES)
        if(deps)
            list(APPEND queue ${deps})
        endif()
    endwhile()
    list(REMOVE_DUPLICATES libs)
    set(lib "${GLASSBOX_LLAMA_LIB}")
    install(TARGETS ${libs} LIBRARY DESTINATION "${lib}" RUNTIME DESTINATION "${lib}" ARCHIVE DESTINATION "${lib}")
    list(REMOVE_ITEM wanted llama-server)  # tools/server installs it itself (CMAKE_INSTALL_BINDIR above)
    if(wanted)
        install(TARGETS ${wanted} RUNTIME DESTINATION "${lib}")
    endif()
    if(APPLE)
        set(origin "@loader_path")
    else()
        set(origin "$ORIGIN")
    endif()
    set_target_properties(${tools} ${libs} PROPERTIES INSTALL_RPATH "${origin}" BUILD_WITH_INSTALL_RPATH TRUE)
    message(STATUS "glassbox: ${tools} and ${libs} go to llama_cpp/lib")
endfunction()

cmake_language(DEFER CALL glassbox_llama_tools)
