# hs_torch_pch(target [REUSE_FROM other] [WITHOUT_TORCH source...]): <torch/torch.h> as the
# target's precompiled header (its own, or `other`'s), except in the listed sources. A precompiled
# header is forced into every source of its target: one that includes nothing of LibTorch (a
# report command, a config test, the KV block pool) then costs ~17 s to compile where it alone
# takes a few, and a fresh `make demo` waits on them. The lists name the sources whose include
# closure has no LibTorch header (a source listed that later includes LibTorch still builds, only
# without the precompiled header's saving). No-op with -DHS_USE_PCH=OFF.
function(hs_torch_pch target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "REUSE_FROM" "WITHOUT_TORCH")
  if(NOT HS_USE_PCH)
    return()
  endif()
  if(arg_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${arg_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
  endif()
  get_target_property(dir ${target} SOURCE_DIR)
  foreach(src IN LISTS arg_WITHOUT_TORCH)
    if(NOT IS_ABSOLUTE "${src}")
      set(src "${dir}/${src}")
    endif()
    if(NOT EXISTS "${src}")
      message(FATAL_ERROR "hs_torch_pch(${target}): ${src} does not exist (a renamed source: update its WITHOUT_TORCH list)")
    endif()
    set_source_files_properties("${src}" TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endforeach()
endfunction()
