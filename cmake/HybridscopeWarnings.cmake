# hs_set_warnings(target): the project's warnings, private to each target.
function(hs_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
endfunction()
