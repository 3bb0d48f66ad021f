# Run at every build (cmake -P): writes OUT, the C definition of the git
# description of SOURCE_DIR (`git describe --always --dirty --tags`; "" when GIT
# is empty or SOURCE_DIR is not a checkout git accepts), rewriting it only when
# the text changes so that nothing relinks for a build at the same commit.
set(desc "")
if(GIT)
  execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} describe --always --dirty --tags
                  OUTPUT_VARIABLE out ERROR_QUIET RESULT_VARIABLE rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  # a description is [0-9A-Za-z._-]: anything else (a quote) would break the C string
  if(rc EQUAL 0 AND out MATCHES "^[0-9A-Za-z._-]+$")
    set(desc "${out}")
  endif()
endif()
set(text "/* written by base/version.cmake at build time */\nconst char ws_version_git_desc[] = \"${desc}\";\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
